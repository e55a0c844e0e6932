from collections.abc import Callable
from functools import wraps
from typing import Any

from django.http import Http404, HttpRequest, HttpResponse
from django.urls import include, path
from mozilla_django_oidc import urls as oidc_urls  # type: ignore[import-untyped]

from osmo.sso import config, views


def _only_when_enabled(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """With single sign-on off, a 404 before mozilla-django-oidc's view runs: its authenticate view
    would store a state in a new session (a row per anonymous request) and redirect to an empty
    provider address, i.e. to itself. Decided per request, so turning it on needs no other route."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not config.enabled():
            raise Http404("Single sign-on is not configured.")
        return view(request, *args, **kwargs)

    return wrapped


urlpatterns = [
    path("api/auth/sso/", views.SSODiscoveryView.as_view(), name="sso-discovery"),
    # authenticate/ (to the provider), callback/ (back from it), logout/
    path("oidc/", include([path(str(pattern.pattern), _only_when_enabled(pattern.callback), name=pattern.name)
                           for pattern in oidc_urls.urlpatterns])),
]
