"""A tiny stand-in for the Kubernetes API server, played over real HTTP on 127.0.0.1.

It answers scripted responses (mostly recorded API bodies from ``tests/fixtures/k8s_pods``) in order,
per method and path, and records every request it receives, so tests can assert exactly what the
official client sent. Nothing inside the kubernetes client is mocked.

The ``pods/exec`` and ``pods/portforward`` paths also take a websocket upgrade (:meth:`FakeKubeApi.websocket`):
a minimal RFC 6455 server side (the handshake's ``Sec-WebSocket-Accept``, the subprotocol the API server
would pick among those offered, masked client frames, unmasked binary server frames) hands the open
connection to the test's script, which plays the API server's side frame by frame.
"""

from __future__ import annotations

import base64
import hashlib
import json
import socket
import struct
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "k8s_pods"


def fixture(name: str) -> Any:
    """A recorded API response body (JSON) from tests/fixtures/k8s_pods."""
    return json.loads((FIXTURES / name).read_text())


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, list[str]]
    body: Any
    headers: dict[str, str]


@dataclass
class Scripted:
    status: int
    body: Any
    delay: float = 0.0
    content_type: str = "application/json"


WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"  # RFC 6455 §1.3
OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0x2, 0x8, 0x9, 0xA
EXEC_PROTOCOLS = ("v5.channel.k8s.io", "v4.channel.k8s.io")  # what kube-apiserver >= 1.30 accepts for exec
PORTFORWARD_PROTOCOLS = ("v4.channel.k8s.io",)  # port-forward's websocket: v4 framing only


class FakeWebSocket:
    """The server's end of one websocket, for a test's script: ``send`` binary messages (channel first),
    ``recv`` the client's (each must be masked), ``close``. Everything received is kept in ``received``."""

    def __init__(self, connection: socket.socket, rfile: Any, protocol: str) -> None:
        self.connection = connection
        self.rfile = rfile
        self.protocol = protocol
        self.received: list[bytes] = []
        self.client_closed = False

    def send(self, channel: int, data: bytes = b"") -> None:
        self.send_frame(OP_BINARY, bytes([channel]) + data)

    def send_frame(self, opcode: int, payload: bytes) -> None:
        head = bytes([0x80 | opcode])
        if len(payload) < 126:
            head += bytes([len(payload)])
        elif len(payload) < 1 << 16:
            head += bytes([126]) + struct.pack("!H", len(payload))
        else:
            head += bytes([127]) + struct.pack("!Q", len(payload))
        self.connection.sendall(head + payload)

    def _exactly(self, size: int) -> bytes:
        data = self.rfile.read(size)
        if len(data) != size:
            raise EOFError("the client closed the connection")
        return data

    def recv(self) -> bytes | None:
        """The next binary message's payload (channel byte first), or None once the client closed."""
        while True:
            first, second = self._exactly(2)
            opcode, masked, size = first & 0x0F, second & 0x80, second & 0x7F
            if not masked:
                raise AssertionError("RFC 6455 §5.1: a client frame must be masked")
            if size == 126:
                size = struct.unpack("!H", self._exactly(2))[0]
            elif size == 127:
                size = struct.unpack("!Q", self._exactly(8))[0]
            mask = self._exactly(4)
            payload = bytes(b ^ mask[i % 4] for i, b in enumerate(self._exactly(size)))
            if opcode == OP_CLOSE:
                self.client_closed = True
                return None
            if opcode == OP_PING:
                self.send_frame(OP_PONG, payload)
                continue
            if opcode != OP_BINARY or not first & 0x80:
                raise AssertionError(f"expected one binary frame, got opcode {opcode} fin {first >> 7}")
            self.received.append(payload)
            return payload

    def recv_until(self, last: bytes) -> list[bytes]:
        """Messages up to and including ``last`` (AssertionError when the client closes first)."""
        got = []
        while True:
            payload = self.recv()
            if payload is None:
                raise AssertionError(f"the client closed before sending {last!r}; got {got!r}")
            got.append(payload)
            if payload == last:
                return got

    def close(self) -> None:
        """A close frame (1000), then the client's answer (or the end of the connection)."""
        try:
            self.send_frame(OP_CLOSE, struct.pack("!H", 1000))
            while not self.client_closed and self.recv() is not None:
                pass
        except (EOFError, OSError):
            pass


@dataclass
class ScriptedSocket:
    protocols: tuple[str, ...]
    play: Callable[[FakeWebSocket], None]


