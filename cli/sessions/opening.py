"""Opening a session into a running task: the REST call that does every check and answers a single-use
ticket, then the websocket opened with it (retried while the service restarts), and ``--keep-alive``'s wait
for a task that is on its way to running again (docs/api.md, "Sessions into running tasks").
"""

from __future__ import annotations

import contextlib
import json
import time
from typing import Any

import typer
import websocket

from cli.api import Api, q, workflow_path
from cli.errors import ApiError, CliError

SUBPROTOCOL = "v5.channel.k8s.io"
KEEP_ALIVE_POLL_SECONDS = 2.0


def websocket_url(api: Api, path: str) -> str:
    """The websocket URL of the API's ``path`` (``ws://`` for ``http://``, ``wss://`` for ``https://``)."""
    base = api.url.rstrip("/")
    if base.startswith("https://"):
        return "wss://" + base[len("https://"):] + path
    if base.startswith("http://"):
        return "ws://" + base[len("http://"):] + path
    return base + path


def _refusal(exc: websocket.WebSocketBadStatusException) -> CliError:
    body: Any = None
    with contextlib.suppress(ValueError, TypeError, AttributeError):
        body = json.loads(exc.resp_body or b"")
    if isinstance(body, dict) and body.get("message"):
        return ApiError(str(body["message"]), status=exc.status_code, code=str(body.get("code") or ""))
    return ApiError(f"the server refused the session's websocket (HTTP {exc.status_code})", status=exc.status_code)


def session_open(api: Api, workflow_id: str, task: str, body: dict[str, Any], *,
                 connect_timeout: float, deferred: bool = False) -> websocket.WebSocket:
    """POST the session, open its websocket (``deferred``: a port-forward spare, connected to the task's port
    only on its ``connect`` message). Retries while the service cannot be reached (it restarts) until
    ``connect_timeout``; any refusal of the service is raised at once."""
    deadline = time.monotonic() + connect_timeout
    path = workflow_path(workflow_id, f"tasks/{q(task)}/sessions/")
    while True:
        try:
            _status, answer = api.post(path, json=body, not_found=f"workflow {workflow_id} not found")
            return websocket.create_connection(
                websocket_url(api, str(answer["websocket"]) + ("?connect=deferred" if deferred else "")),
                timeout=max(1.0, deadline - time.monotonic()),
                header=[f"Authorization: {api.headers['Authorization']}"], subprotocols=[SUBPROTOCOL],
                enable_multithread=True)
        except websocket.WebSocketBadStatusException as exc:
            if exc.status_code not in (502, 503, 504) or time.monotonic() >= deadline:
                raise _refusal(exc) from None
        except ApiError as exc:
            if exc.status not in (502, 503, 504) or time.monotonic() >= deadline:
                raise
        except (CliError, OSError, websocket.WebSocketException) as exc:
            if time.monotonic() >= deadline:
                if isinstance(exc, CliError):
                    raise
                raise CliError(f"cannot open the session's websocket at {api.url}: {exc}") from None
        time.sleep(0.5)


def task_status(api: Api, workflow_id: str, task: str) -> str | None:
    """The task's status as the API shows it (None when the workflow has no such task)."""
    workflow = api.get(workflow_path(workflow_id), not_found=f"workflow {workflow_id} not found")
    for group in workflow.get("groups") or []:
        for each in group.get("tasks") or []:
            if each.get("name") == task:
                return str(each.get("status") or "")
    return None


def task_ended(status: str | None) -> bool:
    return status is None or status == "COMPLETED" or status.startswith("FAILED")


def open_waiting(api: Api, workflow_id: str, task: str, body: dict[str, Any], *, connect_timeout: float,
                 keep_alive: bool) -> websocket.WebSocket:
    """:func:`session_open`; with ``keep_alive``, a task that is not RUNNING is waited for while it is on its
    way to running again (RESCHEDULED, then queued and started anew), and the wait stops once it ended."""
    said = ""
    while True:
        try:
            return session_open(api, workflow_id, task, body, connect_timeout=connect_timeout)
        except ApiError as exc:
            if not keep_alive or exc.code != "task_not_running":
                raise
            status = task_status(api, workflow_id, task)
            if task_ended(status):
                raise CliError(f"task {task} of workflow {workflow_id} is {status or 'gone'}: it ended, so "
                               "--keep-alive stops") from None
            if status != said:
                said = status or ""
                typer.echo(f"\r\n[osmo] task {task} is {status}; waiting for it to run again...", err=True)
            time.sleep(KEEP_ALIVE_POLL_SECONDS)

