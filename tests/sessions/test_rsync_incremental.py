"""``osmo workflow rsync`` with rsync on both ends (incremental, over an exec session as rsync's remote shell),
its plain copy where the CLI's machine lacks rsync, and ``--daemon`` (docs/cli.md, "osmo workflow rsync")."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time

import pytest

from tests.sessions.conftest import OSMO, ROOT, cli_env, osmo, running
from workflows.models import TaskSession

pytestmark = pytest.mark.django_db(transaction=True)

WORKSPACE = "/osmo/run/workspace"


def _rsync_sessions(workflow) -> list[TaskSession]:
    return [s for s in TaskSession.objects.filter(workflow=workflow, kind="exec").order_by("pk")
            if "rsync --server" in " ".join(s.command)]


@pytest.mark.skipif(shutil.which("rsync") is None, reason="rsync (Debian's) is installed by scripts/services.sh")
def test_a_second_upload_sends_only_what_changed_and_download_uses_rsync_too(user, local_pool, asgi_server, tmp_path):
    # given a running task and a folder of one large file and one small one
    server = asgi_server()
    workflow = running(user, local_pool)
    data = tmp_path / "data"
    data.mkdir()
    (data / "big.bin").write_bytes(os.urandom(1024 * 1024))
    (data / "small.txt").write_text("one\n")

    # when it is uploaded, the small file changes, and it is uploaded again (with a rate limit)
    first = osmo(server.url, user, "workflow", "rsync", "upload", workflow.workflow_id, "main", f"{data}:{WORKSPACE}")
    (data / "small.txt").write_text("two\n")
    second = osmo(server.url, user, "workflow", "rsync", "upload", workflow.workflow_id, "main", f"{data}:{WORKSPACE}",
                  "--upload-rate-limit", "10000000")

    # then both went through rsync, and the second sent the change, not the large file again
    assert first.returncode == 0, first.stderr
    assert second.returncode == 0, second.stderr
    assert "(with rsync: only what changed was sent)" in second.stdout
    sent = [s.bytes_in for s in _rsync_sessions(workflow)]
    assert len(sent) == 2
    assert sent[0] > 1024 * 1024
    assert sent[1] < 64 * 1024, sent
    shown = osmo(server.url, user, "workflow", "exec", workflow.workflow_id, "main", "--entry",
                 f"cat {WORKSPACE}/data/small.txt; cksum < {WORKSPACE}/data/big.bin")
    local_sum = subprocess.run(["cksum"], input=(data / "big.bin").read_bytes(), capture_output=True).stdout
    assert shown.stdout.splitlines() == ["two", local_sum.decode().strip()]

    # when the folder is downloaded back, twice
    back = tmp_path / "back"
    down = osmo(server.url, user, "workflow", "rsync", "download", workflow.workflow_id, "main",
                f"{WORKSPACE}/data:{back}")
    again = osmo(server.url, user, "workflow", "rsync", "download", workflow.workflow_id, "main",
                 f"{WORKSPACE}/data:{back}")

    # then it is whole, and the second time nothing large came back
    assert down.returncode == 0, down.stderr
    assert again.returncode == 0, again.stderr
    assert (back / "data" / "big.bin").read_bytes() == (data / "big.bin").read_bytes()
    assert (back / "data" / "small.txt").read_text() == "two\n"
    received = [s.bytes_out for s in _rsync_sessions(workflow)][2:]
    assert received[0] > 1024 * 1024 and received[1] < 64 * 1024, received


def test_without_rsync_on_the_cli_machine_it_is_a_plain_copy(user, local_pool, asgi_server, tmp_path):
    # given a CLI whose PATH has no rsync
    server = asgi_server()
    workflow = running(user, local_pool)
    (tmp_path / "f.txt").write_text("plain\n")
    empty = tmp_path / "bin"
    empty.mkdir()

    done = osmo(server.url, user, "workflow", "rsync", "upload", workflow.workflow_id, "main",
                f"{tmp_path / 'f.txt'}:{WORKSPACE}", env={"PATH": str(empty)})

    assert done.returncode == 0, done.stderr
    assert "a plain copy of" in done.stdout and "rsync is missing here" in done.stdout
    assert not _rsync_sessions(workflow)
    shown = osmo(server.url, user, "workflow", "exec", workflow.workflow_id, "main", "--entry",
                 f"cat {WORKSPACE}/f.txt")
    assert shown.stdout == "plain\n"


def test_daemon_keeps_uploading_changes_until_stopped(user, local_pool, asgi_server, tmp_path):
    # given a running task and a local folder; the daemon's state under a test's own folder
    server = asgi_server()
    workflow = running(user, local_pool)
    data = tmp_path / "live"
    data.mkdir()
    (data / "notes.txt").write_text("first\n")
    # (one API token for every command: a new one would replace the daemon's)
    env = {**cli_env(server.url, user), "XDG_STATE_HOME": str(tmp_path / "state")}

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([*OSMO, *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=30)

    def in_task() -> str:
        return cli("workflow", "exec", workflow.workflow_id, "main", "--entry",
                   f"cat {WORKSPACE}/live/notes.txt 2>/dev/null || true").stdout

    def wait_for(text: str) -> None:
        deadline = time.monotonic() + 30
        while in_task() != text:
            assert time.monotonic() < deadline, (tmp_path / "state").rglob("*.log").__next__().read_text()
            time.sleep(0.3)

    # when it starts as a daemon
    started = cli("workflow", "rsync", "upload", workflow.workflow_id, "main", f"{data}:{WORKSPACE}",
                  "--daemon", "--poll-interval", "0.2", "--debounce-delay", "0.2")
    assert started.returncode == 0, started.stderr
    assert "Rsync daemon started in detached process: PID" in started.stdout
    pid = int(started.stdout.split("PID ")[1].split()[0])
    try:
        # then the folder arrives, and a change follows it
        wait_for("first\n")
        (data / "notes.txt").write_text("second\n")
        wait_for("second\n")
        status = cli("workflow", "rsync", "status")
        assert f"PID {pid}: {data} -> {workflow.workflow_id}/main:{WORKSPACE}" in status.stdout

        # when it is stopped
        stopped = cli("workflow", "rsync", "stop", workflow.workflow_id)
        assert f"Stopped the rsync daemon of {workflow.workflow_id}/main (PID {pid})" in stopped.stdout
        deadline = time.monotonic() + 15
        while os.path.exists(f"/proc/{pid}") and "zombie" not in open(f"/proc/{pid}/status").read().lower():
            assert time.monotonic() < deadline, "the daemon did not stop"
            time.sleep(0.1)
    finally:
        if os.path.exists(f"/proc/{pid}"):
            os.kill(pid, 9)
    log = next((tmp_path / "state" / "osmo" / "rsync").glob("*.log")).read_text()
    assert "Uploaded" in log and "Stopped (SIGTERM)" in log
    assert "No rsync daemon is running." in cli("workflow", "rsync", "status").stdout


def test_the_rsh_refuses_like_ssh_when_no_session_opens(user, local_pool, asgi_server):
    # given a workflow that does not exist: rsync's remote shell exits 255, as ssh's, saying why
    server = asgi_server()
    done = subprocess.run([*OSMO[:1], "-m", "cli.rsync_rsh", "no-such-wf-1", "main", "rsync", "--server"],
                          env=cli_env(server.url, user), cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert done.returncode == 255
    assert "error: workflow no-such-wf-1 not found" in done.stderr


def test_the_remote_shell_carries_every_byte_to_rsyncs_non_blocking_socket(user, local_pool, asgi_server):
    # given the remote shell started as rsync starts it: its stdout one end of a socket pair that rsync made
    # non-blocking, read by an rsync busy elsewhere (the first byte, then nothing for two seconds while the
    # output goes on: far more than the socket holds)
    server = asgi_server()
    workflow = running(user, local_pool)
    ours, theirs = socket.socketpair()
    theirs.setblocking(False)
    size = 4 * 1024 * 1024
    shell = subprocess.Popen([*OSMO[:-1], "cli.rsync_rsh", "--timeout", "20", workflow.workflow_id, "main",
                              f"head -c {size} /dev/zero"], stdin=subprocess.DEVNULL, stdout=theirs,
                             stderr=subprocess.PIPE, env=cli_env(server.url, user), cwd=ROOT)
    theirs.close()

    # when it is read with a pause
    ours.settimeout(60)
    received = len(ours.recv(1))
    time.sleep(2)
    while chunk := ours.recv(1 << 16):
        received += len(chunk)

    # then every byte came and the shell ended with the command's exit code (a full socket is waited on,
    # not a write that fails half done)
    assert shell.wait(30) == 0, shell.stderr.read() if shell.stderr else ""
    assert received == size
