"""The task page's "Open port": HTTP and websockets from the owner's browser to a port the task listens on,
under the service's own URL (docs/pages.md, "Open port").

``/workflows/<id>/tasks/<task>/ports/<port>/<path>`` reaches ``/<path>`` of the task's server (the prefix is
taken off and sent as ``X-Forwarded-Prefix``: apps with relative links, ``python3 -m http.server``, a Ray
dashboard, TensorBoard); ``/workflows/<id>/tasks/<task>/absolute-ports/<port>/<path>`` sends the whole path
(apps given that prefix as their base URL, such as JupyterLab's ``--ServerApp.base_url``).

Each request, and each websocket, is one port-forward session of the browser: the same checks as
``POST /api/workflows/{id}/tasks/{task}/sessions/`` (the owner only, a RUNNING task, a port the task itself
listens on) after the pool's ``browser_forwarding`` switch, the same backend call
(:meth:`scheduler.dispatch.base.SessionBackend.port_connect`) and the same record (events, metrics).
The browser is signed in with the pages' session cookie; that cookie and the CSRF cookie never reach the
task, and the task cannot set them. Refusals are the API's JSON envelope (a GET that is not signed in is
sent to the login page instead).

Mounted by ``osmo/asgi.py`` ahead of Django (HTTP) and beside the sessions' websockets, so that bodies
stream both ways instead of waiting in a Django response.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import h11
import websockets
from channels.db import database_sync_to_async
from django.conf import settings
from django.http import parse_cookie
from django.shortcuts import resolve_url
from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed

from osmo import metrics
from osmo.errors import OsmoError, ValidationFailedError
from scheduler.dispatch import DispatchPermanentError, DispatchTransientError
from workflows.errors import SessionForbiddenError
from workflows.selectors import workflow_by_id, workflow_visible_to
from workflows.sessions.consumers import CLOSE_NORMAL, NotAuthenticatedError, SessionConsumer
from workflows.sessions.service import (
    SessionSettings,
    SessionTarget,
    backend_by_name,
    browser_port_open,
    session_finish,
)

#: The route (a Channels ``re_path``, without the leading slash) of both forms.
PORT_ROUTE = (r"^workflows/(?P<workflow>[^/]+)/tasks/(?P<task>[^/]+)/(?P<mode>ports|absolute-ports)/"
              r"(?P<port>[0-9]{1,5})(?P<rest>/.*)?$")
#: Hop-by-hop headers (RFC 9110 §7.6.1) and what the proxy sets itself: never passed on either way.
HOP_BY_HOP = {b"connection", b"keep-alive", b"proxy-authenticate", b"proxy-authorization", b"proxy-connection",
              b"te", b"trailer", b"transfer-encoding", b"upgrade", b"x-forwarded-prefix"}
CHUNK = 65536
WEBSOCKET_MAX_MESSAGE = 64 << 20


def _prefix(kwargs: dict[str, str]) -> str:
    return f"/workflows/{kwargs['workflow']}/tasks/{kwargs['task']}/{kwargs['mode']}/{kwargs['port']}"


def _upstream_target(scope: dict[str, Any], kwargs: dict[str, str]) -> str:
    """The request target the task's server gets: the path after the prefix, or the whole path, as the browser
    wrote it (``raw_path``: an encoded slash, ``%2F``, stays one, as JupyterLab's file paths need)."""
    prefix = _prefix(kwargs)
    raw = (scope.get("raw_path") or b"").decode("latin1")
    if raw.startswith(prefix + "/"):
        target = raw if kwargs["mode"] == "absolute-ports" else raw[len(prefix):]
    else:  # (a server that does not give the raw path)
        path = kwargs.get("rest") or "/"
        target = quote(prefix + path if kwargs["mode"] == "absolute-ports" else path, safe="/:@!$&'()*+,;=-._~")
    query = scope.get("query_string") or b""
    return target + ("?" + query.decode("latin1") if query else "")


def _cookie_without_ours(value: bytes) -> bytes | None:
    """The browser's cookies less the service's own (its session and CSRF cookies): the task never sees them."""
    ours = {settings.SESSION_COOKIE_NAME, settings.CSRF_COOKIE_NAME}
    kept = [f"{name}={morsel}" for name, morsel in parse_cookie(value.decode("latin1")).items() if name not in ours]
    return "; ".join(kept).encode("latin1") if kept else None


def _sets_our_cookie(value: bytes) -> bool:
    cookie: SimpleCookie = SimpleCookie()
    with contextlib.suppress(Exception):
        cookie.load(value.decode("latin1"))
    return bool({settings.SESSION_COOKIE_NAME, settings.CSRF_COOKIE_NAME} & set(cookie))


def _forwarded(scope: dict[str, Any], kwargs: dict[str, str]) -> list[tuple[bytes, bytes]]:
    client = (scope.get("client") or ("", 0))[0] or ""
    host = dict(scope.get("headers") or []).get(b"host", b"")
    proto = "https" if scope.get("scheme") in ("https", "wss") else "http"
    return [(b"x-forwarded-for", client.encode()), (b"x-forwarded-proto", proto.encode()),
            (b"x-forwarded-host", host), (b"x-forwarded-prefix", _prefix(kwargs).encode())]


def _request_headers(scope: dict[str, Any], kwargs: dict[str, str], *, websocket: bool) -> list[tuple[bytes, bytes]]:
    """The browser's headers for the task's server: less hop-by-hop ones and our cookies, plus X-Forwarded-*."""
    headers: list[tuple[bytes, bytes]] = []
    chunked = False
    for name, value in scope.get("headers") or []:
        name = name.lower()
        if name == b"transfer-encoding" and b"chunked" in value.lower():
            chunked = True
        if name in HOP_BY_HOP or name.startswith(b"x-forwarded-") or name == b"forwarded":
            continue
        if websocket and (name.startswith(b"sec-websocket-") or name in (b"host", b"origin")):
            continue  # the websocket client writes its own handshake
        if name == b"cookie":
            kept = _cookie_without_ours(value)
            if kept is None:
                continue
            value = kept
        headers.append((name, value))
    if chunked:
        headers.append((b"transfer-encoding", b"chunked"))
    if not websocket:
        headers.append((b"connection", b"close"))  # one request per connection: one recorded session each
    return headers + _forwarded(scope, kwargs)


def _response_headers(headers: list[tuple[bytes, bytes]], kwargs: dict[str, str]) -> list[tuple[bytes, bytes]]:
    """The task's answer's headers for the browser: less hop-by-hop ones and cookies named as ours; a
    redirect to an absolute path stays under the prefix (prefix-stripping form)."""
    kept = []
    for name, value in headers:
        name = name.lower()
        if name in HOP_BY_HOP or (name == b"set-cookie" and _sets_our_cookie(value)):
            continue
        if name == b"location" and kwargs["mode"] == "ports" and value.startswith(b"/") \
                and not value.startswith(b"//"):
            value = _prefix(kwargs).encode() + value
        kept.append((name, value))
    return kept


def _cross_origin(scope: dict[str, Any]) -> bool:
    """A request another site's page made (its ``Origin`` is not this service's host): a websocket, or a
    request that changes something, is refused (the pages' cookie must not open the task's app for it)."""
    headers = dict(scope.get("headers") or [])
    origin = headers.get(b"origin")
    if origin is None or (scope["type"] == "http" and scope["method"] in ("GET", "HEAD", "OPTIONS")):
        return False
    host = headers.get(b"host", b"").decode("latin1").lower()
    return urlsplit(origin.decode("latin1")).netloc.lower() != host


def browser_port_target(user: Any, kwargs: dict[str, str], scope: dict[str, Any]) -> SessionTarget:
    """The started session of one proxied request or websocket (synchronous: the database); raises the
    API's errors: 401 not signed in, 404 a workflow the user may not see, 403 the pool's switch or not
    the owner, 409 a task not running or a port it does not listen on."""
    if user is None or not getattr(user, "is_authenticated", False):
        raise NotAuthenticatedError()
    if _cross_origin(scope):
        raise SessionForbiddenError("Another site's page cannot reach a task's port through the service.")
    port = int(kwargs["port"])
    if not 1 <= port <= 65535:
        raise ValidationFailedError([{"path": "port", "message": f"port must be a whole number from 1 to 65535, "
                                                                 f"not {port}."}])
    workflow = workflow_by_id(workflow_visible_to(user).select_related("pool"), kwargs["workflow"], viewer=user)
    return browser_port_open(workflow=workflow, user=user, task_name=kwargs["task"], port=port)


async def _connect(target: SessionTarget) -> Any:
    assert target.port is not None
    backend: Any = await database_sync_to_async(backend_by_name)(target.backend_name, target.backend)
    sock = await asyncio.to_thread(backend.port_connect, namespace=target.namespace, pod_name=target.pod_name,
                                   port=target.port)
    sock.setblocking(False)
    return sock


def _envelope(status: int, code: str, message: str, details: dict[str, Any] | None = None) -> bytes:
    return json.dumps({"code": code, "message": message, "details": details or {}}).encode()


class PortProxyHttp:
    """The HTTP half: an ASGI app (under Channels' cookie, session and auth middleware) that streams one
    request to the task's server and its answer back, over one new connection (parsed with h11)."""

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        kwargs = scope["url_route"]["kwargs"]
        user = scope.get("user")
        if not getattr(user, "is_authenticated", False) and scope["method"] in ("GET", "HEAD"):
            login = resolve_url(settings.LOGIN_URL)
            return await self._redirect(send, f"{login}?{urlencode({'next': self._full_path(scope)})}")
        if getattr(user, "is_authenticated", False) and not kwargs.get("rest"):
            # the bare prefix: with its slash, the task's relative links resolve under it
            query = scope.get("query_string") or b""
            return await self._redirect(send, _prefix(kwargs) + "/" + ("?" + query.decode("latin1") if query else ""))
        try:
            target = await database_sync_to_async(browser_port_target)(user, kwargs, scope)
        except OsmoError as exc:
            return await self._answer(send, exc.http_status, _envelope(exc.http_status, exc.code, exc.message,
                                                                       exc.details))
        config = SessionSettings.load()
        started = time.monotonic()
        state = {"in": 0, "out": 0, "started": 0, "ended": 0}  # bytes each way; the answer's start and end sent
        reason, end, refusal = "the request was answered", "closed", None
        try:
            await asyncio.wait_for(self._proxy(scope, receive, send, kwargs, target, config, state),
                                   timeout=config.max_seconds)
        except TimeoutError:
            reason, end = f"open for its maximum of {config.max_seconds} s", "max_length"
            refusal = (504, "gateway_timeout", f"The task's server on port {target.port} did not finish its answer "
                                               f"within OSMO_SESSION_MAX_SECONDS ({config.max_seconds} s).")
        except _Idle:
            reason, end = f"idle for {config.idle_seconds} s", "idle"
            refusal = (504, "gateway_timeout", f"The task's server on port {target.port} sent nothing for "
                                               f"OSMO_SESSION_IDLE_SECONDS ({config.idle_seconds} s).")
        except _ClientGone:
            reason = "the browser closed the connection"
        except DispatchTransientError as exc:
            reason, end = f"refused: {exc}", "error"
            refusal = (503, "backend_unavailable", str(exc))
        except (DispatchPermanentError, OSError, h11.ProtocolError) as exc:
            reason, end = f"the task's server failed: {exc}", "error"
            refusal = (502, "bad_gateway", f"The task's server on port {target.port} did not answer: {exc}")
        finally:
            await database_sync_to_async(session_finish)(target.session_pk, reason=reason, bytes_in=state["in"],
                                                         bytes_out=state["out"])
            metrics.task_session_observe("port-forward", end, bytes_in=state["in"], bytes_out=state["out"],
                                         seconds=time.monotonic() - started, browser=True)
        with contextlib.suppress(Exception):  # (the browser may be gone: nothing to tell it then)
            if not state["started"] and refusal is not None:
                await self._answer(send, refusal[0], _envelope(*refusal))
            elif state["started"] and not state["ended"]:  # the answer was under way: it ends here, cut short
                await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _proxy(self, scope: dict[str, Any], receive: Any, send: Any, kwargs: dict[str, str],
                     target: SessionTarget, config: SessionSettings, state: dict[str, int]) -> None:
        """Carry the request and its answer, counting in ``state`` (bytes each way, the answer started, ended)."""
        reader, writer = await asyncio.open_connection(sock=await _connect(target))
        try:
            connection = h11.Connection(h11.CLIENT)
            writer.write(connection.send(h11.Request(method=scope["method"], target=_upstream_target(scope, kwargs),
                                                     headers=_request_headers(scope, kwargs, websocket=False))))
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    raise _ClientGone()
                body = message.get("body") or b""
                if body:
                    state["in"] += len(body)
                    writer.write(connection.send(h11.Data(data=body)))
                    await writer.drain()
                if not message.get("more_body"):
                    break
            writer.write(connection.send(h11.EndOfMessage()))
            await writer.drain()
            while True:
                event = connection.next_event()
                if event is h11.NEED_DATA:
                    try:
                        data = await asyncio.wait_for(reader.read(CHUNK), timeout=config.idle_seconds)
                    except TimeoutError:
                        raise _Idle() from None
                    connection.receive_data(data)
                elif isinstance(event, h11.Response):
                    await send({"type": "http.response.start", "status": event.status_code,
                                "headers": _response_headers(list(event.headers), kwargs)})
                    state["started"] = 1
                elif isinstance(event, h11.Data):
                    state["out"] += len(event.data)
                    await send({"type": "http.response.body", "body": bytes(event.data), "more_body": True})
                elif isinstance(event, (h11.EndOfMessage, h11.ConnectionClosed)):
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
                    state["ended"] = 1
                    return
                # (an informational 1xx answer: the final one follows)
        except (ConnectionError, h11.ProtocolError) as exc:
            if state["started"]:  # the answer was under way: it ends here, cut
                raise _ClientGone() from exc
            raise
        finally:
            writer.close()

    @staticmethod
    def _full_path(scope: dict[str, Any]) -> str:
        query = scope.get("query_string") or b""
        return scope["path"] + ("?" + query.decode("latin1") if query else "")

    @staticmethod
    async def _redirect(send: Any, location: str) -> None:
        await send({"type": "http.response.start", "status": 302,
                    "headers": [(b"location", location.encode("latin1", "replace")), (b"content-length", b"0")]})
        await send({"type": "http.response.body", "body": b""})

    @staticmethod
    async def _answer(send: Any, status: int, body: bytes) -> None:
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})


