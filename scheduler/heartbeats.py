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

from django.conf import settings
from django.db import DatabaseError, InterfaceError
from django.db.models import Count, Min
from django.db.models.functions import Coalesce
from django.utils import timezone

from scheduler.models import Pool, WorkerHeartbeat

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


def scheduler_status(*, now: datetime | None = None) -> dict:
    """Is the scheduler making progress? ``{"ok", "tick", "pools"}`` for ``/readyz`` (three queries).

    Not OK when the last tick is older than ``OSMO_READY_TICK_MAX_AGE_SECONDS`` (or never happened:
    beat, the broker or every worker is gone), or when a pool has had gangs queued for longer than
    ``OSMO_READY_CYCLE_MAX_AGE_SECONDS`` and no placement cycle completed on it within that time
    (its cycles fail or never start). An idle pool needs no cycles, so its age alone is not a fault.
    """
    from workflows.choices import TaskStatus
    from workflows.models import TaskGroup

    now = now or timezone.now()
    tick_max_age = settings.OSMO_READY_TICK_MAX_AGE_SECONDS
    cycle_max_age = settings.OSMO_READY_CYCLE_MAX_AGE_SECONDS
    beats = heartbeats_read()
    tick_age = (now - beats.tick_at).total_seconds() if beats.tick_at else None
    tick = {
        "last_at": beats.tick_at.isoformat() if beats.tick_at else None,
        "age_seconds": round(tick_age, 1) if tick_age is not None else None,
        "max_age_seconds": tick_max_age,
        "stale": tick_age is None or tick_age > tick_max_age,
    }
    queued = {
        row["workflow__pool_id"]: row
        for row in TaskGroup.objects.filter(status=TaskStatus.SCHEDULING)
        .values("workflow__pool_id")
        .annotate(gangs=Count("pk"), since=Min(Coalesce("scheduling_since", "workflow__submitted_at")))
        .order_by()
    }
    pools = {}
    for pool_id, name in Pool.objects.order_by("name").values_list("pk", "name"):
        cycle_at = beats.cycle_at_by_pool_id.get(pool_id)
        cycle_age = (now - cycle_at).total_seconds() if cycle_at else None
        waiting = queued.get(pool_id)
        oldest = (now - waiting["since"]).total_seconds() if waiting else None
        pools[name] = {
            "last_cycle_at": cycle_at.isoformat() if cycle_at else None,
            "cycle_age_seconds": round(cycle_age, 1) if cycle_age is not None else None,
            "queued_gangs": waiting["gangs"] if waiting else 0,
            "oldest_queued_seconds": round(oldest, 1) if oldest is not None else None,
            "stale": oldest is not None and oldest > cycle_max_age
            and (cycle_age is None or cycle_age > cycle_max_age),
        }
    return {
        "ok": not tick["stale"] and not any(pool["stale"] for pool in pools.values()),
        "tick": tick,
        "max_cycle_age_seconds": cycle_max_age,
        "pools": pools,
    }
