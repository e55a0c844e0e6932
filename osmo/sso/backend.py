"""The browser's sign-in through the provider: mozilla-django-oidc's authorization code flow, with the
same user and team mapping as API tokens (``teams.user_sync``)."""

from __future__ import annotations

from django.contrib import messages
from mozilla_django_oidc.auth import OIDCAuthenticationBackend  # type: ignore[import-untyped]
from mozilla_django_oidc.middleware import SessionRefresh  # type: ignore[import-untyped]

from osmo.sso import config
from osmo.sso.teams import LocalAccountConflict, user_sync


class OIDCBackend(OIDCAuthenticationBackend):
    """Does nothing while single sign-on is off (the library's settings are empty then)."""

    def __init__(self, *args, **kwargs):
        if config.enabled():
            super().__init__(*args, **kwargs)

    def authenticate(self, request, **kwargs):
        if not config.enabled():
            return None
        return super().authenticate(request, **kwargs)

    def get_userinfo(self, access_token, id_token, payload):
        # The ID token's claims, completed by the userinfo endpoint's (which wins where both say).
        return {**payload, **super().get_userinfo(access_token, id_token, payload)}

    def verify_claims(self, claims):
        return config.username_from(claims) is not None

    def get_or_create_user(self, access_token, id_token, payload):
        claims = self.get_userinfo(access_token, id_token, payload)
        if not self.verify_claims(claims):
            return None
        try:
            user, notice = user_sync(claims)
        except LocalAccountConflict as error:
            messages.error(self.request, f"Single sign-on refused: {error}. Log in with its password instead.")
            return None
        if notice:
            messages.warning(self.request, notice)
        return user


class OIDCSessionRefresh(SessionRefresh):
    """When the ID token of a session signed in through the provider expires, re-authenticate
    silently (``prompt=none``); nothing while single sign-on is off."""

    def is_refreshable_url(self, request):
        return config.enabled() and super().is_refreshable_url(request)
