"""``osmo workflow rsync upload|download`` end to end: the CLI (a subprocess), a live uvicorn on osmo.asgi, tasks
running for real in their local sandboxes (docs/cli.md, "osmo workflow rsync")."""

from __future__ import annotations

import subprocess

import pytest

from tests.sessions.conftest import osmo, running
from workflows.models import TaskSession

pytestmark = pytest.mark.django_db(transaction=True)

WORKSPACE = "/osmo/run/workspace"


def test_upload_a_folder_then_the_task_reads_its_file(user, local_pool, asgi_server, tmp_path):
    # given a running task and a local folder
    server = asgi_server()
    workflow = running(user, local_pool)
    data = tmp_path / "data"
    (data / "sub").mkdir(parents=True)
    (data / "a.txt").write_text("alpha\n")
    (data / "sub" / "b.bin").write_bytes(bytes(range(256)) * 40)

    # when it is uploaded into the workspace, with a rate limit
    done = osmo(server.url, user, "workflow", "rsync", "upload", workflow.workflow_id, "main",
                f"{data}:{WORKSPACE}", "--upload-rate-limit", "1000000")

    # then the task sees the folder under its name, as its user, byte for byte
    assert done.returncode == 0, done.stderr
    assert f"Uploaded {data} to {workflow.workflow_id}/main:{WORKSPACE}" in done.stdout
    shown = osmo(server.url, user, "workflow", "exec", workflow.workflow_id, "main", "--entry",
                 f"cat {WORKSPACE}/data/a.txt; cksum < {WORKSPACE}/data/sub/b.bin; stat -c %u {WORKSPACE}/data; id -u")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0] == "alpha"
    local_sum = subprocess.run(["cksum"], input=(data / "sub" / "b.bin").read_bytes(), capture_output=True).stdout
    assert lines[1] == local_sum.decode().strip()
    assert lines[2] == lines[3]  # owned by the task's user
    # and the copy went through exec sessions, recorded as such (rsync's: a look for rsync in the task, then
    # rsync itself; and the cat above)
    assert TaskSession.objects.filter(workflow=workflow, kind="exec").count() == 3


def test_download_a_file_the_task_wrote(user, local_pool, asgi_server, tmp_path):
    # given a task that wrote a file
    server = asgi_server()
    workflow = running(user, local_pool)
    wrote = osmo(server.url, user, "workflow", "exec", workflow.workflow_id, "main", "--entry",
                 f"mkdir -p {WORKSPACE}/out && printf 'result 42\\n' > {WORKSPACE}/out/r.txt")
    assert wrote.returncode == 0, wrote.stderr

    # when it is downloaded into a local folder that does not exist yet
    local = tmp_path / "got"
    done = osmo(server.url, user, "workflow", "rsync", "download", workflow.workflow_id, "main",
                f"{WORKSPACE}/out/r.txt:{local}")

    # then the file is there under its name, and nothing else (no staging left behind)
    assert done.returncode == 0, done.stderr
    assert (local / "r.txt").read_text() == "result 42\n"
    assert sorted(p.name for p in local.iterdir()) == ["r.txt"]

    # and a file the task does not have is an error that leaves nothing behind
    missing = osmo(server.url, user, "workflow", "rsync", "download", workflow.workflow_id, "main",
                   f"{WORKSPACE}/nope:{tmp_path / 'none'}")
    assert missing.returncode == 1
    assert f"has no file or folder {WORKSPACE}/nope" in missing.stderr
    assert not (tmp_path / "none").exists()


def test_the_default_task_is_the_lead_of_the_first_group(user, local_pool, asgi_server, tmp_path):
    # given two running tasks, "lead" the first group's lead, and a local file
    server = asgi_server()
    workflow = running(user, local_pool, tasks={"lead": ["sleep", "300"], "other": ["sleep", "300"]})
    (tmp_path / "f.txt").write_text("to the lead\n")

    # when uploaded without a TASK (OSMO's shape: WF LOCAL:REMOTE)
    done = osmo(server.url, user, "workflow", "rsync", "upload", workflow.workflow_id,
                f"{tmp_path / 'f.txt'}:{WORKSPACE}")

    # then it went to the lead task, not the other one
    assert done.returncode == 0, done.stderr
    assert f"{workflow.workflow_id}/lead:{WORKSPACE}" in done.stdout
    lead = osmo(server.url, user, "workflow", "exec", workflow.workflow_id, "lead", "--entry", f"cat {WORKSPACE}/f.txt")
    other = osmo(server.url, user, "workflow", "exec", workflow.workflow_id, "other", "--entry",
                 f"test -e {WORKSPACE}/f.txt")
    assert (lead.returncode, lead.stdout) == (0, "to the lead\n"), lead.stderr
    assert other.returncode == 1


