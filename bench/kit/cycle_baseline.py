"""The placement cycle's baseline (``bench.cycle`` compares against it; ``tests/pipeline/test_scale.py``
checks both decide the same): the algorithm the incremental cycle replaced, kept here, out of the
service. A fresh pool aggregation for every solve, every gang solved every cycle, no verdicts shared
between identical gangs, no cursor, no idle skip, and no cycle state written: the walk of
:mod:`workflows.scheduling.cycle.walk` run by the same read and apply steps, composed otherwise. It is
given the queue as if no cycle had stored anything on it (no proofs, reasons or idle-pool fits, so
every gang is solved and every reason written), shares nothing between identical gangs
(:class:`~workflows.scheduling.cycle.walk.Sharing` off) and solves on a fresh aggregation of the
walk's index each time."""

from __future__ import annotations

from dataclasses import replace

from django.conf import settings
from django.db import transaction

from scheduler.placement import DomainIndex, GangRequest, Placement, Policy, Unplaceable, solve
from workflows.scheduling.admission import Quotas
from workflows.scheduling.cycle.run import (
    CycleResult,
    collector_paused,
    cycle_apply,
    cycle_begin,
    cycle_end,
    cycle_input_read,
)
from workflows.scheduling.cycle.values import CycleInput, GangSource
from workflows.scheduling.cycle.walk import Sharing, Walk


def forgotten(cycle: CycleInput) -> CycleInput:
    """The cycle's input as if no earlier cycle had left anything: no cursor, no proofs, and no gang
    carrying a proof, a reason or an idle-pool fit."""
    return replace(cycle, cursor=None, proofs={}, queue=tuple(
        replace(g, proof_epoch=None, reason_code="", reason_digest="", idle_fit=None, idle_fit_epoch=None)
        for g in cycle.queue))


def baseline_walk(cycle: CycleInput, source: GangSource, policy: Policy, *, quotas: Quotas | None = None) -> Walk:
    """The walk of the algorithm the incremental one replaced, over ``cycle``."""

    def fresh(index: DomainIndex, request: GangRequest, policy: Policy) -> Placement | Unplaceable:
        return solve(index.snapshot(cycle.pool_name), request, policy)

    return Walk(forgotten(cycle), source, policy, quotas=quotas, sharing=Sharing(verdicts=False, waits=False),
                solver=fresh)


def baseline_cycle_run(*, pool_id: int, policy: Policy | None = None) -> CycleResult:
    """One cycle of the baseline algorithm (the pool's lock, timeouts and promotions as the cycle's; the
    garbage collector off as in the cycle, so that the ratio compares the algorithms)."""
    result = CycleResult()
    with collector_paused(), transaction.atomic():
        start = cycle_begin(result, pool_id=pool_id, now=None)
        if start is None:
            return result
        cycle, source, quotas = cycle_input_read(start)
        decision = baseline_walk(cycle, source, policy or Policy(max_seconds=settings.OSMO_SOLVE_MAX_SECONDS),
                                 quotas=quotas).decide()
        cycle_end(result, cycle_apply(result, start, decision))
    return result
