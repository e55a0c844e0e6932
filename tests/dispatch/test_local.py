"""The local backend with real bubblewrap processes: phases, logs, exit codes, cancel, its own /tmp."""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from credentials.secrets import SecretPayload
from scheduler.dispatch import backend_for
from scheduler.dispatch.base import DispatchPermanentError, PodState
from scheduler.dispatch.local import LocalBackend
from scheduler.dispatch.pod.request import PodRequest


def request(name: str, *, plan: dict | None = None, command=(), group: str = "g", pool: str = "local") -> PodRequest:
    return PodRequest(pod_name=name, namespace="osmo", node_name="slot-1", workflow_id="wf-1", group=group, task=name,
                      pool=pool, image="ignored", command=tuple(command),
                      runtime_plan=json.dumps(plan) if plan is not None else "")


def running_in_group(pgid: int) -> list[int]:
    """The processes of a process group that still run (zombies left for a reaper do not count)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            found.append(int(stat.parent.name))
    return found


def wait_done(backend: LocalBackend, pods: list[PodRequest], timeout: float = 60) -> dict[str, PodState]:
    deadline = time.monotonic() + timeout
    while True:
        states = backend.pod_states(pods, now=datetime.now(tz=UTC))
        if all(state.phase in ("Succeeded", "Failed") for state in states.values()) or time.monotonic() > deadline:
            return states
        time.sleep(0.05)


def test_a_task_runs_in_its_own_tmp_and_its_log_and_code_are_read_back(local):
    # given two tasks that both write /tmp/run.sh with their own contents, then run it
    pods = [request(name, plan={"command": ["sh", "-c", f"echo 'echo I am {name}' > /tmp/run.sh; sleep 0.2; "
                                                        "sh /tmp/run.sh; ls /tmp"]})
            for name in ("first", "second")]

    # when
    for pod in pods:
        local.create_pod(pod)
    states = wait_done(local, pods)

    # then
    assert states == {"first": PodState("Succeeded", 0), "second": PodState("Succeeded", 0)}
    now = datetime.now(tz=UTC)
    # (a checkout or virtualenv under the host's /tmp is bound back into the sandbox's /tmp, read-only)
    bound_back = sorted({Path(path).relative_to("/tmp").parts[0]
                         for path in (os.path.realpath(sys.prefix), str(Path(__file__).resolve().parents[2]))
                         if Path(path).is_relative_to("/tmp")})
    for pod in pods:
        lines = local.pod_log(pod, tail=100, now=now).lines
        assert [line for line in lines if not line.startswith("[osmo]")] == [f"I am {pod.task}",
                                                                              *sorted(["run.sh", *bound_back])]
    assert not Path("/tmp/run.sh").exists() or Path("/tmp/run.sh").read_text() not in ("echo I am first\n",
                                                                                      "echo I am second\n")


def test_the_exit_code_and_the_runtime_message_of_a_failed_task(local):
    # given
    pod = request("fails", command=["sh", "-c", "echo bad >&2; exit 42"])

    # when
    local.create_pod(pod)
    states = wait_done(local, [pod])

    # then
    assert states == {"fails": PodState("Failed", 42, "the command exited with code 42")}
    assert "bad" in local.pod_log(pod, tail=10, now=datetime.now(tz=UTC)).lines


def test_a_runtime_failure_reports_the_osmo_code(local, tmp_path):
    # given an input that does not exist
    pod = request("no-input", plan={"command": ["true"], "inputs": [{"url": (tmp_path / "missing").as_uri()}]})

    # when
    local.create_pod(pod)
    states = wait_done(local, [pod])

    # then
    missing = (tmp_path / "missing").as_uri()
    assert states["no-input"] == PodState("Failed", 2010, f"download of input 0 failed: {missing}: no such file or "
                                                          "prefix")


def test_outputs_go_to_a_file_url_outside_the_sandbox(local, tmp_path):
    # given
    store = tmp_path / "store"
    pod = request("writer", plan={"command": ["sh", "-c", "echo result > {{output}}/r.txt"],
                                  "artifact_url": store.as_uri()})

    # when
    local.create_pod(pod)
    states = wait_done(local, [pod])

    # then
    assert states["writer"] == PodState("Succeeded", 0)
    assert (store / "r.txt").read_text() == "result\n"


def test_create_is_idempotent_and_listing_shows_the_pools_pods(local):
    # given
    pod = request("once", command=["sh", "-c", "echo x >> /tmp/count; cat /tmp/count"])

    # when
    local.create_pod(pod)
    local.create_pod(pod)
    wait_done(local, [pod])

    # then
    assert [line for line in local.pod_log(pod, tail=10, now=datetime.now(tz=UTC)).lines
            if not line.startswith("[osmo]")] == ["x"]
    listed = local.pods_list(namespace="osmo", pool="local")
    assert [(p.name, p.phase, p.node) for p in listed] == [("once", "Succeeded", "slot-1")]
    assert local.pods_list(namespace="osmo", pool="other") == []


def test_delete_stops_a_running_task_and_removes_its_pod(local, tmp_path):
    # given a task that would run for a minute, and writes a marker afterwards
    marker = tmp_path / "store"
    pod = request("long", plan={"command": ["sh", "-c", "sleep 60; echo late > {{output}}/late.txt"],
                                "artifact_url": marker.as_uri()})
    local.create_pod(pod)
    deadline = time.monotonic() + 30
    while local.pod_states([pod], now=datetime.now(tz=UTC))["long"].phase != "Running" and time.monotonic() < deadline:
        time.sleep(0.05)
    pid = int((local.pod_dir("osmo", "long") / "pid").read_text())
    while len(running_in_group(pid)) < 4 and time.monotonic() < deadline:  # supervisor, bwrap, runtime, command
        time.sleep(0.05)
    assert len(running_in_group(pid)) >= 4

    # when
    local.delete_pod(namespace="osmo", pod_name="long", grace_seconds=10)

    # then
    assert local.pod_states([pod], now=datetime.now(tz=UTC)) == {"long": PodState("Missing")}
    assert not local.pod_dir("osmo", "long").exists()
    assert running_in_group(pid) == []
    assert not (marker / "late.txt").exists()
    with pytest.raises(DispatchPermanentError):
        local.pod_log(pod, tail=10, now=datetime.now(tz=UTC))
    local.delete_pod(namespace="osmo", pod_name="long")  # gone: success


def test_gang_finished_pods_delete_takes_only_finished_pods(local):
    # given one finished and one running pod of the same gang
    done = request("done", command=["true"])
    running = request("running", command=["sleep", "60"])
    local.create_pod(done)
    local.create_pod(running)
    wait_done(local, [done])

    # when
    local.gang_finished_pods_delete(namespace="osmo", pool="local", workflow_id="wf-1", group="g")

    # then
    assert not local.pod_dir("osmo", "done").exists()
    assert local.pod_dir("osmo", "running").exists()


def test_a_task_without_command_is_refused(local):
    # when / then
    with pytest.raises(DispatchPermanentError, match="the local backend needs a command"):
        local.create_pod(request("nocmd"))
    assert not local.pod_dir("osmo", "nocmd").exists()


def test_backend_for_builds_the_local_backend_from_the_environment(tmp_path, monkeypatch):
    # given
    monkeypatch.setenv("OSMO_LOCAL_DIR", str(tmp_path / "here"))

    # when
    backend = backend_for("local")

    # then it keeps the service's paths from its tasks: the pod root, the data folder and the worker's home
    # hidden, the metrics, the beat schedule, the secret key's folder (and, on the embedded default, the
    # broker's folder and the database) sealed
    from django.conf import settings

    assert isinstance(backend, LocalBackend)
    assert backend.root == tmp_path / "here"
    assert backend.hidden == tuple(sorted({os.path.realpath(tmp_path / "here"), os.path.realpath(settings.DATA_DIR),
                                           os.path.realpath(Path.home())}))
    broker = [settings.BROKER_DIR] if hasattr(settings, "BROKER_DIR") else []
    database = settings.DATABASES["default"]
    sqlite = ([f"{database['NAME']}{suffix}" for suffix in ("", "-wal", "-shm", "-journal")]
              if database["ENGINE"].endswith("sqlite3") else [])
    # and the interpreter's installation (the virtualenv and its base) sealed too, the checkout below its data
    assert backend.sealed == tuple(sorted({os.path.realpath(path) for path in (
        settings.OSMO_METRICS_DIR, settings.CELERY_BEAT_SCHEDULE_FILENAME, settings.DATA_DIR / "secrets", *broker,
        *sqlite, sys.prefix, sys.base_prefix)}))
    assert backend.code_root == os.path.realpath(settings.BASE_DIR)
    assert (backend.network, backend.service_ports, backend.max_processes) == ("workflow", (8000,), 1024)


def test_a_tasks_credentials_are_its_environment_and_read_only_files_in_the_sandbox(local, tmp_path):
    # given a task given a variable and files from its credentials (one under /tmp, one at a new top folder)
    payload = SecretPayload(env={"HF_TOKEN": "hf_local_value"},
                            files={"/tmp/creds/token": "file-value", "/osmo-creds/aws/credentials": "aws-value"})
    pod = replace(request("creds", command=["sh", "-c", 'echo "$HF_TOKEN"; cat /tmp/creds/token; echo; '
                                                        "cat /osmo-creds/aws/credentials; echo; "
                                                        "echo x > /tmp/creds/token || echo read-only"]),
                  credentials=payload)

    # when
    local.create_pod(pod)
    states = wait_done(local, [pod])

    # then the command saw them, the mounts are read-only, and the files on disk are the owner's only
    assert states == {"creds": PodState("Succeeded", 0)}
    lines = [line for line in local.pod_log(pod, tail=100, now=datetime.now(tz=UTC)).lines
             if not line.startswith("[osmo]") and "Read-only" not in line]
    assert lines == ["hf_local_value", "file-value", "aws-value", "read-only"]
    folder = local.pod_dir("osmo", "creds")
    assert sorted(oct(path.stat().st_mode & 0o777) for path in (folder / "credentials").rglob("*")
                  if path.is_file()) == ["0o600", "0o600"]
    assert oct((folder / "run" / "plan.json").stat().st_mode & 0o777) == "0o600"


@pytest.fixture
def outside_tmp():
    """A folder outside /tmp (the sandbox's /tmp is its own, so a pod root there is hidden anyway):
    where ``make run`` keeps its pod folders and data (``var/``)."""
    import shutil
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="osmo-local-test-", dir="/var/tmp"))
    backends: list[LocalBackend] = []
    yield folder, backends
    for backend in backends:
        for namespace in backend.root.glob("[!.]*"):  # (.sandbox: the seccomp filter, the networks)
            for pod_folder in namespace.iterdir():
                backend._remove(pod_folder, 0)
        backend.networks_sweep()
    shutil.rmtree(folder, ignore_errors=True)


def test_a_task_cannot_read_other_pods_credentials_nor_the_service_data(outside_tmp):
    """Replays the audit's finding: with the pod folders and the data folder outside /tmp (``make run``:
    ``var/local-pods``, ``var/``), a task of any user read another task's decrypted credentials from its
    ``run/plan.json`` and credential files, and the SQLite database holding every API token."""
    # given another user's task holding a credential, and the service's database in the data folder
    folder, backends = outside_tmp
    data = folder / "data"
    data.mkdir()
    (data / "osmo.sqlite3").write_text("admin-token-0123456789")
    local = LocalBackend(folder / "pods", hidden=(str(data),))
    backends.append(local)
    victim = replace(request("victim", command=["sleep", "30"]),
                     credentials=SecretPayload(env={"HF_TOKEN": "hf_victim_value"}, files={"/creds/key": "key-value"}))
    local.create_pod(victim)
    pods = local.root / "osmo"
    thief = request("thief", command=["sh", "-c", f"cat {pods}/victim/run/plan.json {pods}/victim/credentials/0/key "
                                                  f"{data}/osmo.sqlite3; echo cat=$?; find {local.root} {data}"])

    # when
    local.create_pod(thief)
    states = wait_done(local, [thief])

    # then the thief saw empty folders where the pods and the data are, and none of their contents
    assert states == {"thief": PodState("Succeeded", 0)}
    lines = [line for line in local.pod_log(thief, tail=100, now=datetime.now(tz=UTC)).lines
             if not line.startswith("[osmo]")]
    assert lines == [f"cat: {pods}/victim/run/plan.json: No such file or directory",
                     f"cat: {pods}/victim/credentials/0/key: No such file or directory",
                     f"cat: {data}/osmo.sqlite3: No such file or directory",
                     "cat=1", str(local.root), str(data)]


def test_a_task_cannot_bind_the_service_folders_writable_through_a_file_url(outside_tmp):
    """Replays the audit's finding: a ``file://`` output URL naming the data folder (or one holding it,
    or another pod's folder) was bound writable into the sandbox, so a task could overwrite the
    database or another pod's result."""
    folder, backends = outside_tmp
    data = folder / "data"
    data.mkdir()
    local = LocalBackend(folder / "pods", hidden=(str(data),))
    backends.append(local)
    for index, target in enumerate((data, folder, local.root / "osmo" / "other" / "run", Path("/"))):
        # given
        pod = request(f"writer-{index}", plan={"command": ["true"], "outputs": [{"url": target.as_uri()}]})

        # when / then
        with pytest.raises(DispatchPermanentError, match="may not be used by a task"):
            local.create_pod(pod)
        assert not local.pod_dir("osmo", f"writer-{index}").exists()
    assert not (local.root / "osmo" / "other").exists()


