"""What the placement cycle checks before solving a gang, besides its constraints (docs/design.md §9):
the pool's status and the teams' GPU quotas."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from django.db.models import Sum
from django.utils import timezone

from scheduler.models import Pool, Reservation, TeamQuota
from scheduler.placement import GangRequest, ReasonCode
from scheduler.results import reason_digest
from workflows.choices import PRIORITY_RANK, Priority, TaskStatus
from workflows.models import TaskGroup


class QuotaGang(Protocol):
    """What the quota check reads of a queued gang."""

    @property
    def team_id(self) -> int | None: ...

    @property
    def rank(self) -> int: ...


LOW_RANK = PRIORITY_RANK[Priority.LOW]
NORMAL_RANK = PRIORITY_RANK[Priority.NORMAL]


@dataclass
class Quotas:
    """The teams' GPU quotas in a pool and what their HIGH and NORMAL work holds (docs/design.md §9):
    read once per cycle (two queries, none when the pool has no quota), counted up as the walk places."""

    pool: Pool
    quota: dict[int, tuple[str, int]]  # team id -> (name, GPUs)
    used: dict[int, int]

    @classmethod
    def load(cls, pool: Pool) -> Quotas | None:
        quota = {q.team_id: (q.team.name, q.gpu) for q in TeamQuota.objects.filter(pool=pool).select_related("team")}
        if not quota:
            return None
        rows = (
            Reservation.objects.filter(pool=pool, released_at__isnull=True, preemptible=False,
                                       team_id__in=list(quota))
            .order_by()
            .values("team_id")
            .annotate(gpu=Sum("gpu"))
        )
        return cls(pool, quota, {row["team_id"]: int(row["gpu"] or 0) for row in rows})

    def over(self, g: QuotaGang, request: GangRequest) -> dict[str, Any] | None:
        """The reason the gang waits when placing it would take its team past its quota, else None."""
        assert g.team_id is not None
        name, limit = self.quota[g.team_id]
        used = self.used.get(g.team_id, 0)
        needed = sum(task.resources.gpu for task in request.tasks)
        if used + needed <= limit:
            return None
        return {
            "status": "unschedulable",
            "code": ReasonCode.QUOTA_EXCEEDED.value,
            "team": name, "quota_gpu": limit, "used_gpu": used, "needed_gpu": needed,
            "message": f"team {name} uses {used} of its {limit} GPUs in pool {self.pool.name}; this group needs "
            f"{needed} more (HIGH and NORMAL work counts against the quota; LOW work may borrow idle GPUs)",
        }

    def add(self, g: QuotaGang, request: GangRequest) -> None:
        if g.team_id in self.quota and g.rank < LOW_RANK:
            self.used[g.team_id] = self.used.get(g.team_id, 0) + sum(task.resources.gpu for task in request.tasks)


def not_online_reason(pool: Pool) -> dict[str, Any]:
    """Why nothing is placed in an OFFLINE or MAINTENANCE pool."""
    return {
        "status": "waiting",
        "code": ReasonCode.POOL_NOT_ONLINE.value,
        "message": f"pool {pool.name} is {pool.status}: nothing is placed until an administrator sets it ONLINE",
    }


def backend_not_online_reason(pool: Pool) -> dict[str, Any] | None:
    """Why nothing is placed in a pool whose backend is OFFLINE (its syncs fail) or in MAINTENANCE, naming
    the backend and since when; None while it is ONLINE. One query, for Kubernetes pools only (the
    local and simulated backends have no cluster to lose)."""
    from scheduler.choices import BackendStatus, DispatchBackend
    from scheduler.models import Backend

    if pool.backend != DispatchBackend.KUBERNETES:
        return None
    row = Backend.objects.filter(name=pool.backend_name).values("status", "offline_since", "last_error").first()
    if row is None or row["status"] == BackendStatus.ONLINE:
        return None
    if row["status"] == BackendStatus.MAINTENANCE:
        why = "is in MAINTENANCE: nothing is placed until an administrator sets it ONLINE"
    else:
        since = row["offline_since"].isoformat(timespec="seconds") if row["offline_since"] else "its last sync"
        why = (f"is OFFLINE since {since} ({row['last_error'][:200] or 'its sync failed'}): nothing is placed "
               "until it answers again")
    return {"status": "waiting", "code": ReasonCode.BACKEND_NOT_ONLINE.value, "backend": pool.backend_name,
            "since": row["offline_since"].isoformat() if row["offline_since"] else None,
            "message": f"backend {pool.backend_name} of pool {pool.name} {why}"}


def not_online_record(pool: Pool, reason: dict[str, Any] | None = None) -> None:
    """An OFFLINE or MAINTENANCE pool (or one whose backend is: ``reason``) places nothing: its queued
    gangs say so (one UPDATE, only of gangs that do not say it yet). Going ONLINE moves the pool's epochs
    on, so they are solved again."""
    reason = reason or not_online_reason(pool)
    digest = reason_digest(reason)
    TaskGroup.objects.filter(workflow__pool=pool, status=TaskStatus.SCHEDULING).exclude(
        reason_code=reason["code"], reason_digest=digest
    ).update(unschedulable_reason=reason, reason_code=reason["code"], reason_digest=digest, proof_epoch=None,
             updated_at=timezone.now())
