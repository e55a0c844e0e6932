"""The runtime as a real process against file:// folders and moto's S3 server (docs/runtime.md)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from runtime import exitcodes
from runtime.storage import MANIFEST, StorageError, committed_files, download
from tests.runtime.conftest import MOTO_SECRET, free_port, run_runtime


def plan(command: list[str], tmp_path: Path, **fields) -> dict:
    return {"command": command, "output_dir": str(tmp_path / "out"), "input_dir": str(tmp_path / "in"), **fields}


def test_inputs_regex_files_command_and_outputs_on_file_urls(tmp_path):
    # given an input folder with two files, of which the regex keeps one
    source = tmp_path / "source"
    (source / "sub").mkdir(parents=True)
    (source / "sub" / "a.txt").write_text("alpha")
    (source / "b.log").write_text("not wanted")
    outputs = tmp_path / "published"
    artifacts = tmp_path / "artifacts" / "wf-1" / "task"
    script = "cat {{input:0}}/sub/a.txt > {{output}}/copy.txt; cat /dev/null > {{output}}/skip.bin; " \
             "cat " + str(tmp_path / "files" / "hello.txt") + "; echo \"$GREETING\""
    task = plan(["sh", "-c", script], tmp_path, env={"GREETING": "hi from {{output}}"},
                inputs=[{"url": source.as_uri(), "regex": r"\.txt$"}],
                outputs=[{"url": outputs.as_uri(), "regex": r"\.txt$"}], artifact_url=artifacts.as_uri(),
                files=[{"path": str(tmp_path / "files" / "hello.txt"), "contents": "file says {{input:0}}\n"}])

    # when
    ran = run_runtime(task, tmp_path)

    # then
    assert ran.returncode == 0, ran.stderr
    assert ran.result == {"exit_code": 0, "command_exit_code": 0, "message": ""}
    assert ran.stdout == f"file says {tmp_path}/in/0\nhi from {tmp_path}/out\n"
    assert sorted(p.name for p in (tmp_path / "in" / "0").rglob("*") if p.is_file()) == ["a.txt"]
    assert (outputs / "copy.txt").read_text() == "alpha"
    assert not (outputs / "skip.bin").exists()
    assert committed_files(outputs.as_uri()) == ["copy.txt"]
    assert committed_files(artifacts.as_uri()) == ["copy.txt", "skip.bin"]


def test_s3_upstream_output_is_downstream_input(s3, bucket, s3_server, tmp_path):
    # given an upstream task that writes two files to {{output}}, with its artifact on S3
    artifact = f"s3://{bucket}/wf-2/producer"
    (tmp_path / "up").mkdir()
    (tmp_path / "down").mkdir()
    upstream = plan(["sh", "-c", "echo one > {{output}}/one.txt; mkdir {{output}}/d; echo two > {{output}}/d/two.txt"],
                    tmp_path / "up", artifact_url=artifact)
    downstream = plan(["sh", "-c", "cat {{input:0}}/one.txt {{input:0}}/d/two.txt"], tmp_path / "down",
                      inputs=[{"url": artifact, "committed_only": True}])

    # when
    first = run_runtime(upstream, tmp_path / "up", env=s3_server.env)
    second = run_runtime(downstream, tmp_path / "down", env=s3_server.env)

    # then
    assert (first.returncode, second.returncode) == (0, 0), first.stderr + second.stderr
    assert second.stdout == "one\ntwo\n"
    assert sorted(s3.find(f"{bucket}/wf-2/producer")) == [f"{bucket}/wf-2/producer/{MANIFEST}",
                                                          f"{bucket}/wf-2/producer/d/two.txt",
                                                          f"{bucket}/wf-2/producer/one.txt"]


def test_missing_input_fails_2010_with_the_storage_text_and_credentials_masked(s3, s3_server, tmp_path):
    # given an input in a bucket that does not exist; the command would leave a marker
    marker = tmp_path / "ran"
    task = plan(["touch", str(marker)], tmp_path, inputs=[{"url": "s3://no-such-bucket-h28/data"}])

    # when
    ran = run_runtime(task, tmp_path, env={**s3_server.env, "MY_DATA_TOKEN": MOTO_SECRET})

    # then
    assert ran.returncode == exitcodes.PROCESS_EXIT_RUNTIME_FAILURE
    assert ran.result["exit_code"] == exitcodes.DOWNLOAD_FAILED == 2010
    assert ran.result["message"] == ("download of input 0 failed: s3://no-such-bucket-h28/data: no such file or "
                                     "prefix")
    assert not marker.exists()
    assert MOTO_SECRET not in ran.stderr + ran.stdout + json.dumps(ran.result)


def test_storage_error_text_is_kept_and_secrets_masked(s3, tmp_path, monkeypatch):
    # given a storage error whose text carries a credential value (the library's own words otherwise)
    monkeypatch.setenv("OSMO_DATA_SECRET", "hunter2-hunter2")

    # when
    with pytest.raises(StorageError) as caught:
        download("s3://no-such-bucket-h28/hunter2-hunter2/x.bin", str(tmp_path / "d"), committed_only=True)

    # then
    assert str(caught.value) == (f"s3://no-such-bucket-h28/****/x.bin: no committed output there (no {MANIFEST}; "
                                 "the upstream task's upload did not finish): FileNotFoundError: The specified "
                                 "bucket does not exist")


def test_denied_input_folder_fails_2010_with_the_error_text(tmp_path):
    # given an input folder owned by another user, mode 700, and the runtime run in a user namespace
    # (bubblewrap) where it has no capability over that user's files
    source = tmp_path / "secret-data"
    source.mkdir()
    (source / "x.txt").write_text("x")
    os.chown(source, 12345, 12345)
    source.chmod(0o700)
    marker = tmp_path / "ran"
    task = plan(["touch", str(marker)], tmp_path, inputs=[{"url": source.as_uri()}])
    (tmp_path / "plan.json").write_text(json.dumps(task))

    # when
    completed = subprocess.run(["bwrap", "--unshare-user", "--uid", "1000", "--gid", "1000", "--ro-bind", "/", "/",
                                "--dev", "/dev", "--proc", "/proc", "--bind", str(tmp_path), str(tmp_path), "--",
                                sys.executable, "-m", "runtime", str(tmp_path / "plan.json"), "--result",
                                str(tmp_path / "result.json")],
                               capture_output=True, text=True, timeout=60)

    # then
    result = json.loads((tmp_path / "result.json").read_text())
    assert completed.returncode == exitcodes.PROCESS_EXIT_RUNTIME_FAILURE, completed.stderr
    assert result["exit_code"] == 2010
    assert result["message"] == (f"download of input 0 failed: {source.as_uri()}: PermissionError: [Errno 13] "
                                 f"Permission denied: '{source}'")
    assert not marker.exists()


def test_output_bucket_refusing_writes_fails_2012_and_keeps_the_command_code(s3, s3_server, tmp_path):
    # given a command that exits 3 after writing an output, and an output bucket that does not exist
    task = plan(["sh", "-c", "echo data > {{output}}/r.txt; exit 3"], tmp_path,
                outputs=[{"url": "s3://no-such-bucket-h28/out"}])

    # when
    ran = run_runtime(task, tmp_path, env=s3_server.env)

    # then
    assert ran.returncode == exitcodes.PROCESS_EXIT_RUNTIME_FAILURE
    assert ran.result == {
        "exit_code": 2012, "command_exit_code": 3,
        "message": "upload failed: s3://no-such-bucket-h28/out: FileNotFoundError: The specified bucket does not "
                   "exist (the command exited with code 3)"}


def test_a_command_failure_is_its_own_exit_code(tmp_path):
    # when
    ran = run_runtime(plan(["sh", "-c", "echo oops >&2; exit 7"], tmp_path), tmp_path)

    # then
    assert ran.returncode == 7
    assert ran.result == {"exit_code": 7, "command_exit_code": 7, "message": "the command exited with code 7"}
    assert ran.stderr.splitlines()[0] == "oops"


def test_a_regex_that_does_not_compile_is_refused_before_anything_runs(tmp_path):
    # given
    marker = tmp_path / "ran"
    task = plan(["touch", str(marker)], tmp_path, inputs=[{"url": tmp_path.as_uri(), "regex": "(unclosed"}])

    # when
    ran = run_runtime(task, tmp_path)

    # then
    assert ran.result["exit_code"] == exitcodes.UNKNOWN_RUNTIME_ERROR
    assert ran.result["message"] == ("the task plan is invalid: inputs.0.regex: does not compile: missing ), "
                                     "unterminated subpattern at position 0")
    assert not marker.exists()
    assert not (tmp_path / "out").exists()


def test_killed_during_upload_leaves_nothing_visible_downstream(tmp_path):
    # given a task whose output holds 20 files and, last in upload order, one whose place in the store is
    # a FIFO nobody reads: the upload copies the files, then cannot write that one (a FIFO in the output
    # itself is no file and is left out: see the test of links below)
    store = tmp_path / "store" / "producer"
    store.mkdir(parents=True)
    os.mkfifo(store / "zz-fifo")
    script = "for i in $(seq 10 29); do echo $i > {{output}}/f$i.txt; done; echo last > {{output}}/zz-fifo"
    task = plan(["sh", "-c", script], tmp_path, artifact_url=store.as_uri())
    (tmp_path / "plan.json").write_text(json.dumps(task))
    process = subprocess.Popen([sys.executable, "-m", "runtime", str(tmp_path / "plan.json"), "--result",
                                str(tmp_path / "result.json")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):  # until the upload has started writing files
            if (store / "f29.txt").exists():
                break
            time.sleep(0.05)
        # (a runtime whose copy of the FIFO failed at once has exited with 2012 by now: killing it then
        # changes nothing, and nothing may be committed either way)

        # when the runtime is killed mid-upload
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()

    # then the files are there, but not committed: a downstream task refuses them
    assert (store / "f10.txt").read_text() == "10\n"
    assert committed_files(store.as_uri()) is None
    downstream = tmp_path / "down"
    downstream.mkdir()
    marker = downstream / "ran"
    ran = run_runtime(plan(["touch", str(marker)], downstream, inputs=[{"url": store.as_uri(),
                                                                        "committed_only": True}]), downstream)
    assert ran.result["exit_code"] == 2010
    assert ran.result["message"] == (f"download of input 0 failed: {store.as_uri()}: no committed output there "
                                     f"(no {MANIFEST}; the upstream task's upload did not finish): FileNotFoundError: "
                                     f"[Errno 2] No such file or directory: '{store}/{MANIFEST}'")
    assert not marker.exists()
    assert not (downstream / "in" / "0").exists() or not any((downstream / "in" / "0").iterdir())


def test_an_output_never_follows_a_link_out_of_its_folder(tmp_path):
    """Replays the audit's finding: ``ln -s <checkout>/var/osmo.sqlite3 {{output}}/db`` copied the
    service's database into the artifact store. A link within the output is copied as its file."""
    # given an output holding a file, a link to it, a link to a secret outside, a link to a folder
    # outside and a FIFO
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "db").write_text("every token")
    store = tmp_path / "store"
    script = (f"echo kept > {{{{output}}}}/kept.txt; ln -s kept.txt {{{{output}}}}/alias.txt; "
              f"ln -s {secret}/db {{{{output}}}}/db; ln -s {secret} {{{{output}}}}/dir; mkfifo {{{{output}}}}/fifo")

    # when
    ran = run_runtime(plan(["sh", "-c", script], tmp_path, artifact_url=store.as_uri()), tmp_path)

    # then only what lies in the output is uploaded, and the log names what was left out
    assert ran.result["exit_code"] == 0
    assert sorted(path.name for path in store.iterdir()) == [MANIFEST, "alias.txt", "kept.txt"]
    assert (store / "alias.txt").read_text() == "kept\n"
    assert committed_files(store.as_uri()) == ["alias.txt", "kept.txt"]
    assert "[osmo] not uploaded (links leading out of {{output}}, or not files): db, fifo" in ran.stderr


