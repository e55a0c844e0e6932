"""The cache as single sign-on uses it (the provider's keys, whether it answers): failing open.

With Redis down, a read is what this process cached last (until its timeout), else a miss, and a
write is kept in the process only, so the keys are fetched from the provider again at most once per
timeout instead of every provider-token request and the login page answering 500 or asking the
provider each time (docs/operations.md, "Failure answers": the cache fails open). The outage is logged
at most every few seconds.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from django.core.cache import cache
from redis.exceptions import RedisError

from osmo.logs import OutageLog

logger = logging.getLogger(__name__)
_unavailable = OutageLog(logger, "sso.cache_unavailable")


# What this process last cached, with when it ends: read while the shared cache cannot be reached, so
# that an outage does not send every login page and every token to the provider.
_local: dict[str, tuple[float, Any]] = {}


def cache_get(key: str) -> Any:
    """The cached value, or None when there is none; while the cache cannot be reached, what this
    process cached last, until its timeout."""
    try:
        return cache.get(key)
    except RedisError as exc:
        _unavailable(exc)
        ends, value = _local.get(key, (0.0, None))
        return value if time.monotonic() < ends else None


def cache_set(key: str, value: Any, *, timeout: float) -> None:
    """Cache ``value`` (and keep it in this process); only the latter when the cache cannot be reached."""
    _local[key] = (time.monotonic() + timeout, value)
    try:
        cache.set(key, value, timeout=timeout)
    except RedisError as exc:
        _unavailable(exc)
