from django.urls import include, path

from osmo.sso import views

urlpatterns = [
    path("api/auth/sso/", views.SSODiscoveryView.as_view(), name="sso-discovery"),
    # authenticate/ (to the provider), callback/ (back from it), logout/
    path("oidc/", include("mozilla_django_oidc.urls")),
]
