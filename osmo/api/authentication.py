"""API token authentication with failed attempts throttled per client address."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.db.models import F
from django.utils.translation import gettext_lazy as _
from rest_framework.authentication import TokenAuthentication, get_authorization_header
from rest_framework.authtoken.models import Token
from rest_framework.exceptions import AuthenticationFailed, Throttled

from osmo.api.throttling import AuthFailureThrottle
from osmo.compiled import CompiledQuery

KEYWORDS = (b"token", b"bearer")

# The user of a token and when the token was made, in one query compiled once (every API request asks).
_TOKEN_USER = CompiledQuery(
    lambda key: get_user_model().objects.filter(auth_token__key=key).annotate(token_created=F("auth_token__created")),
    key=str)


class ThrottledTokenAuthentication(TokenAuthentication):
    """``Authorization: Token <key>`` as DRF's, or ``Authorization: Bearer <key>`` (what kubectl and
    most HTTP clients send) with the same key. An address that sent too many wrong tokens (rate
    ``auth_failure``) gets 429 with ``Retry-After`` for any token until its window has passed.

    This has to happen here: DRF runs view throttles after authentication, and a wrong token ends the
    request with 401 before them, so they never count guesses."""

    def authenticate(self, request):
        parts = get_authorization_header(request).split()
        if not parts or parts[0].lower() not in KEYWORDS:
            return None
        throttle = AuthFailureThrottle()
        if throttle.blocked(request):
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
            return self.authenticate_credentials(key)
        except AuthenticationFailed:
            throttle.failure_record(request)
            raise

    def authenticate_credentials(self, key):
        """DRF's (``TokenAuthentication.authenticate_credentials``): the same answers and words, from one
        compiled query instead of the ORM's ``select_related`` read."""
        user = _TOKEN_USER.first(key=key)
        if user is None:
            raise AuthenticationFailed(_("Invalid token."))
        if not user.is_active:
            raise AuthenticationFailed(_("User inactive or deleted."))
        return (user, Token(key=key, user=user, created=user.token_created))
