"""Sessions into running tasks, the synchronous half: every check before a session (the REST call that
hands out a ticket), the ticket's single use when its websocket opens, and the record kept of it
(docs/design.md §13, "Sessions into running tasks"). The websocket half is :mod:`workflows.sessions.consumers`.

One rule set, in one place, for both kinds:

- only the workflow's owner (staff too where ``OSMO_SESSION_STAFF`` allows it); a user who may not see
  the workflow gets the API's 404, as for a workflow that does not exist;
- never with a task's own API token (the token a task's ``osmo`` command holds);
- only into a RUNNING task (409 ``task_not_running`` naming its status), on a backend that has sessions
  (409 ``sessions_unsupported`` naming the backend), to a port the task itself listens on;
- a ticket opens one websocket, once, within ``OSMO_SESSION_TICKET_SECONDS``, for the user it was given to.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import F
from django.utils import timezone

from osmo import config as osmo_config
from osmo.errors import ValidationFailedError
from osmo.types import User
from scheduler.dispatch import DispatchPermanentError, DispatchTransientError, backend_for
from scheduler.dispatch.base import SessionBackend, SessionUnsupportedError
from workflows.errors import (
    BackendUnavailableError,
    BrowserForwardingOffError,
    PortNotListeningError,
    SessionForbiddenError,
    SessionsUnsupportedError,
    SessionTicketInvalidError,
    TaskNotRunningError,
)
from workflows.models import GROUP_JSON_JOINED, Task, TaskSession, Workflow
from workflows.scheduling.pod.request import pod_request

logger = logging.getLogger(__name__)

KINDS = (TaskSession.KIND_EXEC, TaskSession.KIND_PORT_FORWARD, TaskSession.KIND_PORT_FORWARD_UDP)
FORWARDS = (TaskSession.KIND_PORT_FORWARD, TaskSession.KIND_PORT_FORWARD_UDP)
COMMAND_MAX_ITEMS = 256
COMMAND_MAX_CHARS = 65536


@dataclass(frozen=True, slots=True)
class SessionSettings:
    """The sessions' settings (docs/operations.md, "Sessions"), read once per use from Django's."""

    idle_seconds: int
    max_seconds: int
    ticket_seconds: int
    staff: bool

    @classmethod
    def load(cls) -> SessionSettings:
        return cls(idle_seconds=int(osmo_config.sessions().idle_seconds),
                   max_seconds=int(osmo_config.sessions().max_seconds),
                   ticket_seconds=int(osmo_config.sessions().ticket_seconds), staff=bool(osmo_config.sessions().staff))


@dataclass(frozen=True, slots=True)
class SessionTarget:
    """What a websocket needs to run a session it claimed: the backend and the pod, nothing of the ORM."""

    session_pk: int
    kind: str
    user_pk: int
    username: str
    workflow_id: str
    task: str
    backend: str  # the kind
    backend_name: str  # the pool's backend (a named cluster has its own client)
    namespace: str
    pod_name: str
    command: tuple[str, ...]
    tty: bool
    port: int | None
    browser: bool = False


def ticket_digest(ticket: str) -> str:
    return hashlib.sha256(ticket.encode("utf-8", "replace")).hexdigest()


def _clean_request(kind: Any, command: Any, tty: Any, port: Any) -> tuple[str, list[str], bool, int | None]:
    errors = []
    if kind not in KINDS:
        errors.append({"path": "kind", "message": f"kind must be one of {', '.join(KINDS)}."})
    argv: list[str] = []
    number: int | None = None
    if kind == TaskSession.KIND_EXEC:
        if (not isinstance(command, list) or not command or len(command) > COMMAND_MAX_ITEMS
                or not all(isinstance(item, str) and "\x00" not in item for item in command)
                or sum(len(item) for item in command) > COMMAND_MAX_CHARS or not command[0]):
            errors.append({"path": "command", "message": f"command must be a list of 1 to {COMMAND_MAX_ITEMS} "
                                                         "strings without NUL, the first not empty."})
        else:
            argv = list(command)
        if not isinstance(tty, bool):
            errors.append({"path": "tty", "message": "tty must be true or false."})
    elif kind in FORWARDS:
        if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
            errors.append({"path": "port", "message": f"port must be a whole number from 1 to 65535, not {port!r}."})
        else:
            number = port
    if errors:
        raise ValidationFailedError(errors)
    return str(kind), argv, bool(tty) if kind == TaskSession.KIND_EXEC else False, number


def backend_by_name(name: str, kind: str) -> Any:
    """The client of the backend ``name`` (of kind ``kind``): a named cluster's own, else the process's."""
    from scheduler.models import Backend
    from scheduler.services.backends import backend_client

    row = Backend.objects.filter(name=name).first() if name != kind else None
    return (backend_client(row) if row is not None else None) or backend_for(kind)


def session_backend(workflow: Workflow) -> SessionBackend:
    backend: Any = backend_by_name(workflow.pool.backend_name, workflow.pool.backend)
    if not hasattr(backend, "exec_start"):  # a backend that does not implement the interface at all
        raise SessionsUnsupportedError(workflow.pool.name, workflow.pool.backend, "it has no sessions")
    return backend


def udp_ports_check(backend: Any, pool: str, task: str, namespace: str, pod_name: str, port: int) -> None:
    """A UDP forward's checks: a backend that carries datagrams (the local one; the Kubernetes backend refuses,
    its API's port-forward is TCP only, as kubectl's), and a port the task itself is bound to."""
    udp_ports = getattr(backend, "task_udp_ports", None)
    if udp_ports is None:
        backend.task_ports(namespace=namespace, pod_name=pod_name)  # (a backend without sessions says so first)
        raise SessionsUnsupportedError(pool, backend.name, "it forwards TCP only, so --udp is refused")
    try:
        ports = udp_ports(namespace=namespace, pod_name=pod_name)
    except SessionUnsupportedError as exc:  # Kubernetes: its API's port-forward is TCP only
        raise SessionsUnsupportedError(pool, exc.backend, exc.why) from exc
    if port not in ports:
        listed = ", ".join(str(p) for p in sorted(ports)) or "none"
        raise PortNotListeningError(task, port, f"the task has no UDP socket bound to it (its UDP ports: {listed})")


def session_open(*, workflow: Workflow, user: User, task_name: str, kind: Any, command: Any = None,
                 tty: Any = False, port: Any = None, browser: bool = False,
                 now: datetime | None = None) -> tuple[TaskSession, str]:
    """Check everything and record a session with a fresh ticket: ``(session, ticket)``. ``workflow`` is
    one the caller may see (the view resolved it among those); ``browser`` marks a session the web pages
    opened (the record says so); raises the API's errors."""
    config = SessionSettings.load()
    if workflow.submitted_by_id != user.pk and not (user.is_staff and config.staff):
        # (a user who is not staff never gets here: the workflow is not among those they see, a 404)
        raise SessionForbiddenError(f"Only the owner of workflow {workflow.workflow_id} may exec or forward ports "
                                    "into its tasks (OSMO_SESSION_STAFF lets staff do it too; it is off).")
    kind, argv, tty_on, number = _clean_request(kind, command, tty, port)
    task = (workflow.tasks.select_related("node", "group").defer(*GROUP_JSON_JOINED)
            .filter(name=task_name).first())
    if task is None:
        names = ", ".join(workflow.tasks.order_by("position").values_list("name", flat=True)[:20])
        raise ValidationFailedError([{"path": "task", "message": f"workflow {workflow.workflow_id} has no task "
                                                                 f"{task_name[:100]!r} (tasks: {names})."}])
    task.workflow = workflow
    pool = workflow.pool
    backend = session_backend(workflow)
    if task.status != "RUNNING" or not task.pod_name:
        raise TaskNotRunningError(workflow.workflow_id, task.name, task.status)
    pod = pod_request(task, pool)
    try:
        if kind == TaskSession.KIND_PORT_FORWARD_UDP:
            assert number is not None
            udp_ports_check(backend, pool.name, task.name, pod.namespace, pod.pod_name, number)
        elif kind == TaskSession.KIND_PORT_FORWARD:
            assert number is not None
            ports = backend.task_ports(namespace=pod.namespace, pod_name=pod.pod_name)
            if number not in ports:
                listed = ", ".join(str(p) for p in sorted(ports)) or "none"
                raise PortNotListeningError(task.name, number, f"the task does not listen on it (it listens on: "
                                                               f"{listed})")
        else:  # the pod runs (a backend without sessions refuses here, before any process starts)
            backend.task_ports(namespace=pod.namespace, pod_name=pod.pod_name)
    except SessionUnsupportedError as exc:
        raise SessionsUnsupportedError(pool.name, exc.backend, str(exc)) from exc
    except DispatchTransientError as exc:
        raise BackendUnavailableError(pool.name, str(exc)) from exc
    except DispatchPermanentError as exc:
        raise TaskNotRunningError(workflow.workflow_id, task.name, f"{task.status} but its pod is not running "
                                                                   f"({exc})") from exc
    now = now or timezone.now()
    ticket = secrets.token_urlsafe(32)
    session = TaskSession.objects.create(
        workflow=workflow, task=task, user=user, kind=kind, command=argv, tty=tty_on, port=number, browser=browser,
        ticket_digest=ticket_digest(ticket), ticket_expires_at=now + timedelta(seconds=config.ticket_seconds))
    return session, ticket


