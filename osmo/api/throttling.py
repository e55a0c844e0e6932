"""Request throttles of the API (DRF) and the client address they, and the login lockout, key on.

Rates come from ``REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]`` when a request is checked (DRF's own
classes read them once at import), so they can be changed per deployment and per test:

- ``anon``: anonymous requests per client address (only public endpoints get that far);
- ``user``: authenticated requests per user;
- ``auth_failure``: failed token attempts per client address; past it, that address is refused
  with 429 for any token it presents until the window has passed, except the tokens that
  authenticated from it before (kept for ``KNOWN_TOKEN_SECONDS``): guessing stops, and a client
  behind the same address as a guesser keeps working.

The counters live in the cache (Redis when configured). When the cache cannot be reached the
throttles fail open: the request goes on unthrottled and a warning is logged (at most once per
10 s per process), so a Redis outage never turns API calls into 500s
(docs/operations.md, "Redis outage").
"""

from __future__ import annotations

import hashlib
import logging
import time

from django.http import HttpRequest
from redis.exceptions import RedisError
from rest_framework import throttling
from rest_framework.settings import api_settings

from osmo import config as osmo_config
from osmo.logs import OutageLog

logger = logging.getLogger(__name__)

KNOWN_TOKEN_SECONDS = 24 * 3600
#: Logs that the cache could not be reached (throttles fail open), at most every 10 s per process.
cache_unavailable = OutageLog(logger, "throttle.cache_unavailable")


def client_ip(request: HttpRequest) -> str:
    """The client's address: ``REMOTE_ADDR``, or, behind ``OSMO_TRUSTED_PROXIES`` proxies, the address
    the outermost trusted proxy saw (taken from the right of ``X-Forwarded-For``, which a client
    can prefix with anything it likes). Shared by the throttles and the login lockout."""
    proxies = osmo_config.web().trusted_proxies
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

    def allow_request(self, request, view) -> bool:
        try:
            return super().allow_request(request, view)  # type: ignore[misc]
        except RedisError as exc:
            cache_unavailable(exc)
            return True


class AnonRateThrottle(_CurrentRates, throttling.AnonRateThrottle):
    pass


class UserRateThrottle(_CurrentRates, throttling.UserRateThrottle):
    pass


def _token_digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:32]


class AuthFailureThrottle(_CurrentRates, throttling.SimpleRateThrottle):
    """Counts failed authentication attempts per client address (not a DRF view throttle: the token
    authentication class consults it, because DRF checks throttles only after authentication), and
    remembers which tokens authenticated from each address, so a lockout spares them."""

    scope = "auth_failure"
    num_requests: int  # set from the rate by SimpleRateThrottle.__init__
    duration: int

    def get_cache_key(self, request, view=None) -> str:
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}

    def _known_key(self, request, key: str) -> str:
        return self.cache_format % {"scope": "auth_known", "ident": f"{self.get_ident(request)}:{_token_digest(key)}"}

    def _history(self, request) -> list[float]:
        self.key = self.get_cache_key(request)
        self.now = self.timer()
        return [at for at in self.cache.get(self.key, []) if at > self.now - self.duration]

    def blocked(self, request, key: str) -> bool:
        """True while the address has used up its failures in the current window and ``key`` (the
        token presented) has not authenticated from it before. False when the cache is unreachable."""
        if self.rate is None:
            return False
        try:
            self.history = self._history(request)
            if len(self.history) < self.num_requests:
                return False
            return not self.cache.get(self._known_key(request, key))
        except RedisError as exc:
            cache_unavailable(exc)
            return False

    def failure_record(self, request) -> None:
        if self.rate is None:
            return
        try:
            history = self._history(request)
            history.insert(0, self.now)
            self.cache.set(self.key, history, self.duration)
        except RedisError as exc:
            cache_unavailable(exc)

    def success_record(self, request, key: str) -> None:
        """Remember that ``key`` authenticated from this address (refreshed at most every minute per
        process and client, so a request costs no extra cache write)."""
        if self.rate is None:
            return
        known = self._known_key(request, key)
        now = time.monotonic()
        if _recent_successes.get(known, -60.0) > now - 60:
            return
        if len(_recent_successes) >= 10_000:
            _recent_successes.clear()
        try:
            self.cache.set(known, 1, KNOWN_TOKEN_SECONDS)
        except RedisError as exc:
            cache_unavailable(exc)
            return
        _recent_successes[known] = now


_recent_successes: dict[str, float] = {}
