"""Status writes of tasks, groups and workflows (docs/design.md §6). With
:mod:`workflows.lifecycle.placing` (placing and preempting gangs) and
:mod:`workflows.lifecycle.reservations`, the lifecycle package is the one writer of statuses and
reservations. The rules and the edge table come from :mod:`workflows.lifecycle.rules` (a change off
the table raises); this module applies them to rows and records each change as a
:class:`~workflows.models.StatusTransition` with its time.

Callers hold the locks of the shared order (pool advisory lock, pool row, workflow rows by primary
key; see :mod:`workflows.scheduling.locks`) before calling anything here that changes a group.
Terminal tasks release their capacity reservations here, in the same transaction.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.utils import timezone

from osmo.bulk import bulk_insert, bulk_set
from workflows.choices import (
    TASK_ACTIVE_STATUSES,
    TASK_FAILED_STATUSES,
    TASK_TERMINAL_STATUSES,
    TaskStatus,
    WorkflowStatus,
)
from workflows.lifecycle import rules
from workflows.lifecycle.reservations import reservations_release
from workflows.lifecycle.specfacts import workflows_spec_facts
from workflows.models import StatusTransition, Task, TaskGroup, Workflow


@dataclass(frozen=True, slots=True)
class TaskChange:
    task: Task
    status: str
    message: str = ""
    exit_code: int | None = None


_TASK_STATUS_FIELDS = ["status", "updated_at", "started_at", "finished_at", "failure_message", "exit_code"]


def tasks_status_set(changes: Iterable[TaskChange]) -> list[Task]:
    """Apply many task transitions in two queries (one bulk update, one bulk insert of their
    history), and one more when tasks that held capacity ended: their reservations are released
    (:func:`~workflows.lifecycle.reservations.reservations_release`, which moves the pool's capacity
    epoch on). A change to the current status or away from a terminal one is skipped; one off the
    edge table raises. Returns the tasks that changed. The update is :func:`~osmo.bulk.bulk_set` (a
    join against the values), not ``bulk_update``, whose CASE branch per row and field cost a pod
    sync of a few hundred tasks most of its CPU."""
    now = timezone.now()
    changed: list[Task] = []
    ended: list[int] = []  # tasks that held capacity and ended
    transitions: list[StatusTransition] = []
    for change in changes:
        task, status = change.task, change.status
        if not rules.transition_needed("task", task.status, status):
            continue
        transitions.append(
            StatusTransition(workflow_id=task.workflow_id, group_id=task.group_id, task=task,
                             from_status=task.status, to_status=status, message=change.message)
        )
        task.status = status
        task.updated_at = now
        if status == TaskStatus.RUNNING and task.started_at is None:
            task.started_at = now
        if status in TASK_TERMINAL_STATUSES:
            task.finished_at = now
            if transitions[-1].from_status in TASK_ACTIVE_STATUSES:
                ended.append(task.pk)
        if change.message and status in TASK_FAILED_STATUSES:
            task.failure_message = change.message
        if change.exit_code is not None:
            task.exit_code = change.exit_code
        changed.append(task)
    if changed:
        bulk_set(Task, changed, _TASK_STATUS_FIELDS)
        bulk_insert(StatusTransition, transitions)
    reservations_release(task_ids=ended)
    return changed


def task_status_set(task: Task, status: str, *, message: str = "", exit_code: int | None = None) -> bool:
    """Move one task to ``status`` (no-op when already there or terminal). Returns whether it changed."""
    return bool(tasks_status_set([TaskChange(task, status, message, exit_code)]))


# What a bulk group move writes (each row keeps the values it had for fields its move did not set).
_GROUP_STATUS_FIELDS = ["status", "updated_at", "scheduling_since", "started_at", "finished_at", "failure_message"]


def _group_move(group: TaskGroup, status: str, now: datetime, message: str = ""
                ) -> tuple[StatusTransition, list[str]] | None:
    """Move ``group`` to ``status`` in memory, with the timestamps the move sets (the one rule for
    single and bulk writes). Returns its history row, unsaved, and the fields it set; None when the
    move changes nothing (already there, or terminal); raises
    :class:`~workflows.lifecycle.rules.TransitionNotAllowedError` for a move off the edge table."""
    if not rules.transition_needed("gang", group.status, status):
        return None
    transition = StatusTransition(workflow_id=group.workflow_id, group=group, from_status=group.status,
                                  to_status=status, message=message)
    group.status = status
    group.updated_at = now
    fields = ["status", "updated_at"]
    if status == TaskStatus.SCHEDULING:
        group.scheduling_since = now
        fields.append("scheduling_since")
    if status == TaskStatus.RUNNING and group.started_at is None:
        group.started_at = now
        fields.append("started_at")
    if status in TASK_TERMINAL_STATUSES:
        group.finished_at = now
        fields.append("finished_at")
    if message and status in TASK_FAILED_STATUSES:
        group.failure_message = message
        fields.append("failure_message")
    return transition, fields


def group_status_set(group: TaskGroup, status: str, *, message: str = "") -> bool:
    """Move a group to ``status`` (no-op when already there or terminal). Returns whether it changed."""
    moved = _group_move(group, status, timezone.now(), message)
    if moved is None:
        return False
    transition, fields = moved
    group.save(update_fields=fields)
    transition.save()
    return True


def workflow_status_refresh(workflow: Workflow, *, message: str = "") -> bool:
    """Recompute the workflow status from its groups and record the change, if any."""
    statuses = list(workflow.groups.order_by("position").values_list("status", flat=True))
    status = WorkflowStatus(rules.workflow_status(statuses))
    if not rules.transition_needed("workflow", workflow.status, status):
        return False
    now = timezone.now()
    previous = workflow.status
    workflow.status = status
    fields = ["status", "updated_at"]
    # Started: first RUNNING (or COMPLETED, if a refresh saw it only then). A workflow failed while it
    # was never RUNNING (cancelled or timed out in the queue) has no start time.
    if status in (WorkflowStatus.RUNNING, WorkflowStatus.COMPLETED) and workflow.started_at is None:
        workflow.started_at = now
        fields.append("started_at")
    if workflow.is_terminal:
        workflow.finished_at = now
        fields.append("finished_at")
        if status != WorkflowStatus.COMPLETED and not workflow.failure_message:
            failed = workflow.groups.exclude(failure_message="").order_by("position").first()
            workflow.failure_message = message or (f"{failed.name}: {failed.failure_message}" if failed else status)
            fields.append("failure_message")
    workflow.save(update_fields=fields)
    StatusTransition.objects.create(workflow=workflow, from_status=previous, to_status=status, message=message)
    return True


def workflows_status_refresh(workflows: Iterable[Workflow]) -> None:
    """:func:`workflow_status_refresh` for many workflows (locked by the caller), in a fixed number of
    queries when none of them fails (a placement cycle moving many PENDING workflows to RUNNING, a pod
    sync completing many); one that fails is refreshed on its own (it needs its failure message)."""
    by_pk = {w.pk: w for w in workflows}
    if not by_pk:
        return
    statuses: dict[int, list[str]] = {pk: [] for pk in by_pk}
    for workflow_id, status in (TaskGroup.objects.filter(workflow_id__in=list(by_pk))
                                .order_by("workflow_id", "position").values_list("workflow_id", "status")):
        statuses[workflow_id].append(status)
    now = timezone.now()
    changed: list[Workflow] = []
    transitions: list[StatusTransition] = []
    for pk, workflow in sorted(by_pk.items()):
        status = WorkflowStatus(rules.workflow_status(statuses[pk]))
        if not rules.transition_needed("workflow", workflow.status, status):
            continue
        if status in rules.WORKFLOW_TERMINAL and status != WorkflowStatus.COMPLETED:
            workflow_status_refresh(workflow)
            continue
        transitions.append(StatusTransition(workflow=workflow, from_status=workflow.status, to_status=status))
        workflow.status = status
        workflow.updated_at = now
        if status != WorkflowStatus.PENDING and workflow.started_at is None:
            workflow.started_at = now
        if status == WorkflowStatus.COMPLETED:
            workflow.finished_at = now
        changed.append(workflow)
    if changed:
        bulk_set(Workflow, changed, ["status", "updated_at", "started_at", "finished_at"])
        bulk_insert(StatusTransition, transitions)


def group_fail(group: TaskGroup, status: str, *, message: str) -> list[int]:
    """Fail a group and its unfinished tasks (their capacity released), and fail downstream groups.
    Returns the ids of the tasks it failed (their pods, if any, must be deleted)."""
    tasks = list(group.tasks.exclude(status__in=TASK_TERMINAL_STATUSES).order_by("pk"))
    tasks_status_set([TaskChange(task, status, message) for task in tasks])
    group_status_set(group, status, message=message)
    downstream_fail(group)
    return [t.pk for t in tasks]


def downstream_fail(group: TaskGroup) -> None:
    """Groups waiting (directly or not) on a failed group can never start: FAILED_UPSTREAM."""
    waiting = {g.name: g for g in group.workflow.groups.filter(status=TaskStatus.WAITING).order_by("position")}
    doomed = rules.downstream_failures(group.name, {name: g.upstream for name, g in waiting.items()})
    for name, cause in doomed.items():
        candidate = waiting[name]
        message = f"upstream group {cause} failed"
        waiting_tasks = candidate.tasks.exclude(status__in=TASK_TERMINAL_STATUSES).order_by("pk")
        tasks_status_set([TaskChange(task, TaskStatus.FAILED_UPSTREAM, message) for task in waiting_tasks])
        group_status_set(candidate, TaskStatus.FAILED_UPSTREAM, message=message)


def _lead_of(leads: list[bool]) -> int | None:
    return next((i for i, lead in enumerate(leads) if lead), None)


def _verdict(statuses: list[str], leads: list[bool], ignore_nonlead: bool | None
             ) -> rules.GangVerdict | None:
    """The gang's verdict, or None when it depends on ``ignoreNonleadStatus`` and that is not known
    yet (``ignore_nonlead`` None: the spec is read only when the answer matters)."""
    lead = _lead_of(leads)
    if ignore_nonlead is not None:
        return rules.gang_verdict(statuses, lead=lead, ignore_nonlead=ignore_nonlead)
    by_lead = rules.gang_verdict(statuses, lead=lead, ignore_nonlead=True)
    return by_lead if by_lead == rules.gang_verdict(statuses, lead=lead, ignore_nonlead=False) else None


def _ignore_nonlead(group: TaskGroup) -> bool:
    facts = workflows_spec_facts([group.workflow_id]).get(group.workflow_id)
    return facts.ignores_nonlead(group.name) if facts is not None else True


def gang_settle(group: TaskGroup, *, ignore_nonlead: bool | None = None) -> list[int]:
    """Derive the gang's status from its tasks (:func:`rules.gang_verdict`: the lead decides unless the
    group sets ``ignoreNonleadStatus: false``); a gang that ended stops its members still going, a
    completed gang promotes the groups waiting on it. Returns the ids of the tasks it stopped (their
    capacity released; their pods are the caller's to delete)."""
    tasks = list(group.tasks.order_by("position"))
    statuses, leads = [t.status for t in tasks], [t.lead for t in tasks]
    verdict = _verdict(statuses, leads, ignore_nonlead)
    if verdict is None:
        verdict = _verdict(statuses, leads, _ignore_nonlead(group))
        assert verdict is not None
    if verdict.status is None:
        return []
    stopped = [tasks[i] for i in verdict.stop]
    if verdict.failed_task is not None:
        first = tasks[verdict.failed_task]
        tasks_status_set([TaskChange(task, TaskStatus.FAILED, f"stopped: gang member {first.name} failed")
                          for task in stopped])
        message = f"task {first.name} failed: {first.failure_message or first.status}"
        group_status_set(group, verdict.status, message=message)
        downstream_fail(group)
        return [t.pk for t in stopped]
    if stopped:  # the lead completed: the group's outcome is the lead's
        lead = tasks[_lead_of(leads) or 0]
        tasks_status_set([TaskChange(task, TaskStatus.FAILED_CANCELED, f"stopped: lead task {lead.name} completed")
                          for task in stopped])
    group_status_set(group, verdict.status)
    if verdict.status == TaskStatus.COMPLETED:
        waiting_groups_promote(TaskGroup.objects.filter(workflow_id=group.workflow_id, status=TaskStatus.WAITING))
    return [t.pk for t in stopped]


def gangs_settle(groups: Iterable[TaskGroup]) -> list[int]:
    """:func:`gang_settle` for many gangs (a pod sync's): their tasks are read in one query; the gangs
    that only move on (to RUNNING or COMPLETED) are written in one bulk update with one bulk insert of
    their transitions, and the groups waiting on the completed ones are promoted in one pass; a gang
    that ended with members to stop takes :func:`gang_settle` itself. The specs are read (one query)
    only for gangs whose verdict depends on ``ignoreNonleadStatus``. Returns the ids of the tasks it
    stopped."""
    groups = list(groups)
    if not groups:
        return []
    statuses: dict[int, list[str]] = {group.pk: [] for group in groups}
    leads: dict[int, list[bool]] = {group.pk: [] for group in groups}
    for group_id, status, lead in (Task.objects.filter(group_id__in=list(statuses)).order_by("group_id", "position")
                                   .values_list("group_id", "status", "lead")):
        statuses[group_id].append(status)
        leads[group_id].append(lead)
    verdicts = {group.pk: _verdict(statuses[group.pk], leads[group.pk], None) for group in groups}
    flags: dict[int, bool | None] = {group.pk: None for group in groups}  # None: the verdict does not depend on it
    undecided = [group for group in groups if verdicts[group.pk] is None]
    if undecided:
        facts = workflows_spec_facts(group.workflow_id for group in undecided)
        for group in undecided:
            found = facts.get(group.workflow_id)
            flags[group.pk] = found.ignores_nonlead(group.name) if found is not None else True
            verdicts[group.pk] = _verdict(statuses[group.pk], leads[group.pk], flags[group.pk])
    now = timezone.now()
    stopped: list[int] = []
    moved: list[TaskGroup] = []
    transitions: list[StatusTransition] = []
    completed: set[int] = set()  # workflows with a completed gang: their waiting groups may start
    for group in groups:
        verdict = verdicts[group.pk]
        assert verdict is not None
        if verdict.status is None:
            continue
        if verdict.failed_task is not None or verdict.stop:
            stopped += gang_settle(group, ignore_nonlead=flags[group.pk])
            continue
        if verdict.status == TaskStatus.COMPLETED:
            completed.add(group.workflow_id)
        if (change := _group_move(group, verdict.status, now)) is not None:
            transitions.append(change[0])
            moved.append(group)
    if moved:
        bulk_set(TaskGroup, moved, _GROUP_STATUS_FIELDS)
        bulk_insert(StatusTransition, transitions)
    if completed:
        waiting_groups_promote(TaskGroup.objects.filter(workflow_id__in=sorted(completed), status=TaskStatus.WAITING)
                               .order_by("workflow_id", "position"))
    return stopped


def groups_promote(groups: Iterable[TaskGroup]) -> None:
    """WAITING groups whose upstream groups all completed are queued for placement, with their tasks:
    one bulk update and one bulk insert of transitions for the groups, the same for their tasks."""
    now = timezone.now()
    promoted: list[TaskGroup] = []
    transitions: list[StatusTransition] = []
    for group in groups:
        if (change := _group_move(group, TaskStatus.SCHEDULING, now, "upstream groups completed")) is not None:
            transitions.append(change[0])
            promoted.append(group)
    if not promoted:
        return
    bulk_set(TaskGroup, promoted, _GROUP_STATUS_FIELDS)
    bulk_insert(StatusTransition, transitions)
    tasks = Task.objects.filter(group__in=[g.pk for g in promoted], status=TaskStatus.WAITING).order_by("pk")
    tasks_status_set([TaskChange(task, TaskStatus.SCHEDULING) for task in tasks])


def waiting_groups_promote(waiting_groups: Iterable[TaskGroup]) -> set[int]:
    """Apply :func:`rules.waiting_group_verdict` to WAITING groups (a queryset or list, each with
    ``workflow`` loaded or loadable): promote the ready ones (together, :func:`groups_promote`), fail
    those whose upstream failed. Returns the ids of the workflows whose status must be recomputed."""
    waiting = list(waiting_groups)
    if not waiting:
        return set()
    statuses: dict[tuple[int, str], str] = {
        (workflow_id, name): status
        for workflow_id, name, status in TaskGroup.objects.filter(
            workflow_id__in={g.workflow_id for g in waiting}
        ).values_list("workflow_id", "name", "status")
    }
    refresh: set[int] = set()
    ready: list[TaskGroup] = []
    for group in waiting:
        mine = {name: statuses.get((group.workflow_id, name), "") for name in group.upstream}
        verdict = rules.waiting_group_verdict(group.upstream, mine)
        if verdict == TaskStatus.SCHEDULING:
            ready.append(group)
        elif verdict == TaskStatus.FAILED_UPSTREAM:
            failed = (
                TaskGroup.objects.filter(workflow_id=group.workflow_id, name__in=group.upstream,
                                         status__in=TASK_FAILED_STATUSES)
                .order_by("position")
                .first()
            )
            if failed is not None:
                downstream_fail(failed)
                refresh.add(group.workflow_id)
    groups_promote(ready)
    return refresh
