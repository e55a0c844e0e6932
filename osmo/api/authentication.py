"""API token authentication with failed attempts throttled per client address."""

from __future__ import annotations

from django.utils.translation import gettext_lazy as _
from rest_framework.authentication import TokenAuthentication, get_authorization_header
from rest_framework.exceptions import AuthenticationFailed, Throttled

from credentials.models import ApiKey
from credentials.tokens import digest, expired, is_access_token, token_user
from osmo.api.throttling import AuthFailureThrottle

KEYWORDS = (b"token", b"bearer")


class ThrottledTokenAuthentication(TokenAuthentication):
    """``Authorization: Token <key>`` as DRF's, or ``Authorization: Bearer <key>`` (what kubectl and
    most HTTP clients send) with the same key. An address that sent too many wrong tokens (rate
    ``auth_failure``) gets 429 with ``Retry-After`` until its window has passed, for any token but
    those that authenticated from it before (:class:`osmo.api.throttling.AuthFailureThrottle`).

    This has to happen here: DRF runs view throttles after authentication, and a wrong token ends the
    request with 401 before them, so they never count guesses."""

    def authenticate(self, request):
        parts = get_authorization_header(request).split()
        if not parts or parts[0].lower() not in KEYWORDS:
            return None
        throttle = AuthFailureThrottle()
        presented = parts[1].decode(errors="replace") if len(parts) == 2 else ""
        if throttle.blocked(request, presented):
            raise Throttled(wait=throttle.wait())
        try:
            # DRF's own checks and words (TokenAuthentication.authenticate), for either keyword
            if len(parts) == 1:
                raise AuthenticationFailed("Invalid token header. No credentials provided.")
            if len(parts) > 2:
                raise AuthenticationFailed("Invalid token header. Token string should not contain spaces.")
            try:
                key = parts[1].decode()
            except UnicodeError as exc:
                raise AuthenticationFailed(
                    "Invalid token header. Token string should not contain invalid characters.") from exc
            authenticated = self.authenticate_credentials(key)
        except AuthenticationFailed:
            throttle.failure_record(request)
            raise
        throttle.success_record(request, key)
        return authenticated

    def authenticate_credentials(self, key):
        """As DRF's (``TokenAuthentication.authenticate_credentials``), the user's API key and its user in
        one query, looked up by the key's digest (only digests are stored: :class:`credentials.models.ApiKey`);
        a key of the personal-access-token form (``osmo_...``, :mod:`credentials.tokens`) is looked up
        among those instead, and refused once expired. ``request.auth`` is the ``ApiKey`` or ``AccessToken``.
        One query either way (the key with its user)."""
        if "\x00" in key:  # PostgreSQL refuses NUL in a query; no token has one
            raise AuthenticationFailed(_("Invalid token."))
        if is_access_token(key):
            found = token_user(key)
            if found is None:
                raise AuthenticationFailed(_("Invalid token."))
            owner, access_token = found
            if expired(access_token):
                raise AuthenticationFailed(f"The access token {access_token.name!r} expired on "
                                           f"{access_token.expires_at:%Y-%m-%d %H:%M} UTC: make a new one "
                                           "(osmo token set).")
            if not owner.is_active:
                raise AuthenticationFailed(_("User inactive or deleted."))
            return (owner, access_token)
        api_key = ApiKey.objects.select_related("user").filter(digest=digest(key)).first()
        if api_key is None:
            raise AuthenticationFailed(_("Invalid token."))
        user = api_key.user
        if not user.is_active:
            raise AuthenticationFailed(_("User inactive or deleted."))
        return (user, api_key)
