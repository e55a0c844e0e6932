"""``osmo workflow port-forward`` over time and under load: a connection left idle across many of the
service's pings still carries its request, and 64 connections at once through one forward all get their
answer (docs/cli.md, "osmo workflow port-forward")."""

from __future__ import annotations

import socket
import subprocess
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.sessions.conftest import OSMO, ROOT, _free_port, cli_env, running, wait_listening
from workflows.models import TaskSession

pytestmark = pytest.mark.django_db(transaction=True)

SERVE = ["sh", "-c", "cd /tmp && echo served > index.html && exec python3 -m http.server 8765 --bind 127.0.0.1"]


def _forward(server, user, workflow, local: int, env: dict[str, str] | None = None) -> subprocess.Popen:
    forward = subprocess.Popen([*OSMO, "workflow", "port-forward", workflow.workflow_id, "main", "--port",
                                f"{local}:8765", "--host", "127.0.0.1"],
                               env={**cli_env(server.url, user), **(env or {})}, cwd=ROOT, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    assert "Forwarding" in forward.stdout.readline()
    return forward


def test_an_idle_connection_outlives_many_pings_and_still_carries_its_request(user, local_pool, asgi_server):
    # given a service that pings every websocket every 0.3 s and drops one unanswered for 0.3 s (uvicorn's
    # settings, shortened), and a forward whose own pings are shortened too
    server = asgi_server(env={"UVICORN_WS_PING_INTERVAL": "0.3", "UVICORN_WS_PING_TIMEOUT": "0.3"})
    workflow = running(user, local_pool, tasks={"main": SERVE})
    wait_listening(workflow, "main", 8765)
    local = _free_port()
    forward = _forward(server, user, workflow, local, env={"OSMO_FORWARD_PING_SECONDS": "0.2"})
    try:
        # when a connection opens and says nothing for 4 s (over ten ping intervals)
        with socket.create_connection(("127.0.0.1", local), timeout=20) as sock:
            deadline = time.monotonic() + 10
            while not TaskSession.objects.filter(workflow=workflow, started_at__isnull=False).exists():
                assert time.monotonic() < deadline, "the forward opened no session"
                time.sleep(0.05)
            time.sleep(4)
            session = TaskSession.objects.get(workflow=workflow, started_at__isnull=False)
            assert session.ended_at is None

            # then it still carries a request and its answer
            sock.sendall(b"GET /index.html HTTP/1.0\r\nHost: task\r\n\r\n")
            answer = b""
            while chunk := sock.recv(65536):
                answer += chunk
    finally:
        forward.terminate()
        forward.wait(10)
    assert answer.startswith(b"HTTP/1.0 200") and answer.endswith(b"served\n"), answer


def test_64_connections_at_once_through_one_forward(user, local_pool, asgi_server):
    server = asgi_server()
    workflow = running(user, local_pool, tasks={"main": SERVE})
    wait_listening(workflow, "main", 8765)
    local = _free_port()
    forward = _forward(server, user, workflow, local)

    def get(_: int) -> str:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{local}/index.html", timeout=60) as answer:
                return answer.read().decode()
        except OSError as exc:
            return f"error: {exc}"

    try:
        with ThreadPoolExecutor(64) as pool:
            answers = list(pool.map(get, range(64)))
    finally:
        forward.terminate()
        forward.wait(10)
    assert answers == ["served\n"] * 64, [a for a in answers if a != "served\n"][:3]
