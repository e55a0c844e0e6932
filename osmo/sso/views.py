"""The login page's single sign-on state, the CLI's discovery endpoint, and logout at the provider."""

from __future__ import annotations

from urllib.parse import urlencode

import requests
from django.http import HttpRequest
from django.urls import reverse
from django.utils.functional import SimpleLazyObject
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from osmo import config as osmo_config
from osmo.sso import config
from osmo.sso.shared_cache import cache_get, cache_set

PROVIDER_STATUS_KEY = "osmo-sso:provider-up"
PROVIDER_STATUS_SECONDS = 10


def provider_up() -> bool:
    """Whether the provider answers (its JWKS), remembered for a few seconds."""
    known = cache_get(PROVIDER_STATUS_KEY)
    if known is not None:
        return bool(known)
    try:
        up = requests.get(osmo_config.sso().jwks_endpoint, timeout=3).status_code == 200
    except requests.RequestException:
        up = False
    cache_set(PROVIDER_STATUS_KEY, up, timeout=PROVIDER_STATUS_SECONDS)
    return up


class _SSOState:
    def __init__(self, request: HttpRequest) -> None:
        self.enabled = config.enabled()
        self.name = osmo_config.sso().provider_name
        self.issuer = osmo_config.sso().issuer
        self.failed = request.GET.get("sso") == "failed"
        # A session that signed in through the provider logs out there too.
        self.session = "oidc_id_token_expiration" in getattr(request, "session", {})

    @property
    def provider_up(self) -> bool:
        return provider_up()


def sso_context(request: HttpRequest) -> dict:
    """Template context ``sso``: computed (and the provider asked) only by a template that reads it."""
    return {"sso": SimpleLazyObject(lambda: _SSOState(request))}


class SSODiscoveryOutputSerializer(serializers.Serializer):
    enabled = serializers.BooleanField(help_text="Whether single sign-on is configured; the rest only when it is.")
    issuer = serializers.CharField(required=False)
    client_id = serializers.CharField(required=False, help_text="The public client of the device flow.")
    device_authorization_endpoint = serializers.CharField(required=False, allow_blank=True)
    token_endpoint = serializers.CharField(required=False)
    scope = serializers.CharField(required=False)


class SSODiscoveryView(APIView):
    """``GET /api/auth/sso/`` (anonymous): where ``osmo login --device`` signs in."""

    authentication_classes: list = []
    permission_classes = [AllowAny]

    @extend_schema(responses={200: SSODiscoveryOutputSerializer}, summary="Single sign-on discovery (for the CLI)")
    def get(self, request: Request) -> Response:
        if not config.enabled():
            return Response({"enabled": False})
        return Response({
            "enabled": True,
            "issuer": osmo_config.sso().issuer,
            "client_id": osmo_config.sso().cli_client_id or osmo_config.sso().client_id,
            "device_authorization_endpoint": osmo_config.sso().device_authorization_endpoint,
            "token_endpoint": osmo_config.sso().token_endpoint,
            "scope": osmo_config.sso().scopes,
        })


def provider_logout_url(request: HttpRequest) -> str:
    """Where the browser goes after logging out here: the provider's end-session endpoint (OpenID
    Connect RP-initiated logout) when it has one, back to the login page afterwards."""
    back = request.build_absolute_uri(reverse("login"))
    if not osmo_config.sso().end_session_endpoint:
        return back
    params = {"post_logout_redirect_uri": back, "client_id": osmo_config.sso().client_id}
    id_token = request.session.get("oidc_id_token")
    if id_token:
        params["id_token_hint"] = id_token
    return f"{osmo_config.sso().end_session_endpoint}?{urlencode(params)}"
