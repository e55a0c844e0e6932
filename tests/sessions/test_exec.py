"""``osmo workflow exec`` end to end: the installed CLI, a live uvicorn on osmo.asgi, a task running for real
in its local sandbox (docs/cli.md, "osmo workflow exec")."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import time

import pytest
from rest_framework.test import APIClient

from tests.sessions.conftest import OSMO, ROOT, cli_env, osmo, running
from workflows.models import TaskSession

pytestmark = pytest.mark.django_db(transaction=True)


def test_exec_with_entry_gives_back_stdout_stderr_and_the_exit_code(user, local_pool, asgi_server):
    # given a running task
    server = asgi_server()
    workflow = running(user, local_pool)

    # when a command runs in it
    done = osmo(server.url, user, "workflow", "exec", workflow.workflow_id, "main", "--entry",
                "echo out; echo err >&2; id -u; exit 7")

    # then its streams and code are the CLI's own, and it ran as the task's user, not the service's
    assert done.returncode == 7, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "out"
    assert int(lines[1]) >= 2_000_000_000
    assert done.stderr.strip() == "err"
    # and the session is recorded: who, which task, its kind, its bytes, in the workflow's events too
    [session] = TaskSession.objects.filter(workflow=workflow)
    assert (session.user_id, session.task.name, session.kind, session.exit_code) == (user.pk, "main", "exec", 7)
    assert session.started_at is not None and session.ended_at is not None
    assert session.bytes_out == len(done.stdout) + len(done.stderr)
    client = APIClient()
    client.force_authenticate(user)
    events = [e for e in client.get(f"/api/workflows/{workflow.workflow_id}/events/").json()["events"]
              if e["kind"].startswith("Session")]
    assert [e["kind"] for e in events] == ["SessionStarted", "SessionEnded"]
    assert "exit code 7" in events[1]["message"] and f"{session.bytes_out} bytes out" in events[1]["message"]


def test_exec_forwards_piped_stdin_and_group_runs_in_every_task_prefixed(user, local_pool, asgi_server):
    # given a group of two running tasks
    server = asgi_server()
    workflow = running(user, local_pool, tasks={"a": ["sleep", "300"], "b": ["sleep", "300"]})

    # when stdin is piped into one, and a command runs in the whole group
    piped = osmo(server.url, user, "workflow", "exec", workflow.workflow_id, "a", "--entry", "tr a-z A-Z",
                 stdin="hello\n")
    group = osmo(server.url, user, "workflow", "exec", workflow.workflow_id, "--group", "g", "--entry",
                 "echo from $(hostname) > /dev/null; echo one; echo two")

    # then
    assert (piped.returncode, piped.stdout) == (0, "HELLO\n"), piped.stderr
    assert group.returncode == 0, group.stderr
    assert sorted(group.stdout.splitlines()) == ["[a] one", "[a] two", "[b] one", "[b] two"]


def test_an_interactive_shell_on_a_terminal(user, local_pool, asgi_server):
    # given a running task and the CLI on a terminal (a pty)
    server = asgi_server()
    workflow = running(user, local_pool)
    controller, terminal = pty.openpty()
    process = subprocess.Popen([*OSMO, "workflow", "exec", workflow.workflow_id, "main"], stdin=terminal,
                               stdout=terminal, stderr=terminal, env=cli_env(server.url, user), cwd=ROOT,
                               start_new_session=True)
    os.close(terminal)

    # when the user types a command, then a line that Ctrl-C interrupts, then exits with a code
    output = b""

    def read_until(marker: bytes, timeout: float = 15) -> None:
        nonlocal output
        deadline = time.monotonic() + timeout
        while marker not in output:
            assert time.monotonic() < deadline, output.decode(errors="replace")
            ready, _, _ = select.select([controller], [], [], 0.2)
            if ready:
                try:
                    output += os.read(controller, 4096)
                except OSError:
                    break

    read_until(b"$ ")  # the shell's prompt: its terminal is set up
    os.write(controller, b"echo h''i; tty\n")
    read_until(b"hi\r\n")
    read_until(b"/dev/pts/")
    os.write(controller, b"sleep 100\n")
    time.sleep(0.5)
    os.write(controller, b"\x03")  # Ctrl-C reaches the task's process, not the CLI
    os.write(controller, b"echo after-$?\n")
    read_until(b"after-130")
    os.write(controller, b"exit 3\n")

    # then the shell's output came back and its code is the CLI's
    assert process.wait(20) == 3
    os.close(controller)


def test_exec_into_a_task_that_is_not_running_says_its_status(user, local_pool, asgi_server):
    # given a workflow whose task has not started
    from tests.sessions.conftest import spec
    from workflows.services import workflow_submit

    server = asgi_server()
    workflow, _ = workflow_submit(user=user, pool_name="local", spec=spec("waiting", ["main"]))
    status = workflow.tasks.get().status

    # when
    done = osmo(server.url, user, "workflow", "exec", workflow.workflow_id, "main", "--entry", "true")

    # then the CLI says why, naming the status
    assert done.returncode == 1
    assert f"is {status}, not RUNNING" in done.stderr
