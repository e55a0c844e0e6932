from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from ops import health
from ops.version import VersionView

urlpatterns = [
    # Answered by ops.health.ProbeMiddleware before these routes are reached; here for reverse().
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", health.metrics, name="metrics"),
    path("admin/", admin.site.urls),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    # Single sign-on: /oidc/ (the browser flow) and /api/auth/sso/ (the CLI's device flow).
    path("", include("osmo.sso.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
    path("api/version/", VersionView.as_view(), name="version"),
    path("api/", include("scheduler.api.urls")),
    path("api/", include("workflows.api.urls")),
    path("api/", include("credentials.api")),
    path("api/", include("catalog.api")),
    path("", include("pages.urls")),
]

handler400 = "osmo.api.views.bad_request"
handler403 = "osmo.api.views.permission_denied"
handler404 = "osmo.api.views.not_found"
handler500 = "osmo.api.views.server_error"
