"""``osmo workflow port-forward``'s spare session: one session per forwarded port opened ahead of the next
local connection, deferred (``?connect=deferred``: the service connects to the task's port only on its
``connect`` message), replaced when used or when it ends unused, and never recorded unless it carried a
connection (docs/api.md, "Sessions into running tasks")."""

from __future__ import annotations

import socket
import subprocess
import time

import pytest
import websocket
from django.utils import timezone
from rest_framework.test import APIClient

from tests.factories import make_api_key
from tests.sessions.conftest import OSMO, ROOT, _free_port, cli_env, running, wait_listening
from workflows.models import TaskSession

pytestmark = pytest.mark.django_db(transaction=True)

# A server that accepts ONE connection, answers it with "first" and exits: a connection made ahead of use
# (by a spare that connected eagerly) would take its only answer.
SINGLE = ["python3", "-c", "import socket\n"
          "s = socket.create_server(('127.0.0.1', 8765))\n"
          "c, _ = s.accept()\n"
          "c.recv(16)\n"
          "c.sendall(b'first')\n"
          "c.close()\n"]
ECHO = ["python3", "-c", "import socketserver\n"
        "class H(socketserver.BaseRequestHandler):\n"
        "    def handle(self):\n"
        "        while data := self.request.recv(65536):\n"
        "            self.request.sendall(data)\n"
        "socketserver.ThreadingTCPServer(('127.0.0.1', 8765), H).serve_forever()\n"]


def _spares(workflow):
    """Sessions claimed as spares and not used: their ticket spent (expiry at the claim), not started."""
    return TaskSession.objects.filter(workflow=workflow, started_at__isnull=True, ended_at__isnull=True,
                                      ticket_expires_at__lte=timezone.now())


def _wait(condition, seconds: float = 20, what: str = "") -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def _deferred(server, user, workflow) -> websocket.WebSocket:
    client = APIClient()
    client.force_authenticate(user)
    answer = client.post(f"/api/workflows/{workflow.workflow_id}/tasks/main/sessions/",
                         {"kind": "port-forward", "port": 8765}, format="json")
    assert answer.status_code == 201, answer.content
    return websocket.create_connection(server.url.replace("http://", "ws://") + answer.json()["websocket"]
                                       + "?connect=deferred", header=[f"Authorization: Token {make_api_key(user)}"],
                                       timeout=20)


def test_a_deferred_session_connects_to_the_task_only_on_connect_and_is_then_recorded(user, local_pool,
                                                                                       asgi_server):
    # given a task whose server answers one connection only, and two deferred sessions held open a while
    server = asgi_server()
    workflow = running(user, local_pool, tasks={"main": SINGLE})
    wait_listening(workflow, "main", 8765)
    unused, used = _deferred(server, user, workflow), _deferred(server, user, workflow)
    try:
        time.sleep(1.5)
        assert _spares(workflow).count() == 2
        assert not TaskSession.objects.filter(workflow=workflow, started_at__isnull=False).exists()

        # when the second says connect, then sends its bytes
        used.send("connect")
        opcode, frame = used.recv_data_frame(True)
        assert (opcode, frame.data) == (websocket.ABNF.OPCODE_TEXT, b"connected")
        used.send_binary(b"hello")
        opcode, frame = used.recv_data_frame(True)
    finally:
        used.close()
        unused.close()

    # then the server's one answer came through it (the first had taken no connection), and only the
    # session that carried a connection is recorded, from its connection on
    assert frame.data == b"first"
    _wait(lambda: not TaskSession.objects.filter(workflow=workflow, ended_at__isnull=True).exists())
    session = TaskSession.objects.get(workflow=workflow)
    assert session.started_at is not None and session.bytes_in == 5 and session.bytes_out == 5


def test_a_deferred_session_closed_unused_leaves_no_record(user, local_pool, asgi_server):
    server = asgi_server()
    workflow = running(user, local_pool, tasks={"main": ECHO})
    wait_listening(workflow, "main", 8765)
    ws = _deferred(server, user, workflow)
    _wait(lambda: _spares(workflow).exists(), what="the spare was not claimed")
    pk = _spares(workflow).get().pk

    ws.close()

    _wait(lambda: not TaskSession.objects.filter(pk=pk).exists(), what="the unused spare was kept")
    client = APIClient()
    client.force_authenticate(user)
    events = client.get(f"/api/workflows/{workflow.workflow_id}/events/").content.decode()
    assert "port-forward to port 8765" not in events


def _forward(server, workflow, user, local: int) -> subprocess.Popen:
    """``osmo workflow port-forward`` of the task main's port 8765 to ``local``, running."""
    return subprocess.Popen([*OSMO, "workflow", "port-forward", workflow.workflow_id, "main", "--port",
                             f"{local}:8765", "--host", "127.0.0.1"], env=cli_env(server.url, user), cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_the_cli_keeps_a_spare_that_takes_nothing_from_a_single_connection_server(user, local_pool, asgi_server):
    # given a forward to a server that answers one connection only, left alone once its spare is open
    server = asgi_server()
    workflow = running(user, local_pool, tasks={"main": SINGLE})
    wait_listening(workflow, "main", 8765)
    local = _free_port()
    forward = _forward(server, workflow, user, local)
    try:
        assert "Forwarding" in forward.stdout.readline()
        _wait(lambda: _spares(workflow).exists(), what="the forward opened no spare")
        time.sleep(1)

        # when a local connection comes
        with socket.create_connection(("127.0.0.1", local), timeout=20) as sock:
            sock.sendall(b"hello")
            answer = sock.recv(16)

        # then it gets the server's one answer, over the spare (the task then ends: no spare can replace it)
        assert answer == b"first"
    finally:
        forward.terminate()
        forward.wait(10)
    _wait(lambda: not _spares(workflow).exists(), what="the unused spare outlived the forward")
    assert TaskSession.objects.filter(workflow=workflow, started_at__isnull=False).count() == 1


def test_a_spare_closed_by_the_idle_timeout_is_replaced_transparently(user, local_pool, asgi_server):
    # given a service that ends sessions idle for 1 s, and a forward whose spare is open
    server = asgi_server(env={"OSMO_SESSION_IDLE_SECONDS": "1"})
    workflow = running(user, local_pool, tasks={"main": ECHO})
    wait_listening(workflow, "main", 8765)
    local = _free_port()
    forward = _forward(server, workflow, user, local)
    try:
        assert "Forwarding" in forward.stdout.readline()
        _wait(lambda: _spares(workflow).exists(), what="the forward opened no spare")
        first = _spares(workflow).order_by("pk").first().pk  # (one of the port's spares)

        # when the service ends that spare for idleness (and, 1 s later, its replacement too)
        _wait(lambda: not TaskSession.objects.filter(pk=first).exists(), what="the idle spare was not ended")

        # then connections made at any moment meanwhile still carry their bytes
        for _ in range(6):
            with socket.create_connection(("127.0.0.1", local), timeout=20) as sock:
                sock.sendall(b"ping")
                assert sock.recv(16) == b"ping"
            time.sleep(0.4)
    finally:
        forward.terminate()
        forward.wait(10)
    # and only the six connections are recorded: the spares ended unused left nothing
    _wait(lambda: not TaskSession.objects.filter(workflow=workflow, started_at__isnull=False,
                                                 ended_at__isnull=True).exists())
    assert TaskSession.objects.filter(workflow=workflow, started_at__isnull=False).count() == 6
    assert "error" not in forward.stderr.read()
