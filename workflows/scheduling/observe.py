"""What a workflow's pods say: a task's log and the workflow's events, read through the pool's
dispatch backend on request (docs/design.md §6, §7). Nothing here writes.

Events combine the service's own record (every status transition) with the backend's view (for
Kubernetes, the pods' events and the reasons their containers give). A backend that cannot be
reached costs the backend part only: the service's events are still answered, with
``backend_error`` saying what is missing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.utils import timezone

from osmo.errors import ValidationFailedError
from scheduler.dispatch import DispatchPermanentError, DispatchTransientError, backend_for
from workflows.errors import BackendUnavailableError, LogUnavailableError, TaskNotDispatchedError
from workflows.models import StatusTransition, Task, Workflow
from workflows.scheduling.pods import pod_request

LOG_TAIL_DEFAULT = 1000
LOG_TAIL_MAX = 10000
_NAMES_SHOWN = 20


@dataclass(frozen=True, slots=True)
class Event:
    time: datetime
    source: str  # "service" | "backend"
    task: str | None
    kind: str
    message: str


def log_tail_parse(raw: str | None) -> int:
    """The ``tail`` query parameter: a whole number from 1 to LOG_TAIL_MAX (LOG_TAIL_DEFAULT when absent)."""
    if raw is None or raw == "":
        return LOG_TAIL_DEFAULT
    try:
        tail = int(raw)
    except ValueError:
        tail = 0
    if not 1 <= tail <= LOG_TAIL_MAX:
        raise ValidationFailedError([{"path": "tail", "message": f"tail must be a whole number from 1 to "
                                                                 f"{LOG_TAIL_MAX}, not {raw[:40]!r}."}])
    return tail


def _task_pick(workflow: Workflow, name: str | None) -> Task:
    tasks = list(workflow.tasks.select_related("node", "workflow", "group").order_by("group__position", "position"))
    if name:
        for task in tasks:
            if task.name == name:
                return task
        known = ", ".join(t.name for t in tasks[:_NAMES_SHOWN]) + (", ..." if len(tasks) > _NAMES_SHOWN else "")
        raise ValidationFailedError([{"path": "task", "message": f"workflow {workflow.workflow_id} has no task "
                                                                 f"{name[:100]!r} (tasks: {known})."}])
    if len(tasks) == 1:
        return tasks[0]
    raise ValidationFailedError([{"path": "task", "message": f"workflow {workflow.workflow_id} has {len(tasks)} "
                                                             "tasks; name one with task=<name>."}])


def task_log(workflow: Workflow, *, task_name: str | None, tail: int, now: datetime | None = None) -> dict[str, Any]:
    """The last ``tail`` lines of a task's pod log: ``{"workflow", "task", "pod", "lines", "truncated"}``.

    400 (naming ``task``) for an unknown task, or no task named in a workflow of several; 409
    ``not_dispatched`` before its pod was created; 409 ``log_unavailable`` when the backend has no log
    for it; 503 ``backend_unavailable`` when the backend cannot be reached."""
    task = _task_pick(workflow, task_name)
    if task.dispatched_at is None or not task.pod_name:
        raise TaskNotDispatchedError(workflow.workflow_id, task.name, task.status)
    pool = workflow.pool
    try:
        backend = backend_for(pool.backend)
        log = backend.pod_log(pod_request(task, pool), tail=tail, now=now or timezone.now())
    except DispatchTransientError as exc:
        raise BackendUnavailableError(pool.name, str(exc)) from exc
    except DispatchPermanentError as exc:
        raise LogUnavailableError(workflow.workflow_id, task.name, task.pod_name, str(exc)) from exc
    return {"workflow": workflow.workflow_id, "task": task.name, "pod": task.pod_name, "lines": list(log.lines),
            "truncated": log.truncated}


def _transition_event(transition: StatusTransition) -> Event:
    if transition.task is not None:
        subject = f"task {transition.task.name}"
    elif transition.group is not None:
        subject = f"group {transition.group.name}"
    else:
        subject = "workflow"
    message = f"{subject}: {transition.from_status or '-'} -> {transition.to_status}"
    if transition.message:
        message = f"{message} ({transition.message})"
    return Event(transition.at, "service", transition.task.name if transition.task else None, "status", message)


def workflow_events(workflow: Workflow, *, now: datetime | None = None) -> dict[str, Any]:
    """Everything that happened to the workflow, oldest first: ``{"workflow", "events", "backend_error"}``."""
    events = [_transition_event(t) for t in workflow.transitions.select_related("task", "group").order_by("at", "pk")]
    backend_error: str | None = None
    tasks = list(workflow.tasks.filter(dispatched_at__isnull=False).exclude(pod_name="")
                 .select_related("node", "workflow", "group").order_by("pk"))
    if tasks:
        pool = workflow.pool
        by_pod = {task.pod_name: task.name for task in tasks}
        try:
            backend = backend_for(pool.backend)
            seen = backend.pod_events([pod_request(task, pool) for task in tasks], now=now or timezone.now())
        except (DispatchTransientError, DispatchPermanentError) as exc:
            backend_error = f"the backend's events are missing: {exc}"
        else:
            events += [Event(e.time, "backend", by_pod.get(e.pod_name), e.kind, e.message) for e in seen]
    events.sort(key=lambda e: (e.time, e.source != "service"))
    return {"workflow": workflow.workflow_id, "events": events, "backend_error": backend_error}
