"""The lifecycle's moves that take or give back capacity (docs/design.md §6, §9): placing gangs
(SCHEDULING -> INITIALIZING, reservations created) and preempting them (INITIALIZING or RUNNING ->
SCHEDULING, reservations dropped). Both check every move against the edge table
(:data:`workflows.lifecycle.rules.TASK_EDGES`) and write in bulk: one UPDATE per table (placing: the
gangs' guarded by their status, returning those it moved), one INSERT of history rows, one of
reservations. The caller holds the workflows' locks (see
:mod:`workflows.scheduling.locks`) and refreshes their status."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from django.utils import timezone

from osmo.bulk import bulk_insert, bulk_set
from scheduler.dispatch.pod.naming import pod_name_for
from scheduler.placement.types import ReasonCode
from scheduler.resources import AMOUNT_FIELDS, amounts_of
from scheduler.services.reservation_rows import ReservationFacts
from scheduler.services.reservations import pool_epochs_bump
from workflows.choices import Priority, TaskStatus
from workflows.lifecycle import rules
from workflows.lifecycle.reservations import reservations_create, reservations_drop
from workflows.models import StatusTransition, Task, TaskGroup, Workflow

REFUSED_CODE = ReasonCode.CLUSTER_REFUSED.value  # the waiting reason of a gang the cluster refused


@dataclass(frozen=True, slots=True)
class GangPlacement:
    """A gang the placement cycle decided to place: on which machine each of its tasks goes."""

    group_id: int
    workflow_id: int
    preemptions: int  # the gang's count so far: its pods get names of this attempt (with its retries)
    report: list[dict[str, Any]]  # the placement report shown to users (``TaskGroup.placement_report``)
    machines: Mapping[str, tuple[str, int]]  # task name -> (node name, node id)


_PLACED_GROUP_FIELDS = ["status", "unschedulable_reason", "placement_report", "placed_at", "dispatch_requested_at",
                        "updated_at", "proof_epoch", "reason_code", "reason_digest"]


def gangs_place(*, pool_id: int, placements: list[GangPlacement], workflows: Mapping[int, Workflow]) -> list[int]:
    """Reserve capacity and move each gang with its tasks to INITIALIZING, guarded by its status: a
    gang cancelled since it was decided is skipped, and the pool's epoch moves on so that verdicts
    made against the capacity it would have taken are revisited. ``workflows``: the gangs' workflows,
    locked by the caller. Returns the ids of the gangs placed."""
    if not placements:
        return []
    now = timezone.now()  # not the cycle's start: a long cycle must not look like a stale dispatch
    rules.transition_needed("gang", TaskStatus.SCHEDULING, TaskStatus.INITIALIZING)
    # Only gangs still queued are placed (a cancel may have committed since the queue was read): one
    # UPDATE guarded by the status returns the gangs it moved; the workflow locks keep them so until
    # the caller's transaction ends. A gang's pods are named after its attempt: preemptions plus
    # exit-action retries plus cluster requeues (returned with it), all only grow.
    moved = bulk_set(TaskGroup, [
        TaskGroup(pk=p.group_id, status=TaskStatus.INITIALIZING, unschedulable_reason=None, placement_report=p.report,
                  placed_at=now, dispatch_requested_at=now, updated_at=now, proof_epoch=None, reason_code="",
                  reason_digest="") for p in placements
    ], _PLACED_GROUP_FIELDS, only_if={"status": TaskStatus.SCHEDULING}, returning=("id", "retries", "requeues"))
    still = {row.id: row.retries + row.requeues for row in moved}
    kept = [p for p in placements if p.group_id in still]
    if len(kept) < len(placements):
        pool_epochs_bump([pool_id])
    if not kept:
        return []
    tasks_of: dict[int, list[Task]] = {}
    for task in (Task.objects.filter(group_id__in=[p.group_id for p in kept]).order_by("group_id", "position")
                 .only("pk", "group_id", "name", "status", *AMOUNT_FIELDS)):
        tasks_of.setdefault(task.group_id, []).append(task)
    tasks: list[Task] = []
    reservations: list[ReservationFacts] = []
    transitions: list[StatusTransition] = []
    for p in kept:
        workflow = workflows[p.workflow_id]
        global_id = workflow.global_id  # pod names are unique across users (docs/design.md §7, "Workflow ids")
        transitions.append(StatusTransition(workflow_id=p.workflow_id, group_id=p.group_id,
                                            from_status=TaskStatus.SCHEDULING, to_status=TaskStatus.INITIALIZING,
                                            message="placed"))
        for task in tasks_of.get(p.group_id, []):
            rules.transition_needed("task", task.status, TaskStatus.INITIALIZING)
            node_name, task.node_id = p.machines[task.name]
            task.node_name = node_name  # kept when the node is deleted
            task.pod_name = pod_name_for(global_id, task.name, p.preemptions + still[p.group_id])
            transitions.append(StatusTransition(workflow_id=p.workflow_id, group_id=p.group_id, task=task,
                                                from_status=task.status, to_status=TaskStatus.INITIALIZING,
                                                message=f"placed on {node_name}"))
            task.status = TaskStatus.INITIALIZING
            task.updated_at = now
            tasks.append(task)
            reservations.append(ReservationFacts(
                task_id=task.pk, pool_id=pool_id, node_id=task.node_id, node_name=node_name, **amounts_of(task),
                team_id=workflow.team_id, preemptible=workflow.priority == Priority.LOW))
    bulk_set(Task, tasks, ["node", "node_name", "pod_name", "status", "updated_at"])
    reservations_create(reservations)
    bulk_insert(StatusTransition, transitions)
    return [p.group_id for p in kept]


_TASK_RESET_FIELDS = ["status", "node", "node_name", "pod_name", "dispatched_at", "pod_deleted_at", "started_at",
                      "finished_at", "exit_code", "failure_message", "updated_at"]
_GROUP_RESET_FIELDS = ["status", "scheduling_since", "preemptions", "retries", "requeues", "placed_at",
                       "dispatch_requested_at",
                       "started_at",
                       "placement_report", "unschedulable_reason", "proof_epoch", "idle_fit", "idle_fit_epoch",
                       "reason_code", "reason_digest", "updated_at"]


def gangs_preempt(groups: Iterable[TaskGroup], *, by: dict[int, str]) -> list[str]:
    """Evict running gangs (docs/design.md §9): drop every reservation of their tasks, put the gang
    and all its tasks back to SCHEDULING (a gang restarts whole), count the preemption and record
    "preempted by <workflow>" (``by``: group id -> the preemptor's workflow id), then a RESCHEDULED
    row (OSMO's word for a gang sent back to the queue; preemption counts against no retry limit). The
    group keeps its place in the queue (ordered by its workflow's submission time). Returns the names
    of the pods to delete. A member that ended meanwhile is no edge back to SCHEDULING: the move
    raises and the caller's transaction (the whole cycle) rolls back, to be decided again on fresh
    rows."""
    groups = list(groups)
    return _gangs_requeue(groups, {g.pk: f"preempted by {by[g.pk]}" for g in groups}, counter="preemptions")


def groups_reschedule(groups: Iterable[TaskGroup], *, why: dict[int, str]) -> list[str]:
    """Send gangs back to the queue because a task's exit action said RESCHEDULE (docs/design.md §6,
    "Lead and exit actions") or the infrastructure lost one of their pods ("When the cluster is the
    cause"): like a preemption, but through RESCHEDULED (``why``: group id -> the message, e.g. "task a:
    exit code 9: rescheduled (retry 1 of 3)"), counted in the gang's ``retries`` (its retry id, bounded
    by the pool's ``max_retries``). Returns the pod names to delete."""
    return _gangs_requeue(list(groups), why, counter="retries")


def groups_requeue_refused(groups: Iterable[TaskGroup], *, why: dict[int, str]) -> list[str]:
    """Send gangs back to the queue because the cluster refused to schedule one of their pods
    (docs/design.md §6, "When the cluster is the cause"): through RESCHEDULED with the cluster's words
    (``why``: group id -> the message), counted in the gang's ``requeues``; until the next placement
    its waiting reason quotes the cluster (code ``cluster_refused``). Returns the pod names to delete."""
    groups = list(groups)
    pods = _gangs_requeue(groups, why, counter="requeues")
    for group in groups:
        group.unschedulable_reason = {"status": "waiting", "code": REFUSED_CODE, "message": why[group.pk]}
        group.reason_code = REFUSED_CODE
    bulk_set(TaskGroup, groups, ["unschedulable_reason", "reason_code"])
    return pods


def _gangs_requeue(groups: list[TaskGroup], messages: dict[int, str], *, counter: str) -> list[str]:
    preempted = counter == "preemptions"
    if not groups:
        return []
    now = timezone.now()
    tasks = list(Task.objects.filter(group__in=groups).order_by("group_id", "position"))
    pods = [t.pod_name for t in tasks if t.pod_name and t.pod_deleted_at is None]
    reservations_drop(task_ids=[t.pk for t in tasks])
    transitions: list[StatusTransition] = []
    for task in tasks:
        transitions += _requeue_rows(task.status, messages[task.group_id], preempted=preempted,
                                     workflow_id=task.workflow_id, group_id=task.group_id, task=task)
        task.status = TaskStatus.SCHEDULING
        task.node = None
        task.node_name = ""
        task.pod_name = ""
        task.dispatched_at = task.pod_deleted_at = task.started_at = task.finished_at = None
        task.exit_code = None
        task.failure_message = ""
        task.updated_at = now
    bulk_set(Task, tasks, _TASK_RESET_FIELDS)
    for group in groups:
        transitions += _requeue_rows(group.status, messages[group.pk], preempted=preempted,
                                     workflow_id=group.workflow_id, group_id=group.pk)
        setattr(group, counter, getattr(group, counter) + 1)
        group.status = TaskStatus.SCHEDULING
        group.scheduling_since = now
        group.placed_at = group.dispatch_requested_at = group.started_at = None
        group.placement_report = group.unschedulable_reason = None
        group.proof_epoch = group.idle_fit = group.idle_fit_epoch = None
        group.reason_code = group.reason_digest = ""
        group.updated_at = now
    bulk_set(TaskGroup, groups, _GROUP_RESET_FIELDS)
    bulk_insert(StatusTransition, transitions)
    return pods


def _requeue_rows(current: str, message: str, *, preempted: bool, workflow_id: int, group_id: int,
                  task: Task | None = None) -> list[StatusTransition]:
    """The history of a gang (or task) sent back to the queue: ``current`` -> RESCHEDULED with the
    reason, RESCHEDULED -> SCHEDULING (a preemption's row keeps the reason, "preempted by ..."). Both
    edges are checked against the table (a member that ended meanwhile raises)."""
    rules.transition_needed("gang" if task is None else "task", current, TaskStatus.RESCHEDULED)
    rules.transition_needed("gang" if task is None else "task", TaskStatus.RESCHEDULED, TaskStatus.SCHEDULING)
    return [
        StatusTransition(workflow_id=workflow_id, group_id=group_id, task=task, from_status=current,
                         to_status=TaskStatus.RESCHEDULED, message=message),
        StatusTransition(workflow_id=workflow_id, group_id=group_id, task=task, from_status=TaskStatus.RESCHEDULED,
                         to_status=TaskStatus.SCHEDULING, message=message if preempted else "queued again"),
    ]
