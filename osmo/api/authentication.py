"""API token authentication with failed attempts throttled per client address."""

from __future__ import annotations

from rest_framework.authentication import TokenAuthentication, get_authorization_header
from rest_framework.exceptions import AuthenticationFailed, Throttled

from osmo.api.throttling import AuthFailureThrottle

KEYWORDS = (b"token", b"bearer")


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