def test_a_task_cannot_bind_the_service_folders_back_as_inputs(outside_tmp):
    """Replays the audit's finding: a ``file://`` input was bound read-only over the tmpfs that hides
    the service's folders, so ``inputs: [{url: file:///<data folder>}]`` showed the database again."""
    folder, backends = outside_tmp
    data = folder / "data"
    data.mkdir()
    (data / "osmo.sqlite3").write_text("admin-token-0123456789")
    local = LocalBackend(folder / "pods", hidden=(str(data),), sealed=(str(data / "osmo.sqlite3"),))
    backends.append(local)
    local.create_pod(request("victim", command=["sleep", "30"]))
    victim_run = local.pod_dir("osmo", "victim") / "run"
    for index, target in enumerate((data, data / "osmo.sqlite3", victim_run, folder)):
        # given
        pod = request(f"reader-{index}", plan={"command": ["true"], "inputs": [{"url": target.as_uri()}]})

        # when / then
        with pytest.raises(DispatchPermanentError, match="may not be used by a task"):
            local.create_pod(pod)
        assert not local.pod_dir("osmo", f"reader-{index}").exists()


def test_a_file_url_beside_the_service_folders_is_still_written(outside_tmp):
    # given an output folder inside the data folder (make run's tutorials: var/storage)
    folder, backends = outside_tmp
    data = folder / "data"
    data.mkdir()
    local = LocalBackend(folder / "pods", hidden=(str(data),))
    backends.append(local)
    pod = request("writer", plan={"command": ["sh", "-c", "echo result > {{output}}/r.txt"],
                                  "artifact_url": (data / "storage" / "wf-1").as_uri()})

    # when
    local.create_pod(pod)
    states = wait_done(local, [pod])

    # then
    assert states == {"writer": PodState("Succeeded", 0)}
    assert (data / "storage" / "wf-1" / "r.txt").read_text() == "result\n"


