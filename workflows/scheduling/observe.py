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
from parsing.natural import natural_key
from scheduler.dispatch import DispatchPermanentError, DispatchTransientError, backend_for
from scheduler.services.backends import backend_of_pool
from workflows.errors import BackendUnavailableError, LogUnavailableError, TaskNotDispatchedError
from workflows.models import GROUP_JSON_JOINED, StatusTransition, Task, Workflow
from workflows.scheduling.pod.request import pod_request
from workflows.sessions.events import session_event_lines

LOG_TAIL_DEFAULT = 1000
LOG_TAIL_ALL_DEFAULT = 100  # per task, when every task's log is asked for
LOG_TAIL_MAX = 10000  # lines in one answer
LOG_TASKS_MAX = 50  # tasks in one answer for every task's log
_NAMES_SHOWN = 20


@dataclass(frozen=True, slots=True)
class Event:
    time: datetime
    source: str  # "service" | "backend"
    task: str | None
    kind: str
    message: str


def log_tail_parse(raw: str | None) -> int | None:
    """The ``tail`` query parameter: a whole number from 1 to LOG_TAIL_MAX (None when absent: the
    default depends on how many tasks are read, see :func:`task_log`)."""
    if raw is None or raw == "":
        return None
    try:
        tail = int(raw)
    except ValueError:
        tail = 0
    if not 1 <= tail <= LOG_TAIL_MAX:
        raise ValidationFailedError([{"path": "tail", "message": f"tail must be a whole number from 1 to "
                                                                 f"{LOG_TAIL_MAX}, not {raw[:40]!r}."}])
    return tail


def _tasks_in_order(workflow: Workflow) -> list[Task]:
    """The workflow's tasks, group after group, in natural order of names within a group (t2 before t10)."""
    # Not select_related("workflow"): the related manager gives every task ``workflow`` itself, and the
    # join copied the workflow's stored spec (up to 1 MiB) into each of its 1,000 tasks' rows: 1 GB.
    tasks = workflow.tasks.select_related("node", "group").defer(*GROUP_JSON_JOINED)
    return sorted(tasks, key=lambda task: (task.group.position, natural_key(task.name)))


def _task_pick(tasks: list[Task], workflow: Workflow, name: str) -> Task:
    for task in tasks:
        if task.name == name:
            return task
    known = ", ".join(t.name for t in tasks[:_NAMES_SHOWN]) + (", ..." if len(tasks) > _NAMES_SHOWN else "")
    raise ValidationFailedError([{"path": "task", "message": f"workflow {workflow.workflow_id} has no task "
                                                             f"{name[:100]!r} (tasks: {known})."}])


def _pod_log(workflow: Workflow, task: Task, *, tail: int, now: datetime) -> tuple[list[str], bool]:
    """The task's last ``tail`` log lines and whether there are more; raises like :func:`task_log`."""
    if task.dispatched_at is None or not task.pod_name:
        raise TaskNotDispatchedError(workflow.workflow_id, task.name, task.status)
    pool = workflow.pool
    try:
        backend = backend_of_pool(pool) or backend_for(pool.backend)
        log = backend.pod_log(pod_request(task, pool), tail=tail, now=now)
    except DispatchTransientError as exc:
        raise BackendUnavailableError(pool.name, str(exc)) from exc
    except DispatchPermanentError as exc:
        reason = str(exc)
        if task.pod_deleted_at is not None:  # cancelled, stopped with its lead, cleaned up: not only "not found"
            reason += f"; its pod was deleted (the task is {task.status}), and its log with it"
        raise LogUnavailableError(workflow.workflow_id, task.name, task.pod_name, reason) from exc
    return list(log.lines), log.truncated


