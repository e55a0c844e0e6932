"""The cache as single sign-on uses it (the provider's keys, whether it answers): failing open.

With Redis down, a read is a miss and a write is skipped, so the keys are fetched from the provider
again instead of every provider-token request and the login page answering 500 (docs/operations.md,
"Failure answers": the cache fails open). The outage is logged at most every few seconds.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from django.core.cache import cache
from redis.exceptions import RedisError

logger = logging.getLogger(__name__)

OUTAGE_LOG_SECONDS = 10.0
_last_outage_log = float("-inf")


def _unavailable(exc: Exception) -> None:
    global _last_outage_log
    now = time.monotonic()
    if now - _last_outage_log >= OUTAGE_LOG_SECONDS:
        _last_outage_log = now
        logger.warning("sso.cache_unavailable", extra={"error": f"{exc.__class__.__name__}: {exc}"[:300]})


def cache_get(key: str) -> Any:
    """The cached value, or None when there is none or the cache cannot be reached."""
    try:
        return cache.get(key)
    except RedisError as exc:
        _unavailable(exc)
        return None


def cache_set(key: str, value: Any, *, timeout: float) -> None:
    """Cache ``value``; nothing when the cache cannot be reached."""
    try:
        cache.set(key, value, timeout=timeout)
    except RedisError as exc:
        _unavailable(exc)
