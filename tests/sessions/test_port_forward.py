"""``osmo workflow port-forward`` end to end, and the refusals every session gets (docs/api.md, "Sessions
into running tasks")."""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest
import websocket
from rest_framework.test import APIClient

from cli.errors import CliError
from cli.sessions.port_forward import parse_ports
from tests.factories import make_api_key, make_node, make_pool
from tests.sessions.conftest import OSMO, ROOT, _free_port, cli_env, osmo, running, wait_listening
from workflows.models import Task, TaskSession
from workflows.scheduling.pod.runtime import API_TOKEN_SALT, task_token

pytestmark = pytest.mark.django_db(transaction=True)


def _sessions(workflow, task="main"):
    return f"/api/workflows/{workflow.workflow_id}/tasks/{task}/sessions/"


def test_port_forward_carries_concurrent_requests_to_a_task_http_server(user, local_pool, asgi_server, tmp_path):
    # given a task serving HTTP on its port 8765
    server = asgi_server()
    workflow = running(user, local_pool, tasks={"main": ["sh", "-c", "cd /tmp && echo served > index.html && "
                                                         "exec python3 -m http.server 8765 --bind 127.0.0.1"]})
    wait_listening(workflow, "main", 8765)
    local = _free_port()

    # when it is forwarded and eight requests go through at once
    forward = subprocess.Popen([*OSMO, "workflow", "port-forward", workflow.workflow_id, "main", "--port",
                                f"{local}:8765", "--host", "127.0.0.1"], env=cli_env(server.url, user), cwd=ROOT,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert f"Forwarding 127.0.0.1:{local} -> {workflow.workflow_id}/main:8765" in forward.stdout.readline()

        def get(_: int) -> str:
            with urllib.request.urlopen(f"http://127.0.0.1:{local}/index.html", timeout=15) as answer:
                return answer.read().decode()

        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(get, range(8)))
    finally:
        forward.terminate()
        forward.wait(10)

    # then every request got the task's answer, each over its own recorded session
    assert answers == ["served\n"] * 8
    deadline = time.monotonic() + 10
    while TaskSession.objects.filter(workflow=workflow, kind="port-forward", ended_at__isnull=True,
                                     started_at__isnull=False).exists():
        assert time.monotonic() < deadline
        time.sleep(0.1)
    sessions = TaskSession.objects.filter(workflow=workflow, kind="port-forward", started_at__isnull=False)
    assert sessions.count() == 8
    assert all(s.bytes_in > 0 and s.bytes_out > len("served\n") and s.port == 8765 for s in sessions)


def test_a_port_the_task_does_not_listen_on_is_refused(user, local_pool, asgi_server, settings):
    # given a running task that listens on nothing
    server = asgi_server()
    workflow = running(user, local_pool)
    client = APIClient()
    client.force_authenticate(user)

    # when the CLI forwards a port it does not listen on, and the API is asked for the database's port
    done = osmo(server.url, user, "workflow", "port-forward", workflow.workflow_id, "main", "--port", "8766")
    database_port = int(settings.DATABASES["default"].get("PORT") or 5432)
    answer = client.post(_sessions(workflow), {"kind": "port-forward", "port": database_port}, format="json")

    # then both are refused, naming the port
    assert done.returncode == 1
    assert "Cannot forward to port 8766 of task main: the task does not listen on it" in done.stderr
    assert answer.status_code == 409
    assert answer.json()["code"] == "port_not_listening"


def test_another_user_gets_404_staff_403_and_a_tasks_token_403(user, other_user, staff_user, settings):
    # given a running task of a simulated pool, owned by user
    pool = make_pool("sim", keys=[])
    make_node(pool, "n1", {}, gpu=0)
    workflow = running(user, pool)
    body = {"kind": "exec", "command": ["true"]}

    def post(who=None, token=None):
        client = APIClient()
        if who is not None:
            client.force_authenticate(who)
        if token is not None:
            client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
        return client.post(_sessions(workflow), body, format="json")

    # when
    other, unknown = post(other_user), APIClient()
    unknown.force_authenticate(other_user)
    missing = unknown.post("/api/workflows/no-such-workflow-1/tasks/main/sessions/", body, format="json")
    staff = post(staff_user)
    task = Task.objects.get(workflow=workflow)
    own_token = post(token=task_token(task.pk, task.pod_name, salt=API_TOKEN_SALT))
    settings.OSMO_SESSION_STAFF = True
    staff_allowed = post(staff_user)

    # then another user's answer is a missing workflow's, in the envelope; staff are refused by default; a
    # task's own token opens nothing; with the setting on, staff reach the backend (which refuses: simulated)
    assert (other.status_code, other.json()["code"]) == (404, "not_found")
    assert other.json()["message"].replace(workflow.workflow_id, "X") == \
        missing.json()["message"].replace("no-such-workflow-1", "X")
    assert (staff.status_code, staff.json()["code"]) == (403, "session_forbidden")
    assert "OSMO_SESSION_STAFF" in staff.json()["message"]
    assert (own_token.status_code, own_token.json()["code"]) == (403, "session_forbidden")
    assert (staff_allowed.status_code, staff_allowed.json()["code"]) == (409, "sessions_unsupported")
    assert not TaskSession.objects.exists()


