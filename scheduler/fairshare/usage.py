"""Each team's recent usage of a pool, for fair share over time (docs/design.md §9): its reservations'
GPU-seconds, each second weighing ``2 ** (-age / half_life)``, summed in one aggregate query.

The same integral as :func:`scheduler.fairshare.decayed_gpu_seconds` (a test keeps the two equal),
written in SQL so that the read costs one query whatever the pool's history: only the rows still held
or released within the last :data:`HORIZON_HALF_LIVES` half-lives are read (a released row older than
that weighs less than 2**-10 of its GPU-seconds), through the ``reservation_released_pool`` and
``reservation_active_pool`` indexes. Work without a team is the ``None`` bucket.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from django.db.models import Case, F, FloatField, Func, Q, Sum, Value, When
from django.db.models.functions import Exp, Greatest

from scheduler.models import Pool, Reservation

#: Released rows older than this many half-lives are not read (each weighs under 2**-10 of its GPU-seconds).
HORIZON_HALF_LIVES = 10
#: ``exp`` of a lower exponent underflows on PostgreSQL (an error, not 0): ages beyond it count as 0.
_MIN_EXPONENT = -700.0


class EpochSeconds(Func):
    """A datetime column as float seconds since the Unix epoch, on PostgreSQL and on SQLite (the
    embedded default stores UTC text that ``julianday`` reads)."""

    output_field = FloatField()

    def as_postgresql(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        return self.as_sql(compiler, connection, template="(EXTRACT(EPOCH FROM %(expressions)s))::double precision",
                           **extra)

    def as_sqlite(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        return self.as_sql(compiler, connection, template="((julianday(%(expressions)s) - 2440587.5) * 86400.0)",
                           **extra)


class TeamUsage(NamedTuple):
    """A team's recent usage of a pool (``team_id`` None: work without a team)."""

    team_id: int | None
    team: str | None
    gpu_seconds: float

    @property
    def gpu_hours(self) -> float:
        return self.gpu_seconds / 3600.0


def pool_team_usage(pool: Pool, *, now: datetime) -> list[TeamUsage]:
    """Each team's decayed GPU-seconds in ``pool`` as seen at ``now``, least first (empty when the
    pool's ``fairshare_half_life`` is 0: fair share off). One query."""
    half_life = pool.fairshare_half_life
    if half_life <= 0:
        return []
    rate = math.log(2) / half_life
    at = now.timestamp()
    since = now - timedelta(seconds=HORIZON_HALF_LIVES * half_life)

    def weight(seconds: Any) -> Exp:  # 2 ** (-(now - t) / half_life) of a time t
        return Exp(Greatest(Value(rate) * (seconds - Value(at)), Value(_MIN_EXPONENT), output_field=FloatField()))

    end = Case(When(Q(released_at__isnull=True) | Q(released_at__gt=now), then=Value(at)),
               default=EpochSeconds(F("released_at")), output_field=FloatField())
    rows = (
        Reservation.objects.filter(pool=pool, gpu__gt=0, created_at__lt=now)
        .filter(Q(released_at__isnull=True) | (Q(released_at__gt=since) & Q(released_at__gt=F("created_at"))))
        .order_by()
        .values("team_id", "team__name")
        .annotate(usage=Sum(F("gpu") * (weight(end) - weight(EpochSeconds(F("created_at")))),
                            output_field=FloatField()))
    )
    found = [TeamUsage(row["team_id"], row["team__name"], max(float(row["usage"] or 0.0), 0.0) / rate)
             for row in rows]
    return sorted(found, key=lambda u: (u.gpu_seconds, u.team is None, u.team or ""))


def team_usage_by_id(pool: Pool, *, now: datetime) -> dict[int | None, float]:
    """:func:`pool_team_usage` by team id (what the queue's order reads)."""
    return {u.team_id: u.gpu_seconds for u in pool_team_usage(pool, now=now)}
