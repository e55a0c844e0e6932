"""The placement cycle's baseline (``bench.cycle`` compares against it; ``tests/pipeline/test_scale.py``
checks both decide the same): the algorithm the incremental cycle replaced, kept here, out of the
service. A fresh pool aggregation for every solve, every gang solved every cycle, no verdicts shared
between identical gangs, no cursor, no idle skip, and no cycle state written: the walk of
:mod:`workflows.scheduling.cycle.walk` with its incremental shortcuts turned off, run by the same
read and apply steps."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import transaction

from scheduler.placement import ClusterSnapshot, DomainIndex, Policy
from workflows.scheduling.cycle.reasons import Reason
from workflows.scheduling.cycle.run import (
    CycleResult,
    collector_paused,
    cycle_apply,
    cycle_begin,
    cycle_end,
    cycle_input_read,
)
from workflows.scheduling.cycle.values import QueuedGang
from workflows.scheduling.cycle.walk import Walk


class BaselineWalk(Walk):
    """The walk without its incremental shortcuts (see :class:`~workflows.scheduling.cycle.walk.Walk`)."""

    def _start_cursor(self) -> list[Any] | None:
        return None

    def _proofs_stand(self) -> bool:
        return False

    def _verdict_shared(self, key: str) -> tuple[Reason, str] | None:
        return None

    def _view(self, index: DomainIndex) -> DomainIndex | ClusterSnapshot:
        return index.snapshot(self.cycle.pool_name)

    def _idle_fit_known(self, g: QueuedGang, known: bool, signature: str) -> bool | None:
        return None

    def _behind_starving_said(self, g: QueuedGang) -> bool:
        return False

    def _reason_unchanged(self, g: QueuedGang, reason: Reason) -> bool:
        return False

    def _waits_shared(self) -> bool:
        return False


def baseline_cycle_run(*, pool_id: int, policy: Policy | None = None) -> CycleResult:
    """One cycle of the baseline algorithm (the pool's lock, timeouts and promotions as the cycle's; the
    garbage collector off as in the cycle, so that the ratio compares the algorithms)."""
    result = CycleResult()
    with collector_paused(), transaction.atomic():
        start = cycle_begin(result, pool_id=pool_id, now=None)
        if start is None:
            return result
        cycle, source, quotas = cycle_input_read(start, cursor=None, proofs=None)
        decision = BaselineWalk(cycle, source, policy or Policy(max_seconds=settings.OSMO_SOLVE_MAX_SECONDS),
                                quotas=quotas).decide()
        cycle_end(result, cycle_apply(result, start, decision))
    return result
