"""Sessions into running tasks: a live ASGI server (uvicorn on ``osmo.asgi``, as `make run` serves it) and
tasks running for real on a local pool, their pods made by the local backend directly (no worker needed:
a test gets a running sandbox in about a second)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from django.utils import timezone

from scheduler.dispatch import DispatchPermanentError, backend_for
from tests.conftest import wait_healthy
from tests.factories import make_api_key, make_node, make_pool
from workflows.models import Task, Workflow
from workflows.scheduling.pod.request import pod_request
from workflows.services import workflow_submit

ROOT = Path(__file__).resolve().parents[2]
# `python -m cli` in the checkout: the osmo command of this tree (the virtualenv's may be another checkout's).
OSMO = [sys.executable, "-m", "cli"]


@dataclass
class Server:
    url: str
    process: subprocess.Popen
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def local_pool(tmp_path, monkeypatch, settings, worker_env):
    pods = tmp_path / "pods"
    worker_env.update({"OSMO_LOCAL_DIR": str(pods), "OSMO_ARTIFACT_STORE": (tmp_path / "artifacts").as_uri()})
    monkeypatch.setenv("OSMO_LOCAL_DIR", str(pods))
    settings.OSMO_ARTIFACT_STORE = (tmp_path / "artifacts").as_uri()
    pool = make_pool("local", keys=[], backend="local")
    make_node(pool, "slot-1", {}, gpu=0, cpu=4)
    yield pool
    backend = backend_for("local")
    for namespace, pod_name in _STARTED:  # the sandboxes this test started, stopped now
        backend.delete_pod(namespace=namespace, pod_name=pod_name, grace_seconds=0)
    _STARTED.clear()
    backend.networks_sweep()  # type: ignore[attr-defined]  # (the local backend's)


_STARTED: list[tuple[str, str]] = []


@pytest.fixture
def asgi_server(worker_env, tmp_path, request) -> Iterator:
    """Start uvicorn on osmo.asgi with the test's database; stopped at teardown."""
    servers: list[Server] = []

    def start(env: dict[str, str] | None = None, port: int | None = None) -> Server:
        port = port or _free_port()
        log_path = tmp_path / f"uvicorn-{port}-{len(servers)}.log"
        process = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "osmo.asgi:application", "--host", "127.0.0.1", "--port", str(port),
             "--log-level", "warning", "--timeout-graceful-shutdown", "2"],
            env={**worker_env, **(env or {})}, stdout=log_path.open("w"), stderr=subprocess.STDOUT, cwd=ROOT,
            start_new_session=True)
        server = Server(f"http://127.0.0.1:{port}", process, log_path)
        servers.append(server)
        wait_healthy(server.url, process, server.log, name="uvicorn", timeout=30, interval=0.1, request_timeout=1)
        return server

    yield start
    for server in servers:
        if server.process.poll() is None:
            server.process.terminate()
            try:
                server.process.wait(10)
            except subprocess.TimeoutExpired:
                server.process.kill()
    if getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed:
        for server in servers:
            print(f"----- {server.log_path.name} -----\n{server.log()[-4000:]}")


def spec(name: str, tasks: list[str], group: str = "g") -> str:
    lines = ["workflow:", f"  name: {name}", "  groups:", f"  - name: {group}", "    tasks:"]
    for index, task in enumerate(tasks):
        lines.append(f"    - {{name: {task}, lead: {'true' if index == 0 else 'false'}, image: ubuntu, "
                     "command: [sleep, '300']}")
    lines += ["resources:", "  default: {cpu: 1, gpu: 0}"]
    return "\n".join(lines) + "\n"


def running(user, pool, *, name: str = "interactive", tasks: dict[str, list[str]] | None = None) -> Workflow:
    """A workflow of ``pool`` whose tasks run ``tasks[name]`` (default: sleep) for real in their sandboxes."""
    tasks = tasks or {"main": ["sleep", "300"]}
    workflow, _ = workflow_submit(user=user, pool_name=pool.name, spec=spec(name, list(tasks)))
    node = pool.nodes.first()
    for task in workflow.tasks.all():
        Task.objects.filter(pk=task.pk).update(status="RUNNING", pod_name=f"{workflow.global_id}-{task.name}"[:60],
                                               dispatched_at=timezone.now(), node=node, node_name=node.name)
    if pool.backend == "local":
        backend = backend_for("local")
        for task in Task.objects.filter(workflow=workflow).select_related("node", "group", "workflow"):
            pod = replace(pod_request(task, pool), runtime_plan=json.dumps({"command": tasks[task.name]}))
            _STARTED.append((pod.namespace, pod.pod_name))
            backend.create_pod(pod)
        deadline = time.monotonic() + 30
        for task in Task.objects.filter(workflow=workflow).select_related("node", "group", "workflow"):
            pod = pod_request(task, pool)
            while True:
                try:
                    backend.task_ports(namespace=pod.namespace, pod_name=pod.pod_name)  # type: ignore[attr-defined]
                    break
                except DispatchPermanentError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)
    return workflow


def wait_listening(workflow: Workflow, task: str, port: int) -> None:
    backend = backend_for("local")
    pod = pod_request(Task.objects.select_related("node", "group", "workflow").get(workflow=workflow, name=task),
                      workflow.pool)
    deadline = time.monotonic() + 20
    while port not in backend.task_ports(namespace=pod.namespace, pod_name=pod.pod_name):  # type: ignore[attr-defined]
        assert time.monotonic() < deadline, f"the task did not listen on {port}"
        time.sleep(0.05)


def cli_env(server_url: str, user) -> dict[str, str]:
    return {**os.environ, "OSMO_URL": server_url, "OSMO_TOKEN": make_api_key(user),
            "OSMO_CONFIG": "/nonexistent/osmo.json"}


def osmo(server_url: str, user, *args: str, stdin: str = "", timeout: float = 30,
         env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*OSMO, *args], env={**cli_env(server_url, user), **(env or {})}, input=stdin,
                          capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)