def test_a_local_input_never_follows_a_link_out_of_its_folder(tmp_path):
    # given an input folder with a file and a link to a secret beside it
    (tmp_path / "secret").write_text("every token")
    source = tmp_path / "source"
    source.mkdir()
    (source / "data.txt").write_text("data")
    (source / "db").symlink_to(tmp_path / "secret")

    # when
    ran = run_runtime(plan(["ls", "{{input:0}}"], tmp_path, inputs=[{"url": source.as_uri()}]), tmp_path)

    # then
    assert ran.result["exit_code"] == 0
    assert sorted(os.listdir(tmp_path / "in" / "0")) == ["data.txt"]
    assert "[osmo] not downloaded (links leading out of the input, or not files): db" in ran.stderr


def test_a_checkpoint_is_uploaded_while_the_command_runs(tmp_path):
    # given a command that only exits once its checkpoint folder was uploaded (or fails after 30 s)
    store = tmp_path / "ckpt"
    script = (f"mkdir -p {tmp_path}/ck; echo step1 > {tmp_path}/ck/state.json; "
              f"for i in $(seq 600); do [ -f {store}/{MANIFEST} ] && exit 0; sleep 0.05; done; exit 9")
    task = plan(["sh", "-c", script], tmp_path,
                checkpoints=[{"path": f"{tmp_path}/ck", "url": store.as_uri(), "frequency_s": 0.1}])

    # when
    ran = run_runtime(task, tmp_path)

    # then
    assert ran.result == {"exit_code": 0, "command_exit_code": 0, "message": ""}, ran.stderr
    assert committed_files(store.as_uri()) == ["state.json"]
    assert "[osmo] checkpointing" in ran.stderr


