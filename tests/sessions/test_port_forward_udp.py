"""``osmo workflow port-forward --udp``: datagrams to a UDP port a task is bound to, through the service; and
a port the task is not bound to refused (Kubernetes' refusal: tests/dispatch/test_kubernetes_udp.py)."""

from __future__ import annotations

import socket
import subprocess
import time

import pytest

from scheduler.dispatch import backend_for
from tests.sessions.conftest import OSMO, ROOT, _free_port, cli_env, osmo, running
from workflows.models import Task, TaskSession
from workflows.scheduling.pod.request import pod_request

pytestmark = pytest.mark.django_db(transaction=True)

ECHO = ["python3", "-c", "import socket\n"
        "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
        "s.bind(('127.0.0.1', 9999))\n"
        "while True:\n"
        "    data, peer = s.recvfrom(65535)\n"
        "    s.sendto(b'echo:' + data, peer)\n"]


def _wait_bound(workflow, port: int) -> None:
    backend = backend_for("local")
    pod = pod_request(Task.objects.select_related("node", "group", "workflow").get(workflow=workflow, name="main"),
                      workflow.pool)
    deadline = time.monotonic() + 20
    while port not in backend.task_udp_ports(namespace=pod.namespace, pod_name=pod.pod_name):  # type: ignore[attr-defined]
        assert time.monotonic() < deadline, f"the task did not bind UDP port {port}"
        time.sleep(0.05)


def test_udp_datagrams_reach_the_task_and_each_peer_gets_its_own_answers(user, local_pool, asgi_server):
    # given a task answering datagrams on its UDP port 9999
    server = asgi_server()
    workflow = running(user, local_pool, tasks={"main": ECHO})
    _wait_bound(workflow, 9999)
    local = _free_port()

    # when it is forwarded with --udp and two local peers send datagrams
    forward = subprocess.Popen([*OSMO, "workflow", "port-forward", workflow.workflow_id, "main", "--udp", "--port",
                                f"{local}:9999", "--host", "127.0.0.1"], env=cli_env(server.url, user), cwd=ROOT,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert f"Forwarding 127.0.0.1:{local}/udp -> {workflow.workflow_id}/main:9999/udp" in forward.stdout.readline()
        answers = {}
        for name in ("one", "two"):
            peer = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            peer.settimeout(20)
            with peer:
                peer.sendto(name.encode(), ("127.0.0.1", local))
                first = peer.recvfrom(65535)[0]
                peer.sendto(b"again-" + name.encode(), ("127.0.0.1", local))
                answers[name] = [first, peer.recvfrom(65535)[0]]
    finally:
        forward.terminate()
        forward.wait(10)

    # then each peer got the task's answers to its own datagrams, one UDP session each, recorded
    assert answers == {"one": [b"echo:one", b"echo:again-one"], "two": [b"echo:two", b"echo:again-two"]}
    deadline = time.monotonic() + 10
    while TaskSession.objects.filter(workflow=workflow, started_at__isnull=False, ended_at__isnull=True).exists():
        assert time.monotonic() < deadline
        time.sleep(0.1)
    sessions = TaskSession.objects.filter(workflow=workflow, kind="port-forward-udp", started_at__isnull=False)
    assert sorted((s.bytes_in, s.bytes_out) for s in sessions) == [(12, 22), (12, 22)]


def test_a_udp_port_the_task_is_not_bound_to_is_refused(user, local_pool, asgi_server):
    server = asgi_server()
    workflow = running(user, local_pool, tasks={"main": ECHO})
    _wait_bound(workflow, 9999)

    done = osmo(server.url, user, "workflow", "port-forward", workflow.workflow_id, "main", "--udp", "--port", "9998")

    assert done.returncode == 1
    assert "Cannot forward to port 9998 of task main: the task has no UDP socket bound to it (its UDP ports: 9999)" \
        in done.stderr