def browser_port_open(*, workflow: Workflow, user: User, task_name: str, port: int) -> SessionTarget:
    """A started port-forward session for one request (or websocket) of the browser proxy (the task page's
    "Open port"): the same checks as the REST call, and the pool's ``browser_forwarding`` switch first
    (403 ``browser_forwarding_off``)."""
    if not workflow.pool.browser_forwarding:
        raise BrowserForwardingOffError(workflow.pool.name)
    _session, ticket = session_open(workflow=workflow, user=user, task_name=task_name,
                                    kind=TaskSession.KIND_PORT_FORWARD, port=port, browser=True)
    return ticket_claim(ticket, user)


def ticket_claim(ticket: str, user: Any, *, now: datetime | None = None, deferred: bool = False) -> SessionTarget:
    """The session the ticket opens, marked started (a ticket opens one websocket, once); raises
    :class:`SessionTicketInvalidError` for a ticket unknown, used, expired or given to another user,
    and the session's refusals when its task stopped running meanwhile. ``deferred`` (a port-forward held
    ready before its connection): the ticket is spent (its expiry set to now) but the session is not
    started: :func:`session_connected` starts it when it carries a connection, :func:`session_discard`
    drops it when it never did."""
    now = now or timezone.now()
    if not ticket or len(ticket) > 200 or user is None or not getattr(user, "is_authenticated", False):
        raise SessionTicketInvalidError()
    digest = ticket_digest(ticket)
    claimed = TaskSession.objects.filter(ticket_digest=digest, user_id=user.pk, started_at__isnull=True,
                                         ticket_expires_at__gt=now).update(
        **({"ticket_expires_at": now} if deferred else {"started_at": now}))
    if claimed != 1:
        raise SessionTicketInvalidError()
    session = TaskSession.objects.select_related("workflow__pool", "task__node", "task__group", "user").get(
        ticket_digest=digest)
    task, workflow = session.task, session.workflow
    task.workflow = workflow
    if task.status != "RUNNING":
        session_finish(session.pk, reason=f"task {task.status}", now=now)
        raise TaskNotRunningError(workflow.workflow_id, task.name, task.status)
    pod = pod_request(task, workflow.pool)
    return SessionTarget(session_pk=session.pk, kind=session.kind, user_pk=session.user_id,
                         username=session.user.get_username(), workflow_id=workflow.workflow_id, task=task.name,
                         backend=workflow.pool.backend, backend_name=workflow.pool.backend_name,
                         namespace=pod.namespace, pod_name=pod.pod_name,
                         command=tuple(session.command or ()), tty=session.tty, port=session.port,
                         browser=session.browser)


