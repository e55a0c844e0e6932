"""Heartbeats of the scheduler's periodic work: the last tick, and the last completed placement cycle of
each pool. ``/readyz`` and ``/metrics`` read them to tell a stuck scheduler (beat gone, workers gone,
cycles failing) from an idle one.

Stored in the database as :class:`~scheduler.models.WorkerHeartbeat` rows keyed by a token per kind and
pool, one upsert each, so they work on every database and broker the service runs on.
"""

from __future__ import annotations

import logging
import socket
from dataclasses import dataclass
from datetime import datetime

from django.db import DatabaseError, InterfaceError

from scheduler.models import WorkerHeartbeat

logger = logging.getLogger(__name__)

TICK = "tick"
PLACEMENT_CYCLE = "placement_cycle"
KINDS = frozenset({TICK, PLACEMENT_CYCLE})
_TOKEN_PREFIX = "scheduler."
_HOSTNAME = socket.gethostname()


def _token(kind: str, pool_id: int | None) -> str:
    if kind not in KINDS:
        raise ValueError(f"unknown heartbeat kind {kind!r}")
    return f"{_TOKEN_PREFIX}{kind}" if pool_id is None else f"{_TOKEN_PREFIX}{kind}:{pool_id}"


def heartbeat_record(kind: str, pool_id: int | None = None) -> None:
    """Record that ``kind`` (``"tick"``, or ``"placement_cycle"`` with its pool) just completed.

    One INSERT ... ON CONFLICT UPDATE. A failure is logged, never raised: losing one heartbeat must
    not fail the work it reports on (the next one overwrites it).
    """
    try:
        WorkerHeartbeat.objects.bulk_create(
            [WorkerHeartbeat(token=_token(kind, pool_id), hostname=_HOSTNAME)],
            update_conflicts=True,
            unique_fields=["token"],
            update_fields=["hostname", "at"],
        )
    except (DatabaseError, InterfaceError):
        logger.warning("heartbeat.record_failed", extra={"kind": kind, "pool_id": pool_id}, exc_info=True)


@dataclass(frozen=True, slots=True)
class Heartbeats:
    tick_at: datetime | None
    cycle_at_by_pool_id: dict[int, datetime]


def tick_age_seconds() -> float | None:
    """Seconds since the last tick completed (None: no tick ever did). One query."""
    from django.utils import timezone

    at = WorkerHeartbeat.objects.filter(token=_token(TICK, None)).values_list("at", flat=True).first()
    return None if at is None else (timezone.now() - at).total_seconds()


def heartbeats_read() -> Heartbeats:
    """The last tick and the last completed cycle of every pool that had one (one query)."""
    tick = _token(TICK, None)
    cycle_prefix = _token(PLACEMENT_CYCLE, None) + ":"
    rows = WorkerHeartbeat.objects.filter(token__startswith=_TOKEN_PREFIX).values_list("token", "at")
    tick_at = None
    cycles: dict[int, datetime] = {}
    for token, at in rows:
        if token == tick:
            tick_at = at
        elif token.startswith(cycle_prefix) and token[len(cycle_prefix):].isdigit():
            cycles[int(token[len(cycle_prefix):])] = at
    return Heartbeats(tick_at=tick_at, cycle_at_by_pool_id=cycles)