def task_log(workflow: Workflow, *, task_name: str | None, tail: int | None,
             now: datetime | None = None) -> dict[str, Any]:
    """Pod logs: ``{"workflow", "task", "pod", "lines", "truncated", "tasks", "tasks_omitted"}``.

    With ``task_name`` (or in a workflow of one task): the last ``tail`` lines of that task's log
    (default LOG_TAIL_DEFAULT); 400 (naming ``task``) for an unknown task; 409 ``not_dispatched``
    before its pod was created; 409 ``log_unavailable`` when the backend has no log for it.

    Without it, in a workflow of several tasks: every task's log, task after task in
    :func:`_tasks_in_order`, each line prefixed ``[task] `` (kubectl's ``--prefix``); ``task`` and
    ``pod`` are None. The answer is capped: at most LOG_TASKS_MAX tasks (``tasks_omitted`` counts
    the rest), each task's last ``tail`` lines (default LOG_TAIL_ALL_DEFAULT, as kubectl tails less
    by default when it reads several pods), at most LOG_TAIL_MAX lines in all (each task's tail is
    at most LOG_TAIL_MAX divided by the tasks shown). A task without a log does not fail the
    answer: its entry in ``tasks`` says why in ``error``.

    Either way, 503 ``backend_unavailable`` when the backend cannot be reached."""
    now = now or timezone.now()
    tasks = _tasks_in_order(workflow)
    if task_name or len(tasks) == 1:
        task = _task_pick(tasks, workflow, task_name) if task_name else tasks[0]
        lines, truncated = _pod_log(workflow, task, tail=tail or LOG_TAIL_DEFAULT, now=now)
        return {"workflow": workflow.workflow_id, "task": task.name, "pod": task.pod_name, "lines": lines,
                "truncated": truncated, "tasks": [{"task": task.name, "pod": task.pod_name, "truncated": truncated,
                                                   "error": None}], "tasks_omitted": 0}
    shown = tasks[:LOG_TASKS_MAX]
    each = min(tail or LOG_TAIL_ALL_DEFAULT, LOG_TAIL_MAX // max(len(shown), 1))
    lines = []
    entries = []
    for task in shown:
        try:
            own, truncated = _pod_log(workflow, task, tail=each, now=now)
        except (TaskNotDispatchedError, LogUnavailableError) as exc:
            entries.append({"task": task.name, "pod": task.pod_name, "truncated": False, "error": exc.message})
            continue
        lines += [f"[{task.name}] {line}" for line in own]
        entries.append({"task": task.name, "pod": task.pod_name, "truncated": truncated, "error": None})
    return {"workflow": workflow.workflow_id, "task": None, "pod": None, "lines": lines,
            "truncated": any(entry["truncated"] for entry in entries), "tasks": entries,
            "tasks_omitted": len(tasks) - len(shown)}


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
    events = [_transition_event(t) for t in workflow.transitions.select_related("task", "group")
              .defer(*GROUP_JSON_JOINED).order_by("at", "pk")]
    for session in workflow.sessions.filter(started_at__isnull=False).select_related("task", "user"):
        events += [Event(at, "service", session.task.name, kind, message)
                   for at, kind, message in session_event_lines(session)]
    backend_error: str | None = None
    tasks = list(workflow.tasks.filter(dispatched_at__isnull=False).exclude(pod_name="")
                 .select_related("node", "group").defer(*GROUP_JSON_JOINED).order_by("pk"))  # see _tasks_in_order
    if tasks:
        pool = workflow.pool
        by_pod = {task.pod_name: task.name for task in tasks}
        try:
            backend = backend_of_pool(pool) or backend_for(pool.backend)
            seen = backend.pod_events([pod_request(task, pool) for task in tasks], now=now or timezone.now())
        except (DispatchTransientError, DispatchPermanentError) as exc:
            backend_error = f"the backend's events are missing: {exc}"
        else:
            events += [Event(e.time, "backend", by_pod.get(e.pod_name), e.kind, e.message) for e in seen]
    events.sort(key=lambda e: (e.time, e.source != "service"))
    return {"workflow": workflow.workflow_id, "events": events, "backend_error": backend_error}