def task_running(session_pk: int) -> str | None:
    """None while the session's task runs, else its status (the session ends with it)."""
    status = Task.objects.filter(sessions__pk=session_pk).values_list("status", flat=True).first()
    return None if status == "RUNNING" else (status or "gone")


def session_finish(session_pk: int, *, reason: str, bytes_in: int = 0, bytes_out: int = 0,
                   exit_code: int | None = None, now: datetime | None = None) -> bool:
    """Record the end of a session, once (a second call changes nothing): False when it had ended already."""
    ended = TaskSession.objects.filter(pk=session_pk, ended_at__isnull=True).update(
        ended_at=now or timezone.now(), end_reason=reason[:200], bytes_in=F("bytes_in") + bytes_in,
        bytes_out=F("bytes_out") + bytes_out, exit_code=exit_code)
    return ended == 1


def session_connected(session_pk: int, *, now: datetime | None = None) -> None:
    """A deferred session (:func:`ticket_claim`) carries its connection from now: it starts."""
    TaskSession.objects.filter(pk=session_pk, started_at__isnull=True).update(started_at=now or timezone.now())


def session_discard(session_pk: int) -> None:
    """A deferred session that ended without carrying a connection (a spare the CLI held ready and never
    used): no session took place, so none is kept (nor shown in the events), as for a ticket never used."""
    TaskSession.objects.filter(pk=session_pk, started_at__isnull=True).delete()