def test_an_upload_folder_outside_the_writable_folders_fails_the_task_before_it_starts(outside_tmp):
    """Replays the audit's finding: any folder the worker's user may write (``/etc``, as root) could be
    named as a ``file://`` output and was bound writable into the sandbox."""
    folder, backends = outside_tmp
    storage = folder / "storage"
    local = LocalBackend(folder / "pods", writable=(str(storage),))
    backends.append(local)
    for index, target in enumerate((folder / "elsewhere", Path("/etc/osmo-audit"), storage.with_name("storage2"))):
        # given
        pod = request(f"writer-{index}", plan={"command": ["true"], "outputs": [{"url": target.as_uri()}]})

        # when / then
        with pytest.raises(DispatchPermanentError, match="outside the folders tasks may write"):
            local.create_pod(pod)
        assert not local.pod_dir("osmo", f"writer-{index}").exists()
        assert not target.exists()
    # and a folder below a writable one is written
    pod = request("writer", plan={"command": ["sh", "-c", "echo kept > {{output}}/r.txt"],
                                  "artifact_url": (storage / "wf-1").as_uri()})
    local.create_pod(pod)
    assert wait_done(local, [pod]) == {"writer": PodState("Succeeded", 0)}
    assert (storage / "wf-1" / "r.txt").read_text() == "kept\n"


