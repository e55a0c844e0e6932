"""Port-forward's spare sessions: per forwarded task port, a few sessions opened ahead (their tickets fetched,
their websockets open, deferred: the service connects to the task's port only on the spare's ``connect``
message), so a new local connection skips both round trips; each is replaced when taken or when it ends
unused.
"""

from __future__ import annotations

import contextlib
import select
import threading

import websocket

from cli.api import Api
from cli.errors import CliError
from cli.sessions.opening import session_open

SPARES_MAX = 16  # port-forward: spare sessions are held ready for the first this many task ports,
SPARES_PER_PORT = 4  # this many each, so a burst of connections (a page and its assets) finds them ready
CONNECT, CONNECTED = "connect", "connected"  # a spare's control messages (docs/api.md)
SPARE_RETRY_SECONDS = (0.5, 30.0)  # a spare that cannot be opened is tried again after 0.5 s, doubling to 30 s


class Spare:
    """One port-forward session per forwarded port held ready ahead of the next local connection: its
    ticket fetched and its websocket open, deferred (the service holds no connection to the task until it
    is used). Taken by a connection and replaced at once; replaced too when it ends unused (the service's
    idle timeout, the task's end, a restart: anything that arrives on an unused spare means it ended)."""

    def __init__(self, api: Api, workflow_id: str, task: str, remote: int, connect_timeout: float) -> None:
        self.api, self.workflow_id, self.task, self.remote = api, workflow_id, task, remote
        self.connect_timeout = connect_timeout
        self.lock = threading.Lock()
        self.ready: websocket.WebSocket | None = None
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self.keep, name="forward-spare", daemon=True)

    def start(self) -> Spare:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stopped.set()
        ws = self.take()
        if ws is not None:
            with contextlib.suppress(Exception):
                ws.close(timeout=1)

    def take(self) -> websocket.WebSocket | None:
        """The spare, now the caller's (None when none is ready: open a session as usual)."""
        with self.lock:
            ws, self.ready = self.ready, None
        return ws

    def keep(self) -> None:
        retry = SPARE_RETRY_SECONDS[0]
        while not self.stopped.is_set():
            with self.lock:
                ws = self.ready
            if ws is None:
                try:
                    ws = session_open(self.api, self.workflow_id, self.task,
                                      {"kind": "port-forward", "port": self.remote},
                                      connect_timeout=self.connect_timeout, deferred=True)
                except CliError:  # (each connection then opens its own session, and says why it cannot)
                    self.stopped.wait(retry)
                    retry = min(retry * 2, SPARE_RETRY_SECONDS[1])
                    continue
                retry = SPARE_RETRY_SECONDS[0]
                with self.lock:
                    if not self.stopped.is_set():
                        self.ready, ws = ws, None
                if ws is not None:
                    ws.close(timeout=1)
                continue
            try:
                arrived = bool(select.select([ws.sock], [], [], 0.5)[0])
            except (OSError, ValueError, TypeError):
                arrived = True
            if arrived:
                with self.lock:
                    if self.ready is not ws:  # taken meanwhile: its bytes are the connection's
                        continue
                    if _control_only(ws):  # the service's ping (answered): still a spare
                        continue
                    self.ready = None
                with contextlib.suppress(Exception):
                    ws.close(timeout=1)


class Spares:
    """The spares of one task port (:data:`SPARES_PER_PORT` of them, each kept by its own :class:`Spare`):
    a connection takes whichever is ready."""

    def __init__(self, spares: list[Spare]) -> None:
        self.spares = spares

    def start(self) -> Spares:
        for spare in self.spares:
            spare.start()
        return self

    def stop(self) -> None:
        for spare in self.spares:
            spare.stop()

    def take(self) -> websocket.WebSocket | None:
        """A ready spare, now the caller's (None when none is ready)."""
        for spare in self.spares:
            ws = spare.take()
            if ws is not None:
                return ws
        return None


def _control_only(ws: websocket.WebSocket) -> bool:
    """Read what arrived on an unused spare: True for a ping or pong (answered), False when it ended."""
    try:
        ws.settimeout(5)
        opcode, _frame = ws.recv_data_frame(True)
    except (OSError, websocket.WebSocketException):
        return False
    return opcode in (websocket.ABNF.OPCODE_PING, websocket.ABNF.OPCODE_PONG)


def spare_connect(ws: websocket.WebSocket) -> bool:
    """Use a spare: ``connect``, then its answer. False when the spare had ended (the caller opens a
    session anew: nothing of the local connection was sent yet)."""
    try:
        ws.settimeout(30)
        ws.send(CONNECT)
        opcode, frame = ws.recv_data_frame(True)
        while opcode in (websocket.ABNF.OPCODE_PING, websocket.ABNF.OPCODE_PONG):
            opcode, frame = ws.recv_data_frame(True)
    except (OSError, websocket.WebSocketException):
        opcode, frame = websocket.ABNF.OPCODE_CLOSE, None
    if opcode == websocket.ABNF.OPCODE_TEXT and frame is not None and frame.data == CONNECTED.encode():
        return True
    with contextlib.suppress(Exception):
        ws.close(timeout=1)
    return False

