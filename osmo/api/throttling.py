"""Request throttles of the API (DRF) and the client address they, and the login lockout, key on.

Rates come from ``REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]`` when a request is checked (DRF's own
classes read them once at import), so they can be changed per deployment and per test:

- ``anon``: anonymous requests per client address (only public endpoints get that far);
- ``user``: authenticated requests per user;
- ``auth_failure``: failed token attempts per client address; past it, every request from that
  address that presents a token is refused with 429 until the window has passed, a correct one too,
  so guessing cannot go on.
"""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest
from rest_framework import throttling
from rest_framework.settings import api_settings


def client_ip(request: HttpRequest) -> str:
    """The client's address: ``REMOTE_ADDR``, or, behind ``OSMO_TRUSTED_PROXIES`` proxies, the address
    the outermost trusted proxy saw (taken from the right of ``X-Forwarded-For``, which a client
    can prefix with anything it likes). Shared by the throttles and the login lockout."""
    proxies = settings.OSMO_TRUSTED_PROXIES
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR")
    if proxies and forwarded:
        hops = [hop.strip() for hop in forwarded.split(",") if hop.strip()]
        if hops:
            return hops[-min(proxies, len(hops))]
    return request.META.get("REMOTE_ADDR", "")


class _CurrentRates:
    scope: str | None

    def get_rate(self) -> str | None:
        rate = api_settings.DEFAULT_THROTTLE_RATES.get(self.scope or "")
        return None if rate is None else str(rate)

    def get_ident(self, request) -> str:
        return client_ip(request)


class AnonRateThrottle(_CurrentRates, throttling.AnonRateThrottle):
    pass


class UserRateThrottle(_CurrentRates, throttling.UserRateThrottle):
    pass


class AuthFailureThrottle(_CurrentRates, throttling.SimpleRateThrottle):
    """Counts failed authentication attempts per client address (not a DRF view throttle: the token
    authentication class consults it, because DRF checks throttles only after authentication)."""

    scope = "auth_failure"
    num_requests: int  # set from the rate by SimpleRateThrottle.__init__
    duration: int

    def get_cache_key(self, request, view=None) -> str:
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}

    def _history(self, request) -> list[float]:
        self.key = self.get_cache_key(request)
        self.now = self.timer()
        return [at for at in self.cache.get(self.key, []) if at > self.now - self.duration]

    def blocked(self, request) -> bool:
        """True while the address has used up its failures in the current window."""
        if self.rate is None:
            return False
        self.history = self._history(request)
        return len(self.history) >= self.num_requests

    def failure_record(self, request) -> None:
        if self.rate is None:
            return
        history = self._history(request)
        history.insert(0, self.now)
        self.cache.set(self.key, history, self.duration)
