"""The cache as single sign-on uses it (the provider's keys, whether it answers): failing open.

With Redis down, a read is a miss and a write is skipped, so the keys are fetched from the provider
again instead of every provider-token request and the login page answering 500 (docs/operations.md,
"Failure answers": the cache fails open). The outage is logged at most every few seconds.
"""

from __future__ import annotations

import logging
from typing import Any

from django.core.cache import cache
from redis.exceptions import RedisError

from osmo.logs import OutageLog

logger = logging.getLogger(__name__)
_unavailable = OutageLog(logger, "sso.cache_unavailable")


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
