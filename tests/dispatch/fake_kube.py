"""A tiny stand-in for the Kubernetes API server, played over real HTTP on 127.0.0.1.

It answers scripted responses (mostly recorded API bodies from ``tests/fixtures/k8s_pods``) in order,
per method and path, and records every request it receives, so tests can assert exactly what the
official client sent. Nothing inside the kubernetes client is mocked.
"""

from __future__ import annotations

import json
import threading
import time
from collections import defaultdict, deque
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


@dataclass
class FakeKubeApi:
    requests: list[Recorded] = field(default_factory=list)
    unexpected: list[Recorded] = field(default_factory=list)
    _script: dict[tuple[str, str], deque[Scripted]] = field(default_factory=lambda: defaultdict(deque))
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

    def pending(self) -> list[tuple[str, str]]:
        """Scripted responses nobody asked for."""
        with self._lock:
            return [key for key, queue in self._script.items() for _ in queue]
