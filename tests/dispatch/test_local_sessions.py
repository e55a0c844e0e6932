"""Sessions into a running local task, at the backend (docs/runtime.md, "What a task can and cannot do"):
an exec lands in the task's own sandbox (its user, filter, namespaces, folder, environment), a
connection reaches only a port the task itself listens on. Real processes."""

from __future__ import annotations

import json
import os
import select
import socket
import time
from dataclasses import replace

import pytest

from scheduler.dispatch.base import DispatchPermanentError
from scheduler.dispatch.local_sandbox import UID_BASE
from tests.conftest import wait_for
from tests.dispatch.test_local_sandbox import hostile, sandboxed  # noqa: F401  (a fixture)


def _running(local, pod) -> None:
    local.create_pod(pod)
    wait_for(lambda: (local.pod_dir("osmo", pod.pod_name) / "sandbox.pid").exists(), timeout=30,
             message="the sandbox to start")


def _read_all(fd: int, timeout: float = 10.0) -> bytes:
    data = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # EIO: the session side of the terminal closed
                break
            if not chunk:
                break
            data += chunk
    return data


def test_an_exec_runs_as_the_task_in_its_sandbox_with_its_environment(sandboxed):  # noqa: F811
    folder, make = sandboxed
    local = make()
    pod = hostile("busy", "cd /osmo/output && echo made > here.txt && sleep 30", workflow_pk=31, owner_pk=4)
    plan = {**json.loads(pod.runtime_plan), "env": {"GREETING": "hello"}}
    pod = replace(pod, runtime_plan=json.dumps(plan))
    _running(local, pod)
    time.sleep(0.3)

    # when
    session = local.exec_start(namespace="osmo", pod_name="busy",
                               argv=["sh", "-c", "id -u; pwd; cat here.txt; echo $GREETING; "
                                                 "grep Seccomp: /proc/self/status; echo oops >&2; exit 7"])
    out, err = session.process.communicate(timeout=30)

    # then
    assert session.process.returncode == 7
    assert out.decode().splitlines() == [str(UID_BASE + 31), "/osmo/output", "made", "hello", "Seccomp:\t2"]
    assert err.decode() == "oops\n"


def test_an_exec_with_a_terminal_leads_a_session_on_the_sandboxs_own_terminal(sandboxed):  # noqa: F811
    folder, make = sandboxed
    local = make()
    _running(local, hostile("shell", "sleep 30"))

    # when a shell is typed into
    session = local.exec_start(namespace="osmo", pod_name="shell", argv=["/bin/sh"], tty=True)
    assert session.terminal is not None
    os.write(session.terminal, b"echo hi-$((40+2)); tty; exit 3\n")
    shown = _read_all(session.terminal).decode(errors="replace")

    # then
    assert "hi-42" in shown and "/dev/pts/0" in shown, shown
    assert session.process.wait(timeout=10) == 3
    os.close(session.terminal)


def test_a_connection_reaches_only_the_ports_the_task_listens_on(sandboxed):  # noqa: F811
    folder, make = sandboxed
    service = socket.create_server(("127.0.0.1", 0))
    service_port = service.getsockname()[1]
    local = make(service_url=f"http://127.0.0.1:{service_port}")
    listener = ("import socket\n"
                "s = socket.create_server(('127.0.0.1', 47200))\n"
                "while True:\n"
                "    c, _ = s.accept(); c.sendall(c.recv(64).upper()); c.close()\n")
    _running(local, hostile("server", f"python3 -c \"{listener}\" & sleep 30", workflow_pk=51))
    wait_for(lambda: 47200 in local.task_ports(namespace="osmo", pod_name="server"), timeout=20,
             message="the task to listen")
    try:
        # when / then: its own port answers
        connection = local.port_connect(namespace="osmo", pod_name="server", port=47200)
        connection.sendall(b"ping")
        assert connection.recv(64) == b"PING"
        connection.close()
        assert local.task_ports(namespace="osmo", pod_name="server") == {47200: "127.0.0.1"}
        # and the service's forward in its network, or a port on the host's loopback, do not
        for port in (service_port, 5432):
            with pytest.raises(DispatchPermanentError, match=f"does not listen on port {port} .it listens on: 47200"):
                local.port_connect(namespace="osmo", pod_name="server", port=port)
    finally:
        service.close()


def test_no_session_into_a_task_that_is_not_running(sandboxed):  # noqa: F811
    folder, make = sandboxed
    local = make()
    done = hostile("done", "true")
    local.create_pod(done)
    wait_for(lambda: (local.pod_dir("osmo", "done") / "exit").exists(), timeout=30, message="the task to end")

    # when / then
    for pod_name in ("done", "never-made"):
        with pytest.raises(DispatchPermanentError, match=f"pod {pod_name} is not running on the local backend"):
            local.exec_start(namespace="osmo", pod_name=pod_name, argv=["true"])
        with pytest.raises(DispatchPermanentError, match="is not running"):
            local.port_connect(namespace="osmo", pod_name=pod_name, port=80)