def test_the_service_backend_hides_the_workers_home_and_writes_only_where_it_is_told(outside_tmp, monkeypatch,
                                                                                     settings):
    """Replays the audit's finding: the sandbox showed the worker user's home read-only (its ``~/.ssh``,
    ``~/.aws``, ``~/.kube``)."""
    # given a worker whose home holds a cloud credential, and the service's local backend
    folder, backends = outside_tmp
    home = folder / "home"
    (home / ".aws").mkdir(parents=True)
    (home / ".aws" / "credentials").write_text("aws_secret_access_key = worker-secret\n")
    monkeypatch.setenv("HOME", str(home))
    settings.OSMO_LOCAL_WRITABLE = [str(folder / "storage")]
    local = backend_for("local", root=folder / "pods")
    backends.append(local)
    thief = request("thief", command=["sh", "-c", f"cat {home}/.aws/credentials; echo cat=$?"])

    # when
    local.create_pod(thief)
    states = wait_done(local, [thief])

    # then
    assert states == {"thief": PodState("Succeeded", 0)}
    lines = [line for line in local.pod_log(thief, tail=100, now=datetime.now(tz=UTC)).lines
             if not line.startswith("[osmo]")]
    assert lines == [f"cat: {home}/.aws/credentials: No such file or directory", "cat=1"]
    # and it writes only below OSMO_LOCAL_WRITABLE and the file:// artifact stores
    assert str(folder / "storage") in local.writable
    assert local.writable == tuple(sorted({os.path.realpath(p) for p in (
        str(folder / "storage"), settings.OSMO_ARTIFACT_STORE.removeprefix("file://"))}))