class _Barrier(BaseHTTPRequestHandler):
    answers: list[dict] = []
    seen: list[tuple[str, str]] = []

    def do_POST(self):  # noqa: N802 (http.server's name)
        type(self).seen.append((self.path, self.headers.get("Authorization", "")))
        answer = dict(self.answers[min(len(self.seen) - 1, len(self.answers) - 1)])
        status = answer.pop("_status", 200)
        body = json.dumps(answer).encode()
        self.send_response(status)
        if status == 503:
            self.send_header("Retry-After", "5")
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def barrier_server():
    class Handler(_Barrier):
        answers: list[dict] = []
        seen: list[tuple[str, str]] = []

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server, Handler
    server.shutdown()
    server.server_close()


def test_the_command_starts_once_the_barrier_opens(barrier_server, tmp_path):
    # given a barrier that opens on the third call
    server, handler = barrier_server
    handler.answers = [{"arrived": 1, "size": 2, "open": False}, {"arrived": 1, "size": 2, "open": False},
                       {"arrived": 2, "size": 2, "open": True}]
    url = f"http://127.0.0.1:{server.server_address[1]}/api/runtime/barrier/"
    task = plan(["echo", "started"], tmp_path, barrier={"url": url, "token": "tok-1", "group_size": 2})

    # when
    ran = run_runtime(task, tmp_path)

    # then
    assert ran.result["exit_code"] == 0, ran.stderr
    assert ran.stdout == "started\n"
    assert handler.seen == [("/api/runtime/barrier/", "Bearer tok-1")] * 3
    assert "[osmo] barrier open: 2/2 tasks of the group arrived" in ran.stderr