def test_the_simulated_backend_refuses_naming_itself_and_a_waiting_task_is_409(user, live_server):
    # given a simulated pool: one workflow running, one not started
    pool = make_pool("sim", keys=[])
    make_node(pool, "n1", {}, gpu=0)
    workflow = running(user, pool)
    client = APIClient()
    client.force_authenticate(user)
    Task.objects.filter(workflow=workflow).update(status="INITIALIZING")
    waiting = client.post(_sessions(workflow), {"kind": "exec", "command": ["true"]}, format="json")
    Task.objects.filter(workflow=workflow).update(status="RUNNING")

    # when
    done = osmo(live_server.url, user, "workflow", "exec", workflow.workflow_id, "main", "--entry", "true")

    # then
    assert (waiting.status_code, waiting.json()["code"]) == (409, "task_not_running")
    assert waiting.json()["details"]["status"] == "INITIALIZING"
    assert done.returncode == 1
    assert "runs its tasks on the simulated backend" in done.stderr


def test_a_websocket_needs_its_ticket_once_and_its_users_credentials(user, other_user, local_pool, asgi_server):
    # given a ticket of user's
    server = asgi_server()
    workflow = running(user, local_pool)
    client = APIClient()
    client.force_authenticate(user)
    answer = client.post(_sessions(workflow), {"kind": "exec", "command": ["true"]}, format="json").json()
    url = server.url.replace("http://", "ws://") + answer["websocket"]

    def refused(headers: list[str], path: str = url) -> tuple[int, dict]:
        with pytest.raises(websocket.WebSocketBadStatusException) as caught:
            websocket.create_connection(path, header=headers, timeout=10)
        return caught.value.status_code, json.loads(caught.value.resp_body)

    # when it is used without credentials, with another user's, then rightly, then again
    anonymous = refused([])
    others = refused([f"Authorization: Token {make_api_key(other_user)}"])
    mine = [f"Authorization: Token {make_api_key(user)}"]
    ws = websocket.create_connection(url, header=mine, timeout=10)
    ws.close()
    again = refused(mine)
    unknown_path = refused(mine, server.url.replace("http://", "ws://") + "/ws/elsewhere/")

    # then each refusal is the API's envelope
    assert (anonymous[0], anonymous[1]["code"]) == (401, "not_authenticated")
    assert (others[0], others[1]["code"]) == (404, "session_ticket_invalid")
    assert (again[0], again[1]["code"]) == (404, "session_ticket_invalid")
    assert (unknown_path[0], unknown_path[1]["code"]) == (404, "not_found")


@pytest.mark.parametrize(("text", "expected"), [
    ("8000", [(8000, 8000)]),
    ("9000:80", [(9000, 80)]),
    ("8000-8002:9000-9002,8005", [(8000, 9000), (8001, 9001), (8002, 9002), (8005, 8005)]),
])
def test_port_values(text, expected):
    assert parse_ports(text) == expected


@pytest.mark.parametrize(("text", "message"), [
    ("", "--port is empty"),
    ("http", "'http' is not a port or a range of ports"),
    ("70000", "port 70000 is out of range (1-65535)"),
    ("0:80", "port 0 is out of range"),
    ("8000-8001:80", "maps 2 local ports to 1 task ports"),
    ("8002-8000", "ends before it starts"),
    ("8000,8000:81", "a local port is named twice"),
])
def test_malformed_port_values_are_usage_errors(text, message):
    with pytest.raises(CliError) as caught:
        parse_ports(text)
    assert message in caught.value.message
    assert caught.value.exit_code == 2


def test_the_cli_says_a_malformed_port_before_contacting_anything():
    done = subprocess.run([*OSMO, "workflow", "port-forward", "wf-1", "main", "--port", "8000:99999"], cwd=ROOT,
                          env={**os.environ, "OSMO_URL": "http://127.0.0.1:9", "OSMO_TOKEN": "x",
                               "OSMO_CONFIG": "/nonexistent/osmo.json"}, capture_output=True, text=True, timeout=30)
    # (nothing listens at that address: a request would have failed with "cannot connect", exit 1)
    assert done.returncode == 2
    assert "port 99999 is out of range (1-65535)" in done.stderr


def test_a_forward_outlives_a_restart_of_the_service(user, local_pool, asgi_server):
    # given a forward to a task's HTTP server through a service on a fixed port
    port = _free_port()
    server = asgi_server(port=port)
    workflow = running(user, local_pool, tasks={"main": ["sh", "-c", "cd /tmp && echo up > index.html && "
                                                         "exec python3 -m http.server 8765 --bind 127.0.0.1"]})
    wait_listening(workflow, "main", 8765)
    local = _free_port()
    forward = subprocess.Popen([*OSMO, "workflow", "port-forward", workflow.workflow_id, "main", "--port",
                                f"{local}:8765", "--host", "127.0.0.1"], env=cli_env(server.url, user), cwd=ROOT,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def get() -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{local}/index.html", timeout=20) as answer:
            return answer.read().decode()

    try:
        forward.stdout.readline()
        assert get() == "up\n"

        # when the service stops and comes back on its address
        server.process.terminate()
        server.process.wait(10)
        asgi_server(port=port)

        # then the same forward carries new connections without being started again
        assert get() == "up\n"
        assert forward.poll() is None
    finally:
        forward.terminate()
        forward.wait(10)


@pytest.mark.parametrize(("body", "path"), [
    ({"kind": "shell", "command": ["true"]}, "kind"),
    ({"kind": "exec", "command": []}, "command"),
    ({"kind": "port-forward", "port": 70000}, "port"),
])
def test_a_malformed_session_request_is_a_400_naming_its_field(user, body, path):
    pool = make_pool("sim", keys=[])
    make_node(pool, "n1", {}, gpu=0)
    workflow = running(user, pool)
    client = APIClient()
    client.force_authenticate(user)
    answer = client.post(_sessions(workflow), body, format="json")
    assert answer.status_code == 400
    assert path in [error["path"] for error in answer.json()["details"]["errors"]]