def test_a_result_file_a_task_turned_into_a_pipe_does_not_hang_the_pod_sync(local):
    """Replays the audit's finding: ``/osmo/run`` is the pod's ``run`` folder, writable by the task; a task
    that replaced ``result.json`` by a named pipe (a reader kept it open while the runtime wrote) left a
    pipe without a writer, and the worker's ``open()`` of it in every pod sync blocked for good."""
    import threading

    # given a task whose result file ends as a pipe nobody writes to
    pod = request("pipe", command=["sh", "-c", "rm -f /osmo/run/result.json; mkfifo /osmo/run/result.json; "
                                               "(cat /osmo/run/result.json > /dev/null &); exit 3"])
    local.create_pod(pod)
    exit_file = local.pod_dir("osmo", "pipe") / "exit"
    deadline = time.monotonic() + 60
    while not exit_file.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    result_file = local.pod_dir("osmo", "pipe") / "run" / "result.json"
    assert result_file.is_fifo()

    # when the pod's state is read
    states: dict[str, PodState] = {}
    reader = threading.Thread(target=lambda: states.update(local.pod_states([pod], now=datetime.now(tz=UTC))),
                              daemon=True)
    reader.start()
    reader.join(timeout=30)
    hung = reader.is_alive()
    if hung:  # unblock the stuck reader before failing: a writer that closes at once
        os.close(os.open(result_file, os.O_WRONLY | os.O_NONBLOCK))
        reader.join()

    # then it answered, from the sandbox's exit status
    assert hung is False
    assert states == {"pipe": PodState("Failed", 3, "the sandbox exited with status 3 (no runtime result)")}