@dataclass
class FakeKubeApi:
    requests: list[Recorded] = field(default_factory=list)
    unexpected: list[Recorded] = field(default_factory=list)
    sockets: list[FakeWebSocket] = field(default_factory=list)
    socket_errors: list[str] = field(default_factory=list)
    _script: dict[tuple[str, str], deque[Scripted]] = field(default_factory=lambda: defaultdict(deque))
    _ws_script: dict[str, deque[ScriptedSocket]] = field(default_factory=lambda: defaultdict(deque))
    _playing: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: ThreadingHTTPServer | None = None

    # -- scripting -------------------------------------------------------------------------------
    def reply(self, method: str, path: str, status: int, body: Any = None, *, delay: float = 0.0) -> None:
        """Queue one response for the next ``method path`` request; a ``str`` body names a fixture file."""
        if isinstance(body, str):
            body = fixture(body)
        with self._lock:
            self._script[(method, path)].append(Scripted(status, body, delay))

    def reply_text(self, method: str, path: str, status: int, name: str) -> None:
        """Queue a ``text/plain`` response (a pod log) with the contents of fixture file ``name``."""
        with self._lock:
            self._script[(method, path)].append(
                Scripted(status, (FIXTURES / name).read_text(), content_type="text/plain"))

    def websocket(self, path: str, play: Callable[[FakeWebSocket], None], *,
                  protocols: tuple[str, ...] = EXEC_PROTOCOLS) -> None:
        """Accept the next websocket upgrade of ``GET path`` with the first of ``protocols`` the client
        offers (in the client's order), then run ``play`` on the open connection; the server closes it
        after (an exception in ``play`` is kept in ``socket_errors``: the test fails)."""
        with self._lock:
            self._ws_script[path].append(ScriptedSocket(protocols, play))

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> FakeKubeApi:
        api = self

        class Handler(BaseHTTPRequestHandler):
            def _handle(self) -> None:
                api._serve(self)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

            def log_message(self, format, *args):  # noqa: A002 - keep test output quiet
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, name="fake-kube-api",
                         daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    # -- serving ---------------------------------------------------------------------------------
    def _serve(self, handler: BaseHTTPRequestHandler) -> None:
        parts = urlsplit(handler.path)
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        body = json.loads(raw) if raw else None
        recorded = Recorded(handler.command, parts.path, parse_qs(parts.query, keep_blank_values=True), body,
                            {key.lower(): value for key, value in handler.headers.items()})
        with self._lock:
            self.requests.append(recorded)
            sockets = self._ws_script.get(parts.path)
            upgrade = handler.headers.get("Upgrade", "").lower() == "websocket"
            play = sockets.popleft() if upgrade and handler.command == "GET" and sockets else None
        if play is not None:
            with self._lock:
                self._playing += 1  # before the 101: the client may be done with it before the script starts
            try:
                self._upgrade(handler, play)
            finally:
                with self._lock:
                    self._playing -= 1
            return
        with self._lock:
            queue = self._script.get((handler.command, parts.path))
            scripted = queue.popleft() if queue else None
            if scripted is None:
                self.unexpected.append(recorded)
        if scripted is None:
            scripted = Scripted(599, {"kind": "Status", "message": f"unscripted {handler.command} {parts.path}"})
        if scripted.delay:
            time.sleep(scripted.delay)
        if scripted.content_type == "text/plain":
            payload = str(scripted.body).encode()
        else:
            payload = json.dumps(scripted.body).encode() if scripted.body is not None else b""
        try:
            handler.send_response(scripted.status)
            handler.send_header("Content-Type", scripted.content_type)
            handler.send_header("Content-Length", str(len(payload)))
            handler.end_headers()
            handler.wfile.write(payload)
        except OSError:  # the client gave up (timeout test)
            pass

    def _upgrade(self, handler: BaseHTTPRequestHandler, scripted: ScriptedSocket) -> None:
        """RFC 6455 §4.2.2: 101 with the key's accept value and the chosen subprotocol, then the script."""
        offered = [p.strip() for p in handler.headers.get("Sec-WebSocket-Protocol", "").split(",") if p.strip()]
        chosen = next((p for p in offered if p in scripted.protocols), None)
        key = handler.headers.get("Sec-WebSocket-Key", "")
        if chosen is None or not key:
            self.socket_errors.append(f"no protocol of {scripted.protocols} among {offered}, or no key")
            handler.send_error(400)
            return
        accept = base64.b64encode(hashlib.sha1((key + WS_GUID).encode()).digest()).decode()
        handler.wfile.write((f"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                             f"Sec-WebSocket-Accept: {accept}\r\nSec-WebSocket-Protocol: {chosen}\r\n\r\n"
                             ).encode())
        handler.wfile.flush()
        handler.connection.settimeout(5)
        ws = FakeWebSocket(handler.connection, handler.rfile, chosen)
        with self._lock:
            self.sockets.append(ws)
        try:
            scripted.play(ws)
            ws.close()
        except Exception as exc:  # noqa: BLE001 - reported to the test through socket_errors
            self.socket_errors.append(f"{type(exc).__name__}: {exc}")
        handler.close_connection = True

    def settle(self, timeout: float = 5.0) -> None:
        """Wait until every websocket script has played to its end."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if not self._playing:
                    return
            time.sleep(0.01)
        self.socket_errors.append(f"a websocket script still played after {timeout} s")

    def pending(self) -> list[tuple[str, str]]:
        """Scripted responses nobody asked for."""
        with self._lock:
            return ([key for key, queue in self._script.items() for _ in queue]
                    + [("WEBSOCKET", path) for path, queue in self._ws_script.items() for _ in queue])
