"""The dashboard: workflows per status, every pool's GPUs, the most recent workflows."""

from __future__ import annotations

from dataclasses import dataclass

from osmo.types import Viewer
from pages.viewmodels.pools import PoolRow, pool_rows
from scheduler.selectors import pool_list
from scheduler.services.access import pools_visible
from workflows.choices import WorkflowStatus
from workflows.models import Workflow
from workflows.selectors import workflow_count_by_status, workflow_list

RECENT_WORKFLOWS = 10


@dataclass(frozen=True, slots=True)
class StatusCount:
    status: str
    count: int


@dataclass(frozen=True, slots=True)
class Dashboard:
    cards: list[StatusCount]  # pending, running, completed, failed (any)
    failures: list[StatusCount]  # every failure status that occurs
    total: int
    pools: list[PoolRow]
    recent: list[Workflow]


def workflow_status_counts(*, user: Viewer) -> dict[str, int]:
    """Visible workflows per status, every status present (one query)."""
    return {**dict.fromkeys(WorkflowStatus.values, 0), **workflow_count_by_status(user=user)}


def dashboard_build(*, user: Viewer, recent: int = RECENT_WORKFLOWS) -> Dashboard:
    counts = workflow_status_counts(user=user)
    failed = sum(n for status, n in counts.items() if status.startswith("FAILED"))
    return Dashboard(
        cards=[
            StatusCount(status="PENDING", count=counts["PENDING"]),
            StatusCount(status="RUNNING", count=counts["RUNNING"]),
            StatusCount(status="COMPLETED", count=counts["COMPLETED"]),
            StatusCount(status="FAILED", count=failed),
        ],
        failures=[StatusCount(status=s, count=n) for s, n in counts.items() if s.startswith("FAILED") and n],
        total=sum(counts.values()),
        pools=pool_rows(pools_visible(pool_list(), user=user)),
        recent=list(workflow_list(user=user)[:recent]),
    )
