"""Tasks the cluster, not the task itself, stopped (docs/design.md §6, "When the cluster is the cause"):
what each such task's gang does, by the pure rules (:func:`workflows.lifecycle.rules.refused_verdict`,
:func:`~workflows.lifecycle.rules.lost_verdict`). The caller (a pod sync, holding the workflows' locks)
writes the task changes, and sends the gangs back to the queue
(:func:`workflows.lifecycle.placing.groups_requeue_refused` and
:func:`~workflows.lifecycle.placing.groups_reschedule`).

- refused (the cluster would not schedule a pod): the gang is queued again, counted in its
  ``requeues``; past ``max_requeues`` the task fails (:data:`rules.REFUSED_STATUS`) quoting the cluster;
- lost (the pod disrupted, evicted, or gone with its NotReady or deleted node): the gang is rescheduled,
  counted in its ``retries`` against the pool's ``max_retries``; past it the task fails with the
  cause's status (:data:`rules.LOST_STATUSES`);
- either way, a gang is sent back only while every other member still holds its place (a member that
  ended cannot be restarted); otherwise the task fails and says why.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from workflows.choices import TaskStatus
from workflows.lifecycle import rules
from workflows.lifecycle.transitions import TaskChange
from workflows.models import Task


@dataclass(frozen=True, slots=True)
class ClusterSettled:
    changes: dict[int, TaskChange] = field(default_factory=dict)  # task id -> its failure
    requeue: dict[int, str] = field(default_factory=dict)  # group id -> why (the cluster refused it)
    reschedule: dict[int, str] = field(default_factory=dict)  # group id -> why (the infrastructure lost a pod)
    causes: dict[int, str] = field(default_factory=dict)  # group id -> the cause it was sent back or failed for

    @property
    def groups(self) -> set[int]:
        """The gangs sent back to the queue."""
        return set(self.requeue) | set(self.reschedule)


def tasks_cluster_settle(tasks: Sequence[Task], *, refused: Mapping[int, str], lost: Mapping[int, tuple[str, str]],
                         max_retries: int, max_requeues: int) -> ClusterSettled:
    """What each task the cluster stopped (``refused``: task id -> the cluster's message; ``lost``: task
    id -> (cause, message)) means for it and its gang. ``tasks`` carry their group; a task in both
    counts as lost. One gang takes one verdict, from its first such task."""
    settled = ClusterSettled()
    for task in sorted(tasks, key=lambda t: t.pk):
        if task.pk not in lost and task.pk not in refused:
            continue
        group = task.group
        if group.pk in settled.groups:
            continue
        if task.pk in lost:
            cause, said = lost[task.pk]
            verdict = rules.lost_verdict(cause, retries=group.retries, max_retries=max_retries, message=said)
            failure = rules.LOST_STATUSES[cause]
        else:
            cause, said = rules.CAUSE_UNSCHEDULABLE, refused[task.pk]
            verdict = rules.refused_verdict(requeues=group.requeues, max_requeues=max_requeues, message=said)
            failure = rules.REFUSED_STATUS
        settled.causes[group.pk] = cause
        if verdict.status is None and not _others_hold(task):
            verdict = rules.ExitVerdict(failure, f"{said}: not queued again, another task of its gang already ended")
        message = f"task {task.name}: {verdict.message}"
        if verdict.status is None:
            (settled.reschedule if cause != rules.CAUSE_UNSCHEDULABLE else settled.requeue)[group.pk] = message
            continue
        settled.changes[task.pk] = TaskChange(task, TaskStatus(verdict.status), message)
    return settled


def _others_hold(task: Task) -> bool:
    return not Task.objects.filter(group_id=task.group_id).exclude(pk=task.pk).exclude(
        status__in=rules.ACTIVE).exists()
