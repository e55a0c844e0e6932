"""``osmo data upload | download | list | delete`` (docs/cli.md "Data"): the installed console script against
a live server, moving data on its own machine through the runtime's storage layer, to ``file://`` and to
moto's standalone S3 server with the user's data credential fetched from the service."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from credentials.services import credential_set
from tests.runtime.conftest import s3_server  # noqa: F401  # moto's S3 server, started once per session

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "moto-secret-of-alice-0123456789"


def tree(root: Path) -> dict[str, str]:
    return {str(path.relative_to(root)): path.read_text() for path in sorted(root.rglob("*")) if path.is_file()}


@pytest.fixture
def source(tmp_path) -> Path:
    folder = tmp_path / "src" / "shards"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.txt").write_text("a")
    (folder / "b.json").write_text("{}")
    (folder / "sub" / "c.txt").write_text("c")
    (tmp_path / "src" / "notes.md").write_text("notes")
    return tmp_path / "src"


def test_file_urls_upload_list_download_delete_without_a_credential(osmo_process, source, tmp_path):
    store = tmp_path / "store"
    url = f"file://{store}/run1"
    bare = {"OSMO_URL": "", "OSMO_TOKEN": ""}  # a file URL needs no login

    # when
    up = osmo_process("data", "upload", url, str(source / "shards"), str(source / "notes.md"), env=bare)
    uploaded = tree(store / "run1")
    contents = osmo_process("data", "upload", f"file://{store}/flat", f"{source / 'shards'}/*", "-x", r"\.txt$",
                            env=bare)
    top = osmo_process("data", "list", url, env=bare)
    everything = osmo_process("data", "list", url, "--recursive", env=bare)
    down = osmo_process("data", "download", f"{url}/shards", str(tmp_path / "back"), env=bare)
    deleted = osmo_process("data", "delete", url, "--regex", r"\.txt$", env=bare)
    after = osmo_process("data", "list", url, "-r", "--json", env=bare)

    # then
    assert up.returncode == 0, up.stderr
    assert up.stdout.startswith(f"Uploaded 4 file(s), 9B, to {url} in ")
    assert uploaded == {"notes.md": "notes", "shards/a.txt": "a", "shards/b.json": "{}", "shards/sub/c.txt": "c"}
    assert tree(store / "flat") == {"a.txt": "a", "sub/c.txt": "c"}
    assert contents.stdout.startswith("Uploaded 2 file(s)")
    assert top.stdout == "notes.md\nshards/\n\nTotal 2 objects found\n"
    assert everything.stdout.splitlines()[:4] == ["notes.md", "shards/a.txt", "shards/b.json", "shards/sub/c.txt"]
    assert down.returncode == 0, down.stderr
    assert tree(tmp_path / "back") == {"a.txt": "a", "b.json": "{}", "sub/c.txt": "c"}
    assert deleted.stdout == f"Deleted 2 object(s) at {url}.\n"
    assert [entry["path"] for entry in json.loads(after.stdout)] == ["notes.md", "shards/b.json"]


def test_s3_through_the_users_data_credential(osmo_process, s3_server, user, source, tmp_path):  # noqa: F811
    import boto3

    boto3.client("s3", endpoint_url=s3_server.endpoint, region_name="us-east-1", aws_access_key_id="x",
                 aws_secret_access_key="y").create_bucket(Bucket="alice-data")
    made = osmo_process("credential", "set", "moto", "--type", "data", "--endpoint", "s3://alice-data",
                        "--region", "us-east-1", "--override-url", s3_server.endpoint, "--access-key-id", "alice-key",
                        "--secret-access-key-stdin", input=SECRET)
    assert made.stdout == "Credential moto created (data: access_key, access_key_id, endpoint, override_url, region).\n"
    url = "s3://alice-data/experiments/e1"
    clean = {"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_ENDPOINT_URL_S3": ""}  # nothing ambient

    # when
    up = osmo_process("data", "upload", url, str(source / "shards"), str(source / "notes.md"), "-p", "2", "-T", "4",
                      env=clean)
    listed = osmo_process("data", "list", url, "-r", env=clean)
    top = osmo_process("data", "list", url, env=clean)
    down = osmo_process("data", "download", url, str(tmp_path / "back"), "-x", "shards/", "--threads", "3",
                        env=clean)
    no_threads = osmo_process("data", "download", url, str(tmp_path / "none"), "--threads", "0", env=clean)
    (tmp_path / "back" / "shards" / "a.txt").unlink()
    resumed = osmo_process("data", "download", url, str(tmp_path / "back"), "-x", "shards/", "--resume", env=clean)
    deleted = osmo_process("data", "delete", f"{url}/shards", env=clean)
    left = osmo_process("data", "list", "s3://alice-data/experiments", "--recursive", env=clean)

    # then
    assert up.returncode == 0, up.stderr
    assert up.stdout.startswith(f"Uploaded 4 file(s), 9B, to {url} in ")
    assert listed.stdout == ("notes.md\nshards/a.txt\nshards/b.json\nshards/sub/c.txt\n\nTotal 4 objects found\n")
    assert top.stdout == "notes.md\nshards/\n\nTotal 2 objects found\n"
    assert down.returncode == 0, down.stderr
    assert tree(tmp_path / "back") == {"shards/a.txt": "a", "shards/b.json": "{}", "shards/sub/c.txt": "c"}
    assert no_threads.returncode == 2 and "--threads" in no_threads.stderr and not (tmp_path / "none").exists()
    assert resumed.stdout.startswith(f"Downloaded 1 file(s) (2 already there), 1B, from {url} to ")
    assert deleted.stdout == f"Deleted 3 object(s) at {url}/shards.\n"
    assert left.stdout == "e1/notes.md\n\nTotal 1 objects found\n"
    outputs = "".join(run.stdout + run.stderr for run in (up, listed, down, resumed, deleted, left))
    assert SECRET not in outputs and "Traceback" not in outputs


def test_a_url_without_a_credential_or_of_another_scheme_is_refused_naming_it(osmo_process, user, other_user,
                                                                               source):
    credential_set(owner=other_user, name="bobs", kind="data", values={
        "endpoint": "s3://bobs-bucket", "access_key_id": "bob", "access_key": "bob-secret-0123456789"})
    credential_set(owner=user, name="near", kind="data", values={
        "endpoint": "s3://alice-data/only-here", "access_key_id": "a", "access_key": "alice-secret-0123456789"})

    # when
    bobs = osmo_process("data", "list", "s3://bobs-bucket/x")
    beside = osmo_process("data", "upload", "s3://alice-data/only-here-not", str(source / "notes.md"))
    ftp = osmo_process("data", "download", "ftp://host/x", "/tmp/x")
    missing_path = osmo_process("data", "upload", "file:///tmp/x", "/no/such/path")

    # then: bob's credential is bob's; a prefix covers only what lies below it
    for run in (bobs, beside):
        assert run.returncode == 2, run.stderr
        lines = run.stderr.splitlines()
        assert lines[0] == "error: You have no data credential for this storage URL."
        assert lines[1].startswith("  url: you have no data credential for 's3://")
        assert "osmo credential set NAME --type data --endpoint s3://" in lines[1]
    assert ftp.returncode == 2 and ftp.stderr.strip() == (
        "error: URL: 'ftp://host/x' is not a storage URL: write SCHEME://..., SCHEME one of s3, gs, azure, tos, "
        "swift, file")
    assert missing_path.returncode == 2 and missing_path.stderr.strip() == (
        "error: PATH /no/such/path: no such file or folder")
    assert "bob-secret" not in bobs.stdout + bobs.stderr


def test_the_credential_endpoint_answers_the_owner_only_and_names_url(user_client, user, other_user):
    credential_set(owner=user, name="wide", kind="data", values={
        "endpoint": "s3://data", "access_key_id": "w", "access_key": "wide-secret-0123456789"})
    credential_set(owner=user, name="narrow", kind="data", values={
        "endpoint": "s3://data/team", "access_key_id": "n", "access_key": "narrow-secret-0123456789"})

    # when
    narrow = user_client.post("/api/data/credential/", {"url": "s3://data/team/x"}, format="json")
    wide = user_client.post("/api/data/credential/", {"url": "s3://data/other"}, format="json")
    local = user_client.post("/api/data/credential/", {"url": "file:///tmp/x"}, format="json")
    empty = user_client.post("/api/data/credential/", {}, format="json")
    user_client.force_authenticate(other_user)
    theirs = user_client.post("/api/data/credential/", {"url": "s3://data/team/x"}, format="json")

    # then: the longest endpoint covering the URL wins
    assert narrow.status_code == 200 and narrow.json()["credential"] == "narrow"
    assert narrow.json()["values"]["access_key"] == "narrow-secret-0123456789"
    assert narrow["Cache-Control"] == "no-store"
    assert wide.json()["credential"] == "wide"
    for answer in (local, empty, theirs):
        assert answer.status_code == 400
        assert [error["path"] for error in answer.json()["details"]["errors"]] == ["url"]
    assert theirs.json()["code"] == "data_credential_missing"


def test_a_tasks_token_cannot_read_a_data_credential_but_lists_its_tasks_and_resources(user, api_client):
    from tests.workflows.test_runtime_api import placed
    from tests.workflows.test_task_api_token import as_task

    credential_set(owner=user, name="wide", kind="data", values={
        "endpoint": "s3://data", "access_key_id": "w", "access_key": "wide-secret-0123456789"})
    workflow, [task, _] = placed(user)
    client = as_task(api_client, task)

    # when
    refused = client.post("/api/data/credential/", {"url": "s3://data/x"}, format="json")
    tasks = client.get("/api/tasks/", {"all_users": "true"})
    resources = client.get("/api/resources/")

    # then: tasks get their credentials through their spec, never through this endpoint
    assert refused.status_code == 403
    assert "wide-secret" not in refused.content.decode()
    assert tasks.status_code == 200 and {row["workflow_id"] for row in tasks.json()["results"]} == {
        workflow.workflow_id}
    assert resources.status_code == 200, resources.json()


def test_override_url_must_be_an_http_url(user_client):
    answer = user_client.put("/api/credentials/m/", {"kind": "data", "values": {
        "endpoint": "s3://b", "access_key_id": "a", "access_key": "k", "override_url": "minio:9000"}}, format="json")
    assert answer.status_code == 400
    assert answer.json()["details"]["errors"] == [
        {"path": "values.override_url", "message": "must be an http(s) URL like http://minio:9000"}]


def test_a_terminal_gets_a_progress_bar_on_stderr_and_a_pipe_does_not(osmo_process, source, tmp_path, cli_env):
    import os
    import pty
    import select
    import subprocess

    from tests.cli.conftest import OSMO_SCRIPT, ROOT

    # when stderr is a terminal
    master, slave = pty.openpty()
    process = subprocess.Popen([str(OSMO_SCRIPT), "data", "upload", f"file://{tmp_path}/tty", f"{source}/*"],
                               stdout=subprocess.PIPE, stderr=slave, cwd=ROOT,
                               env={**os.environ, **cli_env, "COLUMNS": "120", "TERM": "xterm"})
    os.close(slave)
    stdout = process.stdout.read().decode()
    process.wait(timeout=60)
    shown = b""
    while select.select([master], [], [], 0.5)[0]:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the other end is closed
            break
        if not chunk:
            break
        shown += chunk
    os.close(master)
    piped = osmo_process("data", "upload", f"file://{tmp_path}/pipe", f"{source}/*")

    # then the bar counts the files there, and the pipe's stderr stays empty
    assert process.returncode == 0 and stdout.startswith("Uploaded 4 file(s)")
    assert b"upload to file://" in shown and b"4/4" in shown
    assert piped.returncode == 0 and piped.stderr == ""


def test_data_check_tries_each_access_with_the_users_credential(osmo_process, s3_server, user,  # noqa: F811
                                                               tmp_path):
    import boto3

    s3 = boto3.client("s3", endpoint_url=s3_server.endpoint, region_name="us-east-1", aws_access_key_id="x",
                      aws_secret_access_key="y")
    s3.create_bucket(Bucket="alice-check")
    s3.put_object(Bucket="alice-check", Key="runs/r1/a.txt", Body=b"a")
    for name, endpoint in (("checked", "s3://alice-check"), ("ghost", "s3://ghost-bucket")):
        credential_set(owner=user, name=name, kind="data", values={
            "endpoint": endpoint, "access_key_id": "alice-key", "access_key": SECRET, "region": "us-east-1",
            "override_url": s3_server.endpoint})
    clean = {"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_ENDPOINT_URL_S3": ""}
    bare = {"OSMO_URL": "", "OSMO_TOKEN": ""}  # a file URL needs no login
    (tmp_path / "here").mkdir()

    # when
    read = osmo_process("data", "check", "s3://alice-check/runs/r1", env=clean)
    empty_prefix = osmo_process("data", "check", "s3://alice-check/runs/none", "-a", "READ", env=clean)
    write = osmo_process("data", "check", "s3://alice-check/runs/new", "--access-type", "write", env=clean)
    delete = osmo_process("data", "check", "s3://alice-check/runs", "-a", "DELETE", env=clean)
    ghost = osmo_process("data", "check", "s3://ghost-bucket/x", env=clean)
    ghost_write = osmo_process("data", "check", "s3://ghost-bucket/x", "-a", "WRITE", env=clean)
    uncovered = osmo_process("data", "check", "s3://nobodys-bucket/x", env=clean)
    local_read = osmo_process("data", "check", f"file://{tmp_path}/here", env=bare)
    local_missing = osmo_process("data", "check", f"file://{tmp_path}/nowhere", env=bare)
    local_write = osmo_process("data", "check", f"file://{tmp_path}/here/new/deeper", "-a", "WRITE", env=bare)
    bad_type = osmo_process("data", "check", f"file://{tmp_path}", "-a", "EXECUTE", env=bare)
    bad_url = osmo_process("data", "check", "ftp://host/x", env=bare)

    # then: OSMO's one line of JSON; a failure says why and exits 1; the checks leave nothing behind
    for run in (read, empty_prefix, write, delete, local_read, local_write):
        assert (run.returncode, run.stdout) == (0, '{"status": "pass"}\n'), run.stderr
    assert ghost.returncode == 1
    assert json.loads(ghost.stdout) == {"status": "fail", "error": "s3://ghost-bucket/x: read access: "
                                        "FileNotFoundError: bucket 'ghost-bucket' does not exist or is not reachable"}
    assert ghost_write.returncode == 1
    assert json.loads(ghost_write.stdout)["error"].startswith("s3://ghost-bucket/x: write access: ")
    assert uncovered.returncode == 1
    assert json.loads(uncovered.stdout)["error"].startswith("you have no data credential for 's3://nobodys-bucket/x'")
    assert local_missing.returncode == 1
    assert json.loads(local_missing.stdout)["error"].startswith(f"file://{tmp_path}/nowhere: read access: ")
    assert [item["Key"] for item in s3.list_objects_v2(Bucket="alice-check")["Contents"]] == ["runs/r1/a.txt"]
    assert [path.name for path in (tmp_path / "here").iterdir()] == []
    assert bad_type.returncode == 2 and "EXECUTE" in bad_type.stderr
    assert bad_url.returncode == 2 and bad_url.stderr.startswith("error: URL: 'ftp://host/x' is not a storage URL")
    outputs = "".join(run.stdout + run.stderr for run in (read, write, delete, ghost, ghost_write, uncovered))
    assert SECRET not in outputs and "Traceback" not in outputs
