"""The sessions' websockets (Django Channels): one consumer per kind of session, beside the DRF views.

``/ws/sessions/exec/<ticket>/`` and ``/ws/sessions/port-forward/<ticket>/``. The ticket comes from the REST
call (``POST /api/workflows/{id}/tasks/{task}/sessions/``), which did every check; the websocket is
authenticated by that ticket *and* the same credentials as the API (``Authorization: Token|Bearer``, or the
signed-in session's cookie), and the ticket must be the same user's. Every refusal before the upgrade is
an HTTP answer with the API's JSON envelope (the ASGI "websocket denial response"; a server without it
gets a close code 4000 + the HTTP status). After the upgrade a session ends with a close code the client
can act on (:data:`CLOSE_CODES`).

Exec frames are Kubernetes' ``v5.channel.k8s.io`` (the first byte of each binary message names the
stream: 0 stdin, 1 stdout, 2 stderr, 3 status JSON with the exit code, 4 resize JSON ``{"Width",
"Height"}``, 255 close stdin), so the CLI and a later Kubernetes backend speak one protocol.
Port-forward carries one TCP connection per websocket: binary messages are its bytes. Opened with
``?connect=deferred`` it is a spare held ready: the connection to the task's port is made (and the session
starts) only when the client sends the text message ``connect`` (answered ``connected``), so a spare holds
nothing in the task and one that ends unused leaves no record.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
import time
from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.exceptions import StopConsumer
from channels.generic.websocket import AsyncWebsocketConsumer
from django.http import HttpRequest
from django.utils import timezone
from rest_framework.authentication import SessionAuthentication
from rest_framework.exceptions import AuthenticationFailed, PermissionDenied, Throttled
from rest_framework.request import Request
from rest_framework.settings import api_settings

from osmo import metrics
from osmo.errors import OsmoError
from scheduler.dispatch import DispatchPermanentError, DispatchTransientError
from scheduler.dispatch.base import TaskExec
from workflows.api.task_auth import TaskApiAccess
from workflows.errors import SessionForbiddenError
from workflows.sessions.service import (
    SessionSettings,
    SessionTarget,
    backend_by_name,
    session_connected,
    session_discard,
    session_finish,
    task_running,
    ticket_claim,
)

logger = logging.getLogger(__name__)

SUBPROTOCOL = "v5.channel.k8s.io"
STDIN, STDOUT, STDERR, STATUS, RESIZE, CLOSE_STDIN = 0, 1, 2, 3, 4, 255

CLOSE_NORMAL = 1000  # exec: the command ended (its status was sent first); port-forward: the task closed
CLOSE_TASK_ENDED = 4409  # the task is no longer RUNNING
CLOSE_IDLE = 4408  # no byte either way for OSMO_SESSION_IDLE_SECONDS
CLOSE_MAX_LENGTH = 4410  # open for OSMO_SESSION_MAX_SECONDS
CLOSE_BACKEND_ERROR = 4500  # the backend failed mid-session
CLOSE_PORT_REFUSED = 4404  # a deferred port-forward: the task no longer listens on the port
CLOSE_CODES = {CLOSE_NORMAL: "ended", CLOSE_TASK_ENDED: "task_ended", CLOSE_IDLE: "idle",
               CLOSE_MAX_LENGTH: "max_length", CLOSE_BACKEND_ERROR: "error", CLOSE_PORT_REFUSED: "port_refused"}
CONNECT, CONNECTED = "connect", "connected"  # a deferred port-forward's control messages (text)
WATCH_SECONDS = 1.0
TASK_CHECK_SECONDS = 3.0


class NotAuthenticatedError(OsmoError):
    http_status = 401
    code = "not_authenticated"
    default_message = "Authentication credentials were not provided."


class ThrottledError(OsmoError):
    http_status = 429
    code = "throttled"


def websocket_user(scope: dict[str, Any]) -> Any:
    """The user of the websocket's credentials: the API's authentications (tokens, API keys, the identity
    provider's bearer tokens) from its ``Authorization`` header, else the session cookie's user. A
    task's own API token is refused (403): a task cannot open sessions into itself or its siblings."""
    headers = {key.lower(): value for key, value in scope.get("headers", [])}
    authorization = headers.get(b"authorization")
    if authorization:
        http = HttpRequest()
        http.META["HTTP_AUTHORIZATION"] = authorization.decode("latin1")
        http.META["REMOTE_ADDR"] = (scope.get("client") or ("", 0))[0] or ""
        if b"x-forwarded-for" in headers:
            http.META["HTTP_X_FORWARDED_FOR"] = headers[b"x-forwarded-for"].decode("latin1")
        request = Request(http)
        classes: list[Any] = list(api_settings.DEFAULT_AUTHENTICATION_CLASSES)
        for authentication in classes:
            if issubclass(authentication, SessionAuthentication):
                continue
            try:
                found = authentication().authenticate(request)
            except PermissionDenied as exc:  # a task's token outside the endpoints it may use
                raise SessionForbiddenError("A task's own token opens no session: use your own API token.") from exc
            except AuthenticationFailed as exc:
                raise NotAuthenticatedError(str(exc.detail)) from exc
            except Throttled as exc:
                raise ThrottledError(str(exc.detail)) from exc
            if found is not None:
                user, auth = found
                if isinstance(auth, TaskApiAccess):
                    raise SessionForbiddenError("A task's own token opens no session: use your own API token.")
                return user
        raise NotAuthenticatedError("The Authorization header names no credentials this service knows.")
    user = scope.get("user")
    if user is not None and getattr(user, "is_authenticated", False):
        return user
    raise NotAuthenticatedError()


def _claim(scope: dict[str, Any], ticket: str, kind: str, *, deferred: bool = False) -> SessionTarget:
    user = websocket_user(scope)
    target = ticket_claim(ticket, user, deferred=deferred)
    if target.kind != kind:
        session_finish(target.session_pk, reason=f"opened as {kind}")
        from workflows.errors import SessionTicketInvalidError

        raise SessionTicketInvalidError(f"This ticket is for a {target.kind} session, not {kind}.")
    return target


class SessionConsumer(AsyncWebsocketConsumer):
    """What both kinds share: the claim, the refusals before the upgrade, the watch (idle, maximum
    length, the task's end) and the record at the end."""

    kind = ""

    async def connect(self) -> None:
        self.target: SessionTarget | None = None
        self.bytes_in = 0
        self.bytes_out = 0
        self.finished = False
        self.tasks: list[asyncio.Task[None]] = []
        self.config = SessionSettings.load()
        try:
            self.target = await database_sync_to_async(self.claim)()
            await self.start()
        except OsmoError as exc:
            if self.target is not None:
                await database_sync_to_async(session_finish)(self.target.session_pk, reason=f"refused: {exc.message}")
            await self.refuse(exc.http_status, exc.code, exc.message, exc.details)
            raise StopConsumer() from None
        except DispatchTransientError as exc:
            await self.refuse_backend(503, "backend_unavailable", str(exc))
        except DispatchPermanentError as exc:
            await self.refuse_backend(409, "session_refused", str(exc))
        await self.accept(self.subprotocol())
        self.started = time.monotonic()
        self.last_activity = self.started
        self.tasks.append(asyncio.create_task(self.watch()))
        self.tasks.append(asyncio.create_task(self.pump()))

    def claim(self) -> SessionTarget:  # synchronous: the database
        """The session this websocket opens (its ticket's), or the refusal (an :class:`OsmoError`)."""
        return _claim(self.scope, self.scope["url_route"]["kwargs"].get("ticket", ""), self.kind)

    def subprotocol(self) -> str | None:
        """The websocket subprotocol to accept, once :meth:`start` succeeded."""
        return SUBPROTOCOL if SUBPROTOCOL in (self.scope.get("subprotocols") or []) else None

    async def refuse_backend(self, status: int, code: str, message: str) -> None:
        assert self.target is not None
        await database_sync_to_async(session_finish)(self.target.session_pk, reason=f"refused: {message}")
        await self.refuse(status, code, message, {})
        raise StopConsumer()

    async def refuse(self, status: int, code: str, message: str, details: dict[str, Any]) -> None:
        """The API's envelope as the HTTP answer to the upgrade, or a close code 4000 + status."""
        if "websocket.http.response" in (self.scope.get("extensions") or {}):
            body = json.dumps({"code": code, "message": message, "details": details}).encode()
            await self.base_send({"type": "websocket.http.response.start", "status": status,
                                  "headers": [(b"content-type", b"application/json"),
                                              (b"content-length", str(len(body)).encode())]})
            await self.base_send({"type": "websocket.http.response.body", "body": body})
        else:
            await self.base_send({"type": "websocket.close", "code": 4000 + status, "reason": message[:120]})

    async def start(self) -> None:  # the backend's half, before the upgrade
        raise NotImplementedError

    async def pump(self) -> None:  # the task's bytes to the websocket, until the end
        raise NotImplementedError

    async def stop(self) -> None:  # free what the backend holds (idempotent)
        return None

    def touch(self) -> None:
        self.last_activity = time.monotonic()

    def carried(self) -> bool:
        """Whether the session took place (False only for a deferred port-forward never connected)."""
        return True

    async def watch(self) -> None:
        assert self.target is not None
        last_check = time.monotonic()
        while not self.finished:
            await asyncio.sleep(WATCH_SECONDS)
            now = time.monotonic()
            if now - self.last_activity >= self.config.idle_seconds:
                await self.finish(f"idle for {self.config.idle_seconds} s", close_code=CLOSE_IDLE)
            elif now - self.started >= self.config.max_seconds:
                await self.finish(f"open for its maximum of {self.config.max_seconds} s", close_code=CLOSE_MAX_LENGTH)
            elif now - last_check >= TASK_CHECK_SECONDS:
                last_check = now
                status = await database_sync_to_async(task_running)(self.target.session_pk)
                if status is not None:
                    await self.finish(f"the task is {status}", close_code=CLOSE_TASK_ENDED)

    async def finish(self, reason: str, *, close_code: int | None = None, exit_code: int | None = None,
                     end: str | None = None) -> None:
        """End the session once: free the backend's side, record it, close the websocket with ``close_code``."""
        if self.finished or self.target is None:
            return
        self.finished = True
        current = asyncio.current_task()
        for task in self.tasks:
            if task is not current:
                task.cancel()
        with contextlib.suppress(Exception):
            await self.stop()
        if not self.carried():  # a spare never used: no session took place
            with contextlib.suppress(Exception):
                await database_sync_to_async(session_discard)(self.target.session_pk)
            if close_code is not None:
                with contextlib.suppress(Exception):
                    await self.close(code=close_code, reason=reason[:120])
            return
        seconds = time.monotonic() - getattr(self, "started", time.monotonic())
        try:
            await database_sync_to_async(session_finish)(self.target.session_pk, reason=reason, bytes_in=self.bytes_in,
                                                         bytes_out=self.bytes_out, exit_code=exit_code)
        except Exception:  # the record must not keep the websocket open
            logger.exception("could not record the end of session %s", self.target.session_pk)
        metrics.task_session_observe(self.kind, end or CLOSE_CODES.get(close_code or CLOSE_NORMAL, "closed"),
                                     bytes_in=self.bytes_in, bytes_out=self.bytes_out, seconds=seconds,
                                     browser=self.target.browser)
        if close_code is not None:
            with contextlib.suppress(Exception):
                await self.close(code=close_code, reason=reason[:120])

    async def disconnect(self, code: int) -> None:
        await self.finish(f"the client closed ({code})", end="closed")


class ExecConsumer(SessionConsumer):
    """``osmo workflow exec``: a command in the task, its streams as ``v5.channel.k8s.io`` frames."""

    kind = "exec"

    async def start(self) -> None:
        assert self.target is not None
        target = self.target
        backend: Any = await database_sync_to_async(backend_by_name)(target.backend_name, target.backend)
        self.process: TaskExec = await asyncio.to_thread(backend.exec_start, namespace=target.namespace,
                                                         pod_name=target.pod_name, argv=list(target.command),
                                                         tty=target.tty)

    async def pump(self) -> None:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[int, bytes]] = asyncio.Queue()
        process = self.process

        def read() -> None:  # one thread per session: reads block
            while True:
                try:
                    channel, data = process.read()
                except Exception:
                    channel, data = 0, b""
                loop.call_soon_threadsafe(queue.put_nowait, (channel, data))
                if not data:
                    return

        threading.Thread(target=read, name="session-exec-read", daemon=True).start()
        while True:
            channel, data = await queue.get()
            if not data:
                break
            self.bytes_out += len(data)
            self.touch()
            await self.send(bytes_data=bytes([channel]) + data)
        code = None
        while code is None and not self.finished:  # its outputs ended: it is ending
            code = await asyncio.to_thread(process.wait, 1.0)
        if code is None:
            return
        status: dict[str, Any] = {"metadata": {}, "status": "Success"} if code == 0 else {
            "metadata": {}, "status": "Failure", "reason": "NonZeroExitCode", "message": f"exit code {code}",
            "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]}}
        await self.send(bytes_data=bytes([STATUS]) + json.dumps(status).encode())
        await self.finish(f"the command exited with code {code}", close_code=CLOSE_NORMAL, exit_code=code,
                          end="exited")

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if not bytes_data or self.finished:
            return
        channel, data = bytes_data[0], bytes_data[1:]
        self.touch()
        try:
            if channel == STDIN and data:
                self.bytes_in += len(data)
                await asyncio.to_thread(self.process.write, data)
            elif channel == RESIZE:
                size = json.loads(data)
                width, height = int(size.get("Width", 0)), int(size.get("Height", 0))
                if 0 < width < 10000 and 0 < height < 10000:
                    await asyncio.to_thread(self.process.resize, width, height)
            elif channel == CLOSE_STDIN:
                await asyncio.to_thread(self.process.close_stdin)
        except (OSError, ValueError, TypeError, AttributeError):
            return  # the command closed its input, or a frame the protocol does not have: nothing to do

    async def stop(self) -> None:
        process = getattr(self, "process", None)
        if process is not None:
            await asyncio.to_thread(process.close)


class PortForwardConsumer(SessionConsumer):
    """``osmo workflow port-forward``: one TCP connection to the task's port, its bytes as binary messages.
    With ``?connect=deferred`` the connection is made on the client's ``connect`` message (module doc)."""

    kind = "port-forward"

    def claim(self) -> SessionTarget:
        query = parse_qs((self.scope.get("query_string") or b"").decode("latin1"))
        self.deferred = query.get("connect") == ["deferred"]
        self.connected = asyncio.Event()
        return _claim(self.scope, self.scope["url_route"]["kwargs"].get("ticket", ""), self.kind,
                      deferred=self.deferred)

    async def start(self) -> None:
        assert self.target is not None
        self.backend: Any = await database_sync_to_async(backend_by_name)(self.target.backend_name,
                                                                          self.target.backend)
        self.recorded: asyncio.Task[None] | None = None
        if not self.deferred:
            await self.open_port()
            self.connected.set()

    async def open_port(self) -> None:
        assert self.target is not None and self.target.port is not None
        target = self.target
        sock = await asyncio.to_thread(self.backend.port_connect, namespace=target.namespace,
                                       pod_name=target.pod_name, port=target.port)
        sock.setblocking(False)
        self.reader, self.writer = await asyncio.open_connection(sock=sock)

    def carried(self) -> bool:
        return self.connected.is_set()

    async def connect_deferred(self) -> bool:
        """A spare's connection to the task's port (every check of ``port_connect`` made now), then the
        session starts; False when the session ended instead."""
        assert self.target is not None
        try:
            await self.open_port()
        except DispatchPermanentError as exc:
            await self.finish(f"refused: {exc}", close_code=CLOSE_PORT_REFUSED)
            return False
        except Exception as exc:  # the backend failed (unreachable, a transient error)
            await self.finish(f"refused: {exc}", close_code=CLOSE_BACKEND_ERROR)
            return False
        self.started = self.last_activity = time.monotonic()
        self.connected.set()
        await self.send(text_data=CONNECTED)
        # the start's record after the answer, not before it (:meth:`finish` waits for it)
        self.recorded = asyncio.create_task(database_sync_to_async(session_connected)(self.target.session_pk,
                                                                                      now=timezone.now()))
        return True

    async def pump(self) -> None:
        await self.connected.wait()
        while True:
            try:
                data = await self.reader.read(65536)
            except OSError:
                data = b""
            if not data:
                break
            self.bytes_out += len(data)
            self.touch()
            await self.send(bytes_data=data)
        await self.finish("the task closed the connection", close_code=CLOSE_NORMAL, end="closed")

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if self.finished:
            return
        if not self.connected.is_set():  # a spare: ``connect`` (or its first bytes) makes its connection
            if (text_data != CONNECT and not bytes_data) or not await self.connect_deferred():
                return
        if not bytes_data:
            return
        self.bytes_in += len(bytes_data)
        self.touch()
        try:
            self.writer.write(bytes_data)
            await self.writer.drain()
        except OSError:
            await self.finish("the task's connection failed", close_code=CLOSE_NORMAL, end="closed")

    async def stop(self) -> None:
        writer = getattr(self, "writer", None)
        if writer is not None:
            writer.close()
        recorded = getattr(self, "recorded", None)
        if recorded is not None:
            await recorded


class _Datagrams(asyncio.DatagramProtocol):
    """The task's datagrams, queued for the websocket (None once the socket failed or closed)."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[bytes | None] = asyncio.Queue()

    def datagram_received(self, data: bytes, addr: Any) -> None:
        self.queue.put_nowait(data)

    def error_received(self, exc: Exception) -> None:  # (ICMP port unreachable: nothing listens there now)
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self.queue.put_nowait(None)


class UdpForwardConsumer(SessionConsumer):
    """``osmo workflow port-forward --udp``: datagrams to and from a UDP port the task is bound to, one binary
    message per datagram (one websocket per local peer: the CLI keeps its peers apart)."""

    kind = "port-forward-udp"

    async def start(self) -> None:
        assert self.target is not None and self.target.port is not None
        target = self.target
        backend: Any = await database_sync_to_async(backend_by_name)(target.backend_name, target.backend)
        udp_connect = getattr(backend, "udp_connect", None)
        if udp_connect is None:
            raise DispatchPermanentError(f"the {target.backend} backend forwards TCP only")
        sock = await asyncio.to_thread(udp_connect, namespace=target.namespace, pod_name=target.pod_name,
                                       port=target.port)
        sock.setblocking(False)
        loop = asyncio.get_running_loop()
        self.transport, self.datagrams = await loop.create_datagram_endpoint(_Datagrams, sock=sock)

    async def pump(self) -> None:
        while (data := await self.datagrams.queue.get()) is not None:
            self.bytes_out += len(data)
            self.touch()
            await self.send(bytes_data=data)
        await self.finish("the task's socket closed", close_code=CLOSE_NORMAL, end="closed")

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if bytes_data is None or self.finished:
            return
        self.bytes_in += len(bytes_data)
        self.touch()
        self.transport.sendto(bytes_data)

    async def stop(self) -> None:
        transport = getattr(self, "transport", None)
        if transport is not None:
            transport.close()


class UnknownSessionConsumer(AsyncWebsocketConsumer):
    """Any other websocket path: the API's 404 envelope."""

    async def connect(self) -> None:
        message = "No such websocket: sessions are /ws/sessions/exec/<ticket>/ and /ws/sessions/port-forward/<ticket>/."
        await SessionConsumer.refuse(self, 404, "not_found", message, {})
        raise StopConsumer()
