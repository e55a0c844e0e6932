"""API token authentication with failed attempts throttled per client address."""

from __future__ import annotations

from rest_framework.authentication import TokenAuthentication, get_authorization_header
from rest_framework.exceptions import AuthenticationFailed, Throttled

from osmo.api.throttling import AuthFailureThrottle


class ThrottledTokenAuthentication(TokenAuthentication):
    """``Authorization: Token <key>``, as DRF's. An address that sent too many wrong tokens (rate
    ``auth_failure``) gets 429 with ``Retry-After`` for any token until its window has passed.

    This has to happen here: DRF runs view throttles after authentication, and a wrong token ends the
    request with 401 before them, so they never count guesses."""

    def authenticate(self, request):
        parts = get_authorization_header(request).split()
        if not parts or parts[0].lower() != self.keyword.lower().encode():
            return None
        throttle = AuthFailureThrottle()
        if throttle.blocked(request):
            raise Throttled(wait=throttle.wait())
        try:
            return super().authenticate(request)
        except AuthenticationFailed:
            throttle.failure_record(request)
            raise