def test_a_barrier_that_never_fills_ends_in_the_start_timeout(barrier_server, tmp_path):
    # given a barrier that stays at 1 of 2
    server, handler = barrier_server
    handler.answers = [{"arrived": 1, "size": 2, "open": False}]
    marker = tmp_path / "ran"
    url = f"http://127.0.0.1:{server.server_address[1]}/b/"
    task = plan(["touch", str(marker)], tmp_path, barrier={"url": url, "token": "t", "group_size": 2},
                start_timeout_s=1.0)

    # when
    ran = run_runtime(task, tmp_path)

    # then
    assert ran.result == {"exit_code": 3005, "command_exit_code": None,
                          "message": "start timeout: the group's barrier did not fill within 1 s (1/2 tasks arrived)"}
    assert not marker.exists()


def _fake_clock():
    """A clock whose sleeps advance it at once, and the sleeps it was asked for."""
    from runtime.barrier import BarrierClock

    slept: list[float] = []
    now = [0.0]

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    return BarrierClock(now=lambda: now[0], sleep=sleep), slept


DATABASE_UNAVAILABLE = {"_status": 503, "code": "database_unavailable",
                        "message": "The database is unavailable; retry shortly.", "details": {}}


def test_a_service_outage_is_waited_out_until_the_start_deadline(barrier_server):
    """Replays a PostgreSQL restart of about 20 s: the barrier answered 503 six times in 15.5 s and
    every task of the groups starting then failed 2021 (docs/operations.md, "Failure answers")."""
    # given a barrier that answers the service's 503 envelope eight times (45.5 s of backoff), then opens
    from runtime.barrier import barrier_wait
    from runtime.plan import BarrierSpec

    server, handler = barrier_server
    handler.answers = [DATABASE_UNAVAILABLE] * 8 + [{"arrived": 2, "size": 2, "open": True}]
    spec = BarrierSpec(url=f"http://127.0.0.1:{server.server_address[1]}/api/runtime/barrier/", token="t",
                       group_size=2)
    clock, slept = _fake_clock()
    lines: list[str] = []

    # when
    arrived = barrier_wait(spec, deadline_s=600, clock=clock, log=lines.append)

    # then the runtime kept asking, never sooner than the service's Retry-After (5 s), backing off to at
    # most 10 s, and the barrier opened
    assert arrived == 2
    assert slept == [5.0, 5.0, 5.0, 5.0, 8.0, 10.0, 10.0, 10.0]
    assert len(handler.seen) == 9
    assert lines[0] == f"service unavailable at {spec.url} (HTTP 503); retrying until the start timeout (600 s)"
    assert lines[-1] == "barrier open: 2/2 tasks of the group arrived"


