from django.contrib.auth import views as auth_views
from django.urls import include, path
from oauth2_provider.views import DeviceAuthorizationView


class DeviceAuthorization(DeviceAuthorizationView):
    """oauthlib 4 adds the resolved ``scope`` to the device authorization response, which
    django-oauth-toolkit 3.4.1's DeviceCodeResponse does not take (a TypeError, 500): dropped here,
    as RFC 8628 §3.2 does not define it."""

    def create_device_authorization_response(self, request):
        headers, response, status = super().create_device_authorization_response(request)
        if isinstance(response, dict):
            response.pop("scope", None)
        return headers, response, status


urlpatterns = [
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("o/device-authorization/", DeviceAuthorization.as_view()),
    path("o/", include("oauth2_provider.urls", namespace="oauth2_provider")),
]