@pytest.mark.parametrize("remote", ["workspace", f"{WORKSPACE}/../etc", ""])
def test_a_bad_remote_is_a_usage_error_before_any_session(user, local_pool, asgi_server, tmp_path, remote):
    # given a running task and a local file
    server = asgi_server()
    workflow = running(user, local_pool)
    (tmp_path / "f.txt").write_text("x")

    # when the REMOTE is relative, climbs with '..', or is empty
    up = osmo(server.url, user, "workflow", "rsync", "upload", workflow.workflow_id, "main",
              f"{tmp_path / 'f.txt'}:{remote}")
    down = osmo(server.url, user, "workflow", "rsync", "download", workflow.workflow_id, "main",
                f"{remote}:{tmp_path / 'out'}")

    # then both are usage errors, and no session was opened
    assert (up.returncode, down.returncode) == (2, 2), (up.stderr, down.stderr)
    assert "REMOTE" in up.stderr and "REMOTE" in down.stderr
    assert not TaskSession.objects.filter(workflow=workflow).exists()
    assert not (tmp_path / "out").exists()


def test_a_missing_local_is_an_error(user, local_pool, asgi_server, tmp_path):
    server = asgi_server()
    workflow = running(user, local_pool)

    done = osmo(server.url, user, "workflow", "rsync", "upload", workflow.workflow_id, "main",
                f"{tmp_path / 'absent'}:{WORKSPACE}")

    assert done.returncode == 1
    assert f"no such local file or folder: {tmp_path / 'absent'}" in done.stderr
    assert not TaskSession.objects.filter(workflow=workflow).exists()


def test_an_upload_over_the_size_limit_is_refused_before_sending(user, local_pool, asgi_server, tmp_path):
    # given a running task, a folder of 3000 bytes, and the limit lowered to 2000 (OSMO_RSYNC_MAX_BYTES)
    server = asgi_server()
    workflow = running(user, local_pool)
    big = tmp_path / "big"
    big.mkdir()
    (big / "one").write_bytes(b"1" * 1500)
    (big / "two").write_bytes(b"2" * 1500)

    over = osmo(server.url, user, "workflow", "rsync", "upload", workflow.workflow_id, "main",
                f"{big}:{WORKSPACE}", env={"OSMO_RSYNC_MAX_BYTES": "2000"})

    # then it is refused, nothing reached the task; under the limit the same folder goes through
    assert over.returncode == 1
    assert "3000 bytes" in over.stderr and "limit of" in over.stderr and "2000 bytes" in over.stderr
    assert not TaskSession.objects.filter(workflow=workflow).exists()
    under = osmo(server.url, user, "workflow", "rsync", "upload", workflow.workflow_id, "main",
                 f"{big}:{WORKSPACE}", env={"OSMO_RSYNC_MAX_BYTES": "4000"})
    assert under.returncode == 0, under.stderr


def test_a_task_that_is_not_running_is_the_sessions_refusal(user, local_pool, asgi_server, tmp_path):
    from tests.sessions.conftest import spec
    from workflows.services import workflow_submit

    server = asgi_server()
    workflow, _ = workflow_submit(user=user, pool_name="local", spec=spec("waiting", ["main"]))
    status = workflow.tasks.get().status
    (tmp_path / "f.txt").write_text("x")

    done = osmo(server.url, user, "workflow", "rsync", "upload", workflow.workflow_id, f"{tmp_path / 'f.txt'}:/tmp")

    assert done.returncode == 1
    assert f"is {status}, not RUNNING" in done.stderr
