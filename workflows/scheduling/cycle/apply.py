"""The apply step of the placement cycle (docs/design.md §6, §8): a walk's
:class:`~workflows.scheduling.cycle.values.Decision` written in the cycle's transaction. Statuses and
reservations move through the lifecycle (:mod:`workflows.lifecycle`), the only writer of both:
evictions (:func:`~workflows.lifecycle.placing.gangs_preempt`), placements
(:func:`~workflows.lifecycle.placing.gangs_place`), solver errors
(:func:`~workflows.lifecycle.transitions.group_fail`). What is written here is the queue's
bookkeeping: the verdicts queued gangs carry, one UPDATE per distinct verdict."""

from __future__ import annotations

from django.utils import timezone

from scheduler.results import report_to_json
from workflows import jobs
from workflows.choices import TASK_ACTIVE_STATUSES, TaskStatus
from workflows.lifecycle.placing import GangPlacement, gangs_place, gangs_preempt
from workflows.lifecycle.transitions import group_fail
from workflows.models import TaskGroup, Workflow
from workflows.scheduling.cycle.values import Decision
from workflows.scheduling.locks import workflows_lock

SOLVER_ERROR_MESSAGE = "internal error while placing this group; the operators' logs have the details"


def decision_apply(decision: Decision, *, pool_id: int, inventory_epoch: int
                   ) -> tuple[list[int], set[int], dict[int, Workflow]]:
    """Write the decision. Returns the gangs placed (those still queued when written), the workflows
    whose status must be recomputed, and the rows of the workflows it locked, by id: every workflow
    written is locked first, at once, in primary-key order (the caller recomputes their status on
    these rows, which nothing here writes, without reading them again)."""
    refresh: set[int] = set()
    placing = {p.gang.workflow_id for p in decision.placements}
    workflows = workflows_lock({g.workflow_id for g in decision.failed} | {e.workflow_id for e in decision.evictions}
                               | placing)
    if decision.failed:
        for group in TaskGroup.objects.filter(pk__in=[g.pk for g in decision.failed]).select_related("workflow"):
            group_fail(group, TaskStatus.FAILED_SERVER_ERROR, message=SOLVER_ERROR_MESSAGE)
        refresh |= {g.workflow_id for g in decision.failed}
    if decision.evictions:
        by = {e.group_id: e.preemptor for e in decision.evictions}
        victims = list(TaskGroup.objects.filter(pk__in=list(by), status__in=TASK_ACTIVE_STATUSES))
        jobs.pods_evict_request(pool_id, gangs_preempt(victims, by=by))
        refresh |= {g.workflow_id for g in victims}
    placed: list[int] = []
    if decision.placements:
        node_ids = decision.node_ids
        placed = gangs_place(pool_id=pool_id, workflows=workflows, placements=[
            GangPlacement(group_id=p.gang.pk, workflow_id=p.gang.workflow_id, preemptions=p.gang.preemptions,
                          report=report_to_json(p.placement),
                          machines={task: (node, node_ids[node]) for task, node in p.placement.tasks.items()})
            for p in decision.placements
        ])
        refresh |= {p.gang.workflow_id for p in decision.placements if p.gang.pk in set(placed)}
    _verdicts_write(decision, inventory_epoch)
    return placed, refresh, workflows


def _verdicts_write(decision: Decision, inventory_epoch: int) -> None:
    """What queued gangs say: one UPDATE per distinct verdict, per proof moved, per idle fit."""
    now = timezone.now()
    for verdict in decision.verdicts:
        TaskGroup.objects.filter(pk__in=list(verdict.group_ids), status=TaskStatus.SCHEDULING).update(
            unschedulable_reason=verdict.reason, proof_epoch=verdict.proof, reason_code=verdict.code,
            reason_digest=verdict.digest, updated_at=now,
        )
    for proof, pks in decision.proofs_only:
        TaskGroup.objects.filter(pk__in=list(pks), status=TaskStatus.SCHEDULING).update(proof_epoch=proof)
    for fits, pks in decision.idle_fits:
        TaskGroup.objects.filter(pk__in=list(pks)).update(idle_fit=fits, idle_fit_epoch=inventory_epoch)
