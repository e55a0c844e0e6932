"""The task page: one task of a workflow, with what its viewer may do in it from the browser (a terminal,
"Open port") and what the page's script reads live (its log, its events) through the API."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlencode

from django.http import Http404
from django.urls import reverse

from osmo import config as osmo_config
from osmo.types import Viewer
from pages.links import workflow_url
from scheduler.choices import DispatchBackend
from workflows.choices import TASK_TERMINAL_STATUSES
from workflows.models import GROUP_JSON_JOINED, Task, Workflow

#: Lines of the log the page shows and follows (the download link has the whole log).
LOG_LINES_SHOWN = 1000


@dataclass(frozen=True, slots=True)
class TaskDetail:
    workflow: Workflow
    task: Task
    workflow_link: str
    owner_query: str  # "?user=<owner>" when the viewer is not the owner (the API's lookups take it too)
    may_open: bool  # the viewer may open sessions into the workflow's tasks (the API's rule)
    running: bool
    sessions_backend: bool  # the pool's backend opens sessions (the simulated one runs no process)
    forwarding: bool  # the pool lets browsers reach its tasks' ports ("Open port")
    terminal: bool  # all of the above: the page offers a terminal
    open_port: bool  # ... and "Open port"
    why_not: str  # why there is no terminal, in words (empty when there is one)
    ports_prefix: str  # /workflows/<id>/tasks/<task>/ports
    absolute_prefix: str  # /workflows/<id>/tasks/<task>/absolute-ports
    log_lines: int
    final: bool  # the task ended: its status no longer changes
    has_log: bool  # its pod was made: the backend may have a log and events for it


def task_user_may_open(workflow: Workflow, user: Viewer) -> bool:
    """The sessions' rule (``workflows.sessions.service.session_open``): the owner, and staff where
    OSMO_SESSION_STAFF allows it."""
    return workflow.submitted_by_id == user.pk or bool(user.is_staff and osmo_config.sessions().staff)


def task_detail_build(workflow: Workflow, task_name: str, *, user: Viewer) -> TaskDetail:
    task = (workflow.tasks.select_related("node", "group").defer(*GROUP_JSON_JOINED).filter(name=task_name)
            .first())
    if task is None:
        raise Http404("Task not found.")
    task.workflow = workflow
    owner = workflow.submitted_by.get_username()
    viewer = user.get_username()
    may_open = task_user_may_open(workflow, user)
    running = task.status == "RUNNING" and bool(task.pod_name)
    sessions_backend = workflow.pool.backend != DispatchBackend.SIMULATED
    terminal = may_open and running and sessions_backend
    if not may_open:
        why_not = f"Only the workflow's owner ({owner}) may open a terminal or a port of its tasks."
    elif not running:
        why_not = f"The task is {task.status}: a terminal and its ports open while it is RUNNING."
    elif not sessions_backend:
        why_not = f"Pool {workflow.pool.name} runs no process (its backend is {workflow.pool.backend}): no terminal."
    else:
        why_not = ""
    base = reverse("task-detail", args=[workflow.workflow_id, task.name]).rstrip("/")
    return TaskDetail(
        workflow=workflow, task=task,
        workflow_link=workflow_url(workflow.workflow_id, owner, viewer=viewer),
        owner_query="" if owner == viewer else "?" + urlencode({"user": owner}), may_open=may_open, running=running,
        sessions_backend=sessions_backend, forwarding=workflow.pool.browser_forwarding, terminal=terminal,
        open_port=terminal and workflow.pool.browser_forwarding, why_not=why_not, ports_prefix=f"{base}/ports",
        absolute_prefix=f"{base}/absolute-ports", log_lines=LOG_LINES_SHOWN,
        final=task.status in TASK_TERMINAL_STATUSES, has_log=task.dispatched_at is not None and bool(task.pod_name))