def test_a_huge_log_is_read_from_its_end(local):
    """Replays the audit's finding: the log endpoint read a local pod's whole log into memory to answer
    its last lines, so a task printing gigabytes took the web process's memory with it."""
    import subprocess

    # given a finished task whose log is 1 GiB (sparse: no disk spent) followed by its last lines
    pod = request("chatty", command=["sh", "-c", "echo first"])
    local.create_pod(pod)
    assert wait_done(local, [pod]) == {"chatty": PodState("Succeeded", 0)}
    log = local.pod_dir("osmo", "chatty") / "log"
    with open(log, "r+b") as handle:
        handle.truncate(1 << 30)
        handle.seek(0, os.SEEK_END)
        handle.write(b"\nlast-1\nlast-2\nlast-3\n")
    # when a process that may not take 256 MiB more than it holds reads its last 2 lines
    script = "\n".join([
        "import json, os, resource, sys",
        "from datetime import UTC, datetime",
        "from scheduler.dispatch.pod.request import PodRequest",
        "from scheduler.dispatch.local import LocalBackend",
        "size = int(open('/proc/self/statm').read().split()[0]) * os.sysconf('SC_PAGE_SIZE')",
        "resource.setrlimit(resource.RLIMIT_AS, (size + (256 << 20), resource.RLIM_INFINITY))",
        "pod = PodRequest(**json.loads(sys.argv[2]))",
        "answer = LocalBackend(sys.argv[1]).pod_log(pod, tail=2, now=datetime.now(tz=UTC))",
        "print(json.dumps([list(answer.lines), answer.truncated]))",
    ])
    fields = {"pod_name": "chatty", "namespace": "osmo", "node_name": "slot-1", "workflow_id": "wf-1", "group": "g",
              "task": "chatty", "pool": "local", "image": "ignored"}
    result = subprocess.run([sys.executable, "-c", script, str(local.root), json.dumps(fields)],
                            cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True, timeout=120)

    # then
    assert (result.returncode, result.stderr) == (0, "")
    assert json.loads(result.stdout) == [["last-2", "last-3"], True]


def test_a_task_does_not_inherit_the_services_secrets_from_the_workers_environment(local, monkeypatch):
    """Replays the audit's finding: a local task ran with the worker's whole environment, so ``env``
    printed ``DJANGO_SECRET_KEY``, ``OSMO_CREDENTIALS_KEYS`` (every stored credential opens with them)
    and ``DATABASE_URL`` with its password to any user of a local pool."""
    # given a worker whose environment holds the service's secrets and the artifact store's credentials
    monkeypatch.setenv("DJANGO_SECRET_KEY", "service-secret-key-value")
    monkeypatch.setenv("OSMO_CREDENTIALS_KEYS", "service-fernet-key-value")
    monkeypatch.setenv("DATABASE_URL", "postgres://osmo:db-password@db/osmo")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "artifact-store-key-id")
    pod = request("envy", command=["sh", "-c", "env | sort"])

    # when
    local.create_pod(pod)
    states = wait_done(local, [pod])

    # then the task saw the storage library's variables and its PATH (with its `osmo` command at the end),
    # none of the service's secrets, nor the runtime's PYTHONPATH
    assert states == {"envy": PodState("Succeeded", 0)}
    variables = dict(line.split("=", 1) for line in local.pod_log(pod, tail=200, now=datetime.now(tz=UTC)).lines
                     if "=" in line and not line.startswith("[osmo]"))
    assert variables["AWS_ACCESS_KEY_ID"] == "artifact-store-key-id"
    assert variables["PATH"] == f"{os.environ['PATH']}:/osmo/run/bin"
    assert variables["HOME"] == "/tmp"
    assert "PYTHONPATH" not in variables
    assert sorted(set(variables) & {"DJANGO_SECRET_KEY", "OSMO_CREDENTIALS_KEYS", "DATABASE_URL"}) == []
    assert "db-password" not in json.dumps(variables)