class _Idle(Exception):
    pass


class _ClientGone(Exception):
    pass


class PortProxyWebsocket(SessionConsumer):
    """The websocket half: the browser's websocket, opened as one to the task's server (the ``websockets``
    client over the backend's connection), its messages carried both ways. A session like the CLI's:
    idle timeout, maximum length, the task's end, the record."""

    kind = "port-forward"

    def claim(self) -> SessionTarget:
        return browser_port_target(self.scope.get("user"), self.scope["url_route"]["kwargs"], self.scope)

    def subprotocol(self) -> str | None:
        return self.upstream.subprotocol

    async def start(self) -> None:
        assert self.target is not None
        kwargs = self.scope["url_route"]["kwargs"]
        headers = dict(self.scope.get("headers") or [])
        host = headers.get(b"host", b"localhost").decode("latin1")
        origin = headers.get(b"origin")
        try:
            self.upstream: ClientConnection = await websockets.connect(
                f"ws://{host}{_upstream_target(self.scope, kwargs)}", sock=await _connect(self.target), proxy=None,
                origin=origin.decode("latin1") if origin else None,
                subprotocols=self.scope.get("subprotocols") or None,
                additional_headers=[(name.decode("latin1"), value.decode("latin1"))
                                    for name, value in _request_headers(self.scope, kwargs, websocket=True)],
                compression=None, max_size=WEBSOCKET_MAX_MESSAGE, open_timeout=10, user_agent_header=None,
                ping_interval=None)  # (a proxy adds no pings of its own: the session's idle timeout governs)
        except (OSError, TimeoutError, websockets.InvalidHandshake) as exc:
            raise DispatchPermanentError(f"the task's server on port {self.target.port} refused the websocket: "
                                         f"{exc}") from exc

    async def pump(self) -> None:
        try:
            async for message in self.upstream:
                self.touch()
                if isinstance(message, bytes):
                    self.bytes_out += len(message)
                    await self.send(bytes_data=message)
                else:
                    self.bytes_out += len(message.encode())
                    await self.send(text_data=message)
        except ConnectionClosed:
            pass
        code = self.upstream.close_code or CLOSE_NORMAL
        await self.finish("the task's server closed the websocket", close_code=code if code >= 3000 or code == 1000
                          else CLOSE_NORMAL, end="closed")

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if self.finished:
            return
        self.touch()
        try:
            if bytes_data is not None:
                self.bytes_in += len(bytes_data)
                await self.upstream.send(bytes_data)
            elif text_data is not None:
                self.bytes_in += len(text_data.encode())
                await self.upstream.send(text_data)
        except ConnectionClosed:
            await self.finish("the task's server closed the websocket", close_code=CLOSE_NORMAL, end="closed")

    async def stop(self) -> None:
        upstream = getattr(self, "upstream", None)
        if upstream is not None:
            await upstream.close()
