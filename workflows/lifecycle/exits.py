"""A task's exit settled by its exit action (docs/design.md §6, "Lead and exit actions"): the pod's
exit code against the spec's ``exitActions`` (:func:`workflows.lifecycle.rules.exit_verdict`), the
gang's retries against the pool's ``max_retries``. The caller (a pod sync, holding the workflows'
locks) writes the task changes and sends the gangs to reschedule back to the queue
(:func:`workflows.lifecycle.placing.groups_reschedule`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from scheduler.dispatch import PodState
from workflows.choices import TaskStatus
from workflows.lifecycle import rules
from workflows.lifecycle.specfacts import workflows_spec_facts
from workflows.lifecycle.transitions import TaskChange
from workflows.models import Task


@dataclass(frozen=True, slots=True)
class ExitsSettled:
    changes: dict[int, TaskChange] = field(default_factory=dict)  # task id -> its change
    reschedule: dict[int, str] = field(default_factory=dict)  # group id -> why (the history's message)


def tasks_exit_settle(tasks: Sequence[Task], states: Mapping[int, PodState], *, max_retries: int) -> ExitsSettled:
    """The change each finished task (pod phase Succeeded or Failed, ``states`` by task id) takes, and
    the gangs to reschedule. A pod that never ran (its image not pulled, its container not started:
    :data:`rules.START_FAILURE_STATUSES`) fails with that status, whatever the exit actions. ``tasks``
    carry their group. The specs of the workflows with a finished task are read in one query. A gang
    is rescheduled only while every other member still holds its place (a member that ended cannot be
    restarted): otherwise the task fails and says why."""
    finished = [t for t in tasks if t.pk in states and states[t.pk].phase in ("Succeeded", "Failed")]
    if not finished:
        return ExitsSettled()
    facts = workflows_spec_facts(t.workflow_id for t in finished)
    settled = ExitsSettled()
    for task in finished:
        state = states[task.pk]
        code = state.exit_code if state.exit_code is not None else (0 if state.phase == "Succeeded" else None)
        if state.phase == "Failed" and state.cause in rules.START_FAILURE_STATUSES:  # it never ran: no action applies
            settled.changes[task.pk] = TaskChange(task, TaskStatus(rules.START_FAILURE_STATUSES[state.cause]),
                                                  state.message or state.cause, code)
            continue
        if code is None:  # failed without an exit code (e.g. never started): no action applies
            settled.changes[task.pk] = TaskChange(task, TaskStatus.FAILED, state.message or "failed")
            continue
        actions = facts[task.workflow_id].actions_of(task.name) if task.workflow_id in facts else ()
        verdict = rules.exit_verdict(code, actions, retries=task.group.retries, max_retries=max_retries,
                                     message=state.message)
        if verdict.status is None and not _others_hold(task):
            verdict = rules.ExitVerdict(rules.FAILED, f"{state.message or f'exit code {code}'}: RESCHEDULE refused, "
                                                      "another task of its gang already ended")
        if verdict.status is None:
            settled.reschedule.setdefault(task.group_id, f"task {task.name}: {verdict.message}")
            continue
        settled.changes[task.pk] = TaskChange(task, verdict.status, verdict.message, code)
    return settled


def _others_hold(task: Task) -> bool:
    return not Task.objects.filter(group_id=task.group_id).exclude(pk=task.pk).exclude(
        status__in=rules.ACTIVE).exists()