def test_service_unreachable_until_the_start_deadline_is_a_clear_failure(tmp_path):
    # given a barrier URL on a port nobody listens on
    from runtime.barrier import BarrierError, barrier_wait
    from runtime.plan import BarrierSpec

    port = free_port()
    spec = BarrierSpec(url=f"http://127.0.0.1:{port}/api/runtime/barrier/", token="t", group_size=2)
    clock, slept = _fake_clock()

    # when
    with pytest.raises(BarrierError) as caught:
        barrier_wait(spec, deadline_s=60, clock=clock)

    # then it was asked until the deadline (the last wait shortened to end there), then 2021
    assert slept == [0.5, 1.0, 2.0, 4.0, 8.0, 10.0, 10.0, 10.0, 10.0, 4.5]
    assert caught.value.code == exitcodes.SERVICE_TIMEOUT == 2021
    assert str(caught.value) == (f"the service at {spec.url} could not be reached within the start timeout "
                                 "(60 s, 11 attempts): URLError: [Errno 111] Connection refused")


def test_a_refused_token_fails_at_once_whatever_the_deadline(barrier_server):
    # given a barrier that refuses the token
    from runtime.barrier import BarrierError, barrier_wait
    from runtime.plan import BarrierSpec

    server, handler = barrier_server
    handler.answers = [{"_status": 401, "code": "authentication_failed"}]
    spec = BarrierSpec(url=f"http://127.0.0.1:{server.server_address[1]}/b/", token="t", group_size=2)
    clock, slept = _fake_clock()

    # when
    with pytest.raises(BarrierError) as caught:
        barrier_wait(spec, deadline_s=600, clock=clock)

    # then
    assert (caught.value.code, slept, len(handler.seen)) == (exitcodes.INVALID_TOKEN, [], 1)


def test_a_denied_s3_input_fails_2010_with_the_storage_text_and_the_secret_masked(denied_s3, tmp_path):
    # given a user without any policy on an S3 server that enforces IAM
    marker = tmp_path / "ran"
    task = plan(["touch", str(marker)], tmp_path, inputs=[{"url": f"s3://{denied_s3.bucket}/data"}])

    # when
    ran = run_runtime(task, tmp_path, env=denied_s3.env)

    # then
    assert ran.result["exit_code"] == 2010
    assert ran.result["message"] == f"download of input 0 failed: s3://{denied_s3.bucket}/data: PermissionError: " \
                                    "Forbidden"
    assert not marker.exists()
    assert denied_s3.secret not in ran.stdout + ran.stderr + json.dumps(ran.result)


def test_an_output_bucket_denying_writes_fails_2012_and_keeps_the_command_code(denied_s3, tmp_path):
    # given
    task = plan(["sh", "-c", "echo r > {{output}}/r.txt; exit 5"], tmp_path,
                outputs=[{"url": f"s3://{denied_s3.bucket}/results"}])

    # when
    ran = run_runtime(task, tmp_path, env=denied_s3.env)

    # then
    assert (ran.result["exit_code"], ran.result["command_exit_code"]) == (2012, 5)
    assert ran.result["message"].startswith(f"upload failed: s3://{denied_s3.bucket}/results: PermissionError: ")
    assert ran.result["message"].endswith("(the command exited with code 5)")


def test_no_barrier_request_outlasts_the_start_deadline_by_more_than_half_a_second(monkeypatch):
    """A finding of the review: every request could wait 10 s, so the last one ended up to 10 s after
    the start timeout."""
    # given a service that never answers within the timeout it is given
    import urllib.error

    from runtime import barrier
    from runtime.plan import BarrierSpec

    timeouts: list[float] = []

    def silent(url: str, token: str, timeout: float) -> dict:
        timeouts.append(timeout)
        raise urllib.error.URLError("timed out")

    monkeypatch.setattr(barrier, "_post", silent)
    clock, slept = _fake_clock()

    # when the start timeout is 3 s
    with pytest.raises(barrier.BarrierError) as caught:
        barrier.barrier_wait(BarrierSpec(url="http://svc/b/", token="t", group_size=2), deadline_s=3, clock=clock)

    # then each request had at most what was left of the 3 s (and at least half a second), then 2021
    assert timeouts == [3.0, 2.5, 1.5, 0.5]
    assert slept == [0.5, 1.0, 1.5]
    assert caught.value.code == exitcodes.SERVICE_TIMEOUT
