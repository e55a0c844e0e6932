"""How exec sessions end and come back: ``--keep-alive`` across a lost connection, a rescheduled task and
its end; the idle and maximum-length settings; the task's end; a terminal's size and typeahead; the
processes an exec started (docs/cli.md, "osmo workflow exec"; docs/operations.md, "Sessions")."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import signal
import struct
import subprocess
import termios
import time
from pathlib import Path

import pytest

from tests.sessions.conftest import OSMO, ROOT, _free_port, cli_env, osmo, running
from workflows.models import Task, TaskSession

pytestmark = pytest.mark.django_db(transaction=True)


class Lines:
    """A stream of a subprocess read without blocking the test forever."""

    def __init__(self, stream) -> None:
        self.fd = stream.fileno()
        self.text = b""

    def wait_for(self, marker: str, count: int = 1, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while self.text.count(marker.encode()) < count:
            assert time.monotonic() < deadline, self.text.decode(errors="replace")
            if select.select([self.fd], [], [], 0.2)[0]:
                chunk = os.read(self.fd, 65536)
                if not chunk:
                    assert self.text.count(marker.encode()) >= count, self.text.decode(errors="replace")
                    return
                self.text += chunk


def _set_status(workflow, status: str) -> None:
    Task.objects.filter(workflow=workflow, name="main").update(status=status)


def test_keep_alive_reruns_after_a_lost_connection_waits_while_rescheduled_and_stops_at_the_end(
        user, local_pool, asgi_server):
    # given a command running in a task under --keep-alive, through a service on a fixed port
    port = _free_port()
    server = asgi_server(port=port)
    workflow = running(user, local_pool)
    process = subprocess.Popen([*OSMO, "workflow", "exec", workflow.workflow_id, "main", "--keep-alive", "--entry",
                                "echo run; sleep 300"], env=cli_env(server.url, user), cwd=ROOT,
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = Lines(process.stdout), Lines(process.stderr)
    try:
        out.wait_for("run\n")

        # when the service restarts: the connection is lost, and the command runs again
        server.process.terminate()
        server.process.wait(10)
        asgi_server(port=port)
        err.wait_for("connection lost")
        out.wait_for("run\n", count=2)

        # when the task is sent back to the queue (RESCHEDULED, then SCHEDULING): the CLI waits for it
        _set_status(workflow, "SCHEDULING")
        err.wait_for("task main is SCHEDULING; waiting for it to run again")
        assert process.poll() is None
        _set_status(workflow, "RUNNING")
        out.wait_for("run\n", count=3)

        # when the task ends: the CLI stops, saying so
        _set_status(workflow, "COMPLETED")
        code = process.wait(30)
        err.text += process.stderr.read()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)

    # then
    assert code == 1
    assert f"task main of workflow {workflow.workflow_id} is COMPLETED: it ended, so --keep-alive stops" in \
        err.text.decode()
    assert TaskSession.objects.filter(workflow=workflow, kind="exec", started_at__isnull=False).count() == 3
    assert not TaskSession.objects.filter(workflow=workflow, ended_at__isnull=True, started_at__isnull=False).exists()


def test_idle_and_maximum_length_settings_close_sessions_with_the_code_the_cli_names(user, local_pool, asgi_server):
    # given a service whose sessions end after 2 s without traffic, or 4 s in all
    server = asgi_server(env={"OSMO_SESSION_IDLE_SECONDS": "2", "OSMO_SESSION_MAX_SECONDS": "4"})
    workflow = running(user, local_pool)

    # when one command is silent and another keeps talking
    silent = osmo(server.url, user, "workflow", "exec", workflow.workflow_id, "main", "--entry", "sleep 30")
    talking = osmo(server.url, user, "workflow", "exec", workflow.workflow_id, "main", "--entry",
                   "while true; do echo tick; sleep 0.3; done")

    # then each ends with its reason, recorded
    assert silent.returncode == 1
    assert "ended: the session was idle too long" in silent.stderr
    assert talking.returncode == 1
    assert "ended: the session reached its maximum length" in talking.stderr
    assert talking.stdout.count("tick") >= 5
    reasons = list(TaskSession.objects.filter(workflow=workflow).order_by("pk").values_list("end_reason", flat=True))
    assert reasons == ["idle for 2 s", "open for its maximum of 4 s"]


def _pids_running(argv_text: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "cmdline").read_bytes().replace(b"\0", b" ").strip() == argv_text.encode():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def test_a_session_ends_with_its_task_and_takes_its_processes_except_nohup(user, local_pool, asgi_server):
    # given a task, and an exec that leaves two processes behind: one plain, one under nohup
    server = asgi_server()
    workflow = running(user, local_pool)
    left = osmo(server.url, user, "workflow", "exec", workflow.workflow_id, "main", "--entry",
                "sleep 765 >/dev/null 2>&1 & nohup sleep 876 >/dev/null 2>&1 & sleep 0.5; echo started")
    # (the pause: nohup ignores the hangup once it runs, a moment after `&`, as over ssh)
    assert (left.returncode, left.stdout) == (0, "started\n"), left.stderr

    # then the plain one ended with the session, the nohup'd one lives on in the task
    assert _pids_running("sleep 876")
    deadline = time.monotonic() + 10
    while _pids_running("sleep 765"):
        assert time.monotonic() < deadline, "the plain background process outlived its session"
        time.sleep(0.1)
    assert _pids_running("sleep 876")

    # when a session is open and the task ends
    process = subprocess.Popen([*OSMO, "workflow", "exec", workflow.workflow_id, "main", "--entry",
                                "echo open; sleep 654"], env=cli_env(server.url, user), cwd=ROOT,
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    Lines(process.stdout).wait_for("open\n")
    _set_status(workflow, "FAILED")
    try:
        code = process.wait(30)
    finally:
        if process.poll() is None:
            process.kill()

    # then the CLI says so, its command was ended, and the session's record says why
    assert code == 1
    assert "ended: the task is no longer running" in process.stderr.read().decode()
    deadline = time.monotonic() + 10
    while _pids_running("sleep 654"):
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert TaskSession.objects.filter(workflow=workflow).order_by("pk").last().end_reason == "the task is FAILED"


def test_the_terminal_size_reaches_the_task_and_typeahead_is_kept(user, local_pool, asgi_server):
    # given a terminal of 37 rows and 101 columns, and a line typed before the CLI even started
    server = asgi_server()
    workflow = running(user, local_pool)
    controller, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 37, 101, 0, 0))
    os.write(controller, b"echo typed-$((40+2))\n")
    process = subprocess.Popen([*OSMO, "workflow", "exec", workflow.workflow_id, "main"], stdin=terminal,
                               stdout=terminal, stderr=terminal, env=cli_env(server.url, user), cwd=ROOT,
                               start_new_session=True)
    os.close(terminal)
    output = b""

    def read_until(marker: bytes, timeout: float = 20) -> None:
        nonlocal output
        deadline = time.monotonic() + timeout
        while marker not in output:
            assert time.monotonic() < deadline, output.decode(errors="replace")
            if select.select([controller], [], [], 0.2)[0]:
                try:
                    output += os.read(controller, 4096)
                except OSError:
                    break

    try:
        # then the typed line ran in the task's shell
        read_until(b"typed-42")
        # and the shell sees the terminal's size, and its new size after a resize
        os.write(controller, b"stty size\n")
        read_until(b"37 101")
        fcntl.ioctl(controller, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 120, 0, 0))
        process.send_signal(signal.SIGWINCH)  # (the CLI has no controlling terminal here: the kernel sends none)
        time.sleep(0.3)
        os.write(controller, b"stty size\n")
        read_until(b"50 120")
        os.write(controller, b"exit 0\n")
        assert process.wait(20) == 0
    finally:
        if process.poll() is None:
            process.kill()
        os.close(controller)
