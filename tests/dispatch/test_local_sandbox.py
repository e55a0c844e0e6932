"""A hostile task on the local backend, with real processes (docs/runtime.md, "What a task can and cannot
do"; docs/operations.md, "Threat model"). Each test replays a finding of an attack run from inside a task
of an ordinary user on the embedded default: the task's script tries what the attacker did, and the test
asserts it was refused and nothing happened."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from scheduler.dispatch.base import DispatchPermanentError, PodState
from scheduler.dispatch.local import LocalBackend
from scheduler.dispatch.local_limits import Cgroups
from scheduler.dispatch.local_sandbox import UID_BASE
from scheduler.dispatch.pod.request import PodRequest
from tests.dispatch.test_local import wait_done

ROOT = Path(__file__).resolve().parents[2]


def hostile(name: str, script: str, *, workflow: str = "wf-1", workflow_pk: int = 1, owner_pk: int = 2,
            **fields) -> PodRequest:
    return PodRequest(pod_name=name, namespace="osmo", node_name="slot-1", workflow_id=workflow, group="g",
                      task=name, pool="local", image="ignored", workflow_pk=workflow_pk, owner_pk=owner_pk,
                      runtime_plan=json.dumps({"command": ["sh", "-c", script]}), **fields)


def output(backend: LocalBackend, pod: PodRequest) -> list[str]:
    return [line for line in backend.pod_log(pod, tail=200, now=datetime.now(tz=UTC)).lines
            if not line.startswith("[osmo]")]


@pytest.fixture
def sandboxed():
    """A backend whose pod root and data folder are outside /tmp (where ``make run`` keeps them), with a
    data folder holding a database; everything stopped and removed afterwards."""
    folder = Path(tempfile.mkdtemp(prefix="osmo-sandbox-test-", dir="/var/tmp"))
    folder.chmod(0o755)  # as a checkout's folder is: the sandbox must hide what is in it, not the mode
    data = folder / "data"
    data.mkdir()
    (data / "osmo.sqlite3").write_text("admin-token-0123456789")
    (data / "broker").mkdir()
    backends: list[LocalBackend] = []

    def make(**options) -> LocalBackend:
        backend = LocalBackend(folder / "pods", hidden=(str(data),), sealed=(str(data / "osmo.sqlite3"),),
                               **options)
        backends.append(backend)
        return backend

    yield folder, make
    for backend in backends:
        for namespace in backend.root.glob("[!.]*"):
            for pod_folder in namespace.iterdir():
                backend._remove(pod_folder, 0)
        backend.networks_sweep()
    shutil.rmtree(folder, ignore_errors=True)


def test_a_task_is_an_unprivileged_user_without_capabilities_under_a_seccomp_filter(sandboxed):
    """Replays the finding: a task ran as root with every capability (CapEff 000001fffeffffff) and no
    seccomp, so ``mount -o remount,rw,bind`` on the checkout worked and wrote into the service's data."""
    folder, make = sandboxed
    local = make()
    checkout = str(ROOT)
    pod = hostile("root", f"id -u; id -g; grep -E '^(CapEff|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status; "
                          f"mount -o remount,rw,bind {checkout} 2>/dev/null; echo remount=$?; "
                          f"touch {checkout}/pwned 2>/dev/null; echo write=$?; "
                          f"unshare -U -r true 2>/dev/null; echo userns=$?; "
                          f"mount -t tmpfs none /osmo/output 2>/dev/null; echo mount=$?",
                  workflow_pk=41, owner_pk=7)

    # when
    local.create_pod(pod)

    # then
    assert wait_done(local, [pod]) == {"root": PodState("Succeeded", 0)}
    assert output(local, pod) == [str(UID_BASE + 41), str(UID_BASE + 7), "CapEff:\t0000000000000000",
                                  "CapBnd:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t2",
                                  "remount=32", "write=1", "userns=1", "mount=32"]
    assert not (ROOT / "pwned").exists()


def test_the_service_data_is_hidden_even_when_the_checkout_is_under_tmp(tmp_path):
    """Replays the finding: with the checkout under /tmp (as the README's walkthrough has it) the tmpfs
    that should hide ``var/`` was skipped and the whole checkout was bound back read-only: a task read
    the SQLite database (every API token) and other users' ``plan.json``. Here the service runs from a
    copy of its packages under /tmp with its data folder inside, as a clone there would."""
    # given a checkout under /tmp with its data folder and pod root inside
    checkout = tmp_path / "checkout"
    for package in ("scheduler", "runtime", "cli", "parsing", "credentials"):
        shutil.copytree(ROOT / package, checkout / package, ignore=shutil.ignore_patterns("__pycache__"))
    data = checkout / "var"
    (data / "local-pods").mkdir(parents=True)
    (data / "osmo.sqlite3").write_text("admin-token-0123456789")
    script = (f"ls {checkout} 2>&1; cat {data}/osmo.sqlite3 2>&1; ls /osmo/lib; "
              f"python3 -c 'import scheduler' 2>&1 | tail -1")
    create = ("import sys, json\n"
              "from scheduler.dispatch.pod.request import PodRequest\n"
              "from scheduler.dispatch.local import LocalBackend\n"
              "LocalBackend(sys.argv[1], hidden=(sys.argv[2],)).create_pod(PodRequest(\n"
              "    pod_name='reader', namespace='osmo', node_name='slot-1', workflow_id='wf-1', group='g',\n"
              "    task='reader', pool='local', image='x',\n"
              "    runtime_plan=json.dumps({'command': ['sh', '-c', sys.argv[3]]})))\n")
    env = {**os.environ, "PYTHONPATH": str(checkout)}

    # when the service's worker (from that checkout) starts a task that looks for them
    subprocess.run([sys.executable, "-c", create, str(data / "local-pods"), str(data), script], env=env, cwd=checkout,
                   check=True, timeout=60)
    local = LocalBackend(data / "local-pods", hidden=(str(data),))
    pod = hostile("reader", script)
    try:
        states = wait_done(local, [pod])

        # then it sees neither the checkout nor the data: only the three packages its runtime needs
        assert states == {"reader": PodState("Succeeded", 0)}
        assert output(local, pod) == [f"ls: cannot access '{checkout}': No such file or directory",
                                      f"cat: {data}/osmo.sqlite3: No such file or directory",
                                      "cli", "parsing", "runtime",
                                      "ModuleNotFoundError: No module named 'scheduler'"]
    finally:
        local._remove(local.pod_dir("osmo", "reader"), 0)


def test_a_task_cannot_read_the_database_nor_reach_the_broker_or_other_pods(sandboxed):
    """Replays the findings: the task read the SQLite database and sent a Celery message through the
    filesystem broker (``workflows.pod_delete``), killing another user's task. It also read another
    user's ``plan.json`` (credentials and task token)."""
    folder, make = sandboxed
    local = make()
    victim = hostile("victim", "sleep 30", workflow="wf-victim", workflow_pk=2, owner_pk=3)
    local.create_pod(victim)
    victim_plan = local.pod_dir("osmo", "victim") / "run" / "plan.json"
    data = folder / "data"
    thief = hostile("thief", f"cat {data}/osmo.sqlite3 2>&1; touch {data}/broker/msg 2>&1; "
                             f"cat {victim_plan} 2>&1; ls -A {local.root} | wc -l")

    # when
    local.create_pod(thief)

    # then
    assert wait_done(local, [thief]) == {"thief": PodState("Succeeded", 0)}
    assert output(local, thief) == [f"cat: {data}/osmo.sqlite3: No such file or directory",
                                    f"touch: cannot touch '{data}/broker/msg': No such file or directory",
                                    f"cat: {victim_plan}: No such file or directory", "0"]
    assert not (data / "broker" / "msg").exists()
    assert local.pod_states([victim], now=datetime.now(tz=UTC))["victim"].phase == "Running"


def test_an_upload_into_the_virtualenv_or_the_checkout_is_refused_before_anything_runs(sandboxed):
    """Replays the finding: an output URL ``file:///<checkout>/.venv/lib/python3.11/site-packages`` was
    bound writable, the task wrote a ``.pth`` file and the host's Python ran it as root."""
    folder, make = sandboxed
    local = make()
    site = next(path for path in sys.path if path.endswith("site-packages") and path.startswith(sys.prefix))
    targets = [Path(site), Path(sys.prefix), ROOT / "scheduler", ROOT, Path(site) / ".." / ".." / ".."]
    for index, target in enumerate(targets):
        # given
        pod = hostile(f"writer-{index}", "echo 'import os' > {{output}}/evil.pth")
        pod = PodRequest(**{**{f: getattr(pod, f) for f in pod.__dataclass_fields__},
                            "runtime_plan": json.dumps({"command": ["true"], "outputs": [{"url": target.as_uri()}]})})

        # when / then
        with pytest.raises(DispatchPermanentError, match="may not be used by a task"):
            local.create_pod(pod)
        assert not local.pod_dir("osmo", f"writer-{index}").exists()
    assert not (Path(site) / "evil.pth").exists()


def test_the_virtualenv_is_read_only_in_the_sandbox(sandboxed):
    folder, make = sandboxed
    local = make()
    site = next(path for path in sys.path if path.endswith("site-packages") and path.startswith(sys.prefix))
    pod = hostile("venv", f"touch {site}/evil.pth 2>/dev/null; echo write=$?")

    # when
    local.create_pod(pod)

    # then
    assert wait_done(local, [pod]) == {"venv": PodState("Succeeded", 0)}
    assert output(local, pod) == ["write=1"]
    assert not (Path(site) / "evil.pth").exists()


@pytest.mark.skipif(not Cgroups.detect(), reason="no cgroup hierarchy this process may write: rlimits apply")
@pytest.mark.parametrize(("case", "script", "fields", "message"), [
    ("_case_processes", "for i in $(seq 1 2000); do sleep 30 & done; wait", {},
     "the task went over its limit of 64 processes (OSMO_LOCAL_MAX_PROCESSES) and was ended"),
    ("_case_memory", "python3 -c 'x = bytearray(4 << 30)'", {"memory_bytes": 1 << 30},
     "OOMKilled: the task went over its memory limit of 1 GiB and was killed"),
    ("_case_tmp", "dd if=/dev/zero of=/tmp/fill bs=1M count=2048 2>/dev/null; sleep 30", {"storage_bytes": 64 << 20},
     "the task filled its /tmp, limited to 64 MiB (its storage request), and was ended"),
])
def test_going_over_a_limit_ends_the_task_and_says_which(sandboxed, case, script, fields, message):
    """Replays the finding: a task asking for ``cpu: 1, memory: 1Gi`` started 2,000 processes, allocated
    4 GB and wrote 2 GiB into its /tmp on the host's disk."""
    folder, make = sandboxed
    local = make(max_processes=64)
    pod = hostile("greedy", script, memory_bytes=fields.get("memory_bytes", 0),
                  storage_bytes=fields.get("storage_bytes", 0), cpu_millis=1000)

    # when
    local.create_pod(pod)

    # then
    assert wait_done(local, [pod]) == {"greedy": PodState("Failed", 137, message)}
    assert not list(local.root.glob("osmo/greedy/sandbox/tmp*"))  # its /tmp was never the host's disk


def test_without_cgroups_the_same_limits_hold_as_rlimits(sandboxed):
    """Where no cgroup hierarchy is writable (docs/runtime.md: cgroups v2, else v1, else rlimits) a fork
    bomb and an allocation past the request are refused by rlimits instead (the task fails with its own
    code: which limit it was is not known then)."""
    folder, make = sandboxed
    local = make(max_processes=64, cgroups="")
    forks = hostile("forks", "for i in $(seq 1 2000); do sleep 30 & done; wait", workflow_pk=61)
    memory = hostile("memory", "python3 -c 'x = bytearray(4 << 30)' 2>&1 | tail -1; exit 3", workflow_pk=62,
                     memory_bytes=1 << 30)

    # when
    local.create_pod(forks)
    local.create_pod(memory)

    # then
    states = wait_done(local, [forks, memory])
    assert states["forks"].phase == "Failed" and states["forks"].exit_code != 137, states
    assert any("fork" in line.lower() for line in output(local, forks)), output(local, forks)
    assert states["memory"] == PodState("Failed", 3, "the command exited with code 3")
    assert output(local, memory) == ["MemoryError"]


class _Server:
    """A TCP server on the host's loopback that answers every connection with its name."""

    def __init__(self, name: str) -> None:
        self.socket = socket.create_server(("127.0.0.1", 0))
        self.port = self.socket.getsockname()[1]
        self.name = name
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self.socket.accept()
            except OSError:
                return
            with connection:
                connection.sendall(self.name.encode() + b"\n")

    def close(self) -> None:
        self.socket.close()


def test_a_workflow_reaches_its_own_tasks_the_service_and_nothing_else_on_the_loopback(sandboxed):
    """Replays the finding: another user's task reached a task's ports (the host network was shared),
    and so PostgreSQL and Redis on the host's loopback."""
    folder, make = sandboxed
    service, database = _Server("service"), _Server("database")
    local = make(service_url=f"http://127.0.0.1:{service.port}/")
    probe = ("import socket, sys\n"
             "for port in sys.argv[1:]:\n"
             "    try:\n"
             "        answer = socket.create_connection(('127.0.0.1', int(port)), timeout=3).recv(64)\n"
             "        print(port, answer.decode().strip())\n"
             "    except OSError as exc:\n"
             "        print(port, 'refused' if isinstance(exc, ConnectionRefusedError) else type(exc).__name__)\n")
    listener = ("import socket\n"
                "s = socket.create_server(('127.0.0.1', 47123))\n"
                "for _ in range(2):\n"
                "    c, _ = s.accept(); c.sendall(b'task\\n'); c.close()\n")
    try:
        server = hostile("server", f"python3 -c \"{listener}\" & sleep 20", workflow="wf-a", workflow_pk=10)
        local.create_pod(server)
        # (and the suite's own Redis and PostgreSQL, when it runs on them: make test starts both on the loopback)
        real = [urlsplit(os.environ[name]).port for name in ("REDIS_URL", "DATABASE_URL") if os.environ.get(name)]
        ports = " ".join(str(port) for port in (service.port, database.port, 47123, *real))
        same = hostile("same", f"sleep 2; python3 -c \"{probe}\" {ports}", workflow="wf-a", workflow_pk=10)
        other = hostile("other", f"sleep 2; python3 -c \"{probe}\" {ports}", workflow="wf-b", workflow_pk=11,
                        owner_pk=9)

        # when
        local.create_pod(same)
        local.create_pod(other)

        # then its own workflow's task and the service answer; the other workflow reaches only the service
        assert wait_done(local, [same, other]) == {"same": PodState("Succeeded", 0),
                                                   "other": PodState("Succeeded", 0)}
        refused = [f"{port} refused" for port in real]
        assert output(local, same) == [f"{service.port} service", f"{database.port} refused", "47123 task", *refused]
        assert output(local, other) == [f"{service.port} service", f"{database.port} refused", "47123 refused",
                                        *refused]
    finally:
        service.close()
        database.close()
    # and once the workflows' tasks ended, their networks are gone
    local.delete_pod(namespace="osmo", pod_name="server", grace_seconds=0)
    assert [path for path in (local.root / ".sandbox" / "netns").glob("*") if path.is_dir()] == []
    assert subprocess.run(["pgrep", "-f", f"pasta.*{local.root}"], capture_output=True).stdout == b""


def test_an_output_link_to_the_database_is_not_uploaded(sandboxed):
    """Replays the finding: ``ln -s <checkout>/var/osmo.sqlite3 {{output}}/db`` copied the database into
    the artifact store."""
    folder, make = sandboxed
    local = make()
    store = folder / "store"
    database = folder / "data" / "osmo.sqlite3"
    pod = PodRequest(pod_name="linker", namespace="osmo", node_name="slot-1", workflow_id="wf-1", group="g",
                     task="linker", pool="local", image="x", workflow_pk=1, owner_pk=2,
                     runtime_plan=json.dumps({"command": ["sh", "-c", f"ln -s {database} {{{{output}}}}/db; "
                                                                      "echo ok > {{output}}/ok"],
                                              "artifact_url": store.as_uri()}))

    # when
    local.create_pod(pod)

    # then
    assert wait_done(local, [pod]) == {"linker": PodState("Succeeded", 0)}
    assert sorted(path.name for path in store.iterdir()) == [".osmo-manifest.json", "ok"]


def test_cgroup_v2_limits_are_written_where_the_unified_hierarchy_offers_the_controllers(tmp_path):
    """This machine kind mounts cgroups v1 (hybrid); on a v2-only host the same limits go to the unified
    hierarchy: the controllers enabled for the pods' folder, then one folder per pod with its limits.
    Checked on a folder laid out as cgroupfs v2 is (the kernel's files are plain files here)."""
    from scheduler.dispatch.local_limits import CGROUP_GROUP, Limits

    # given a unified hierarchy offering memory, pids and cpu
    (tmp_path / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    (tmp_path / "cgroup.subtree_control").write_text("")
    (tmp_path / CGROUP_GROUP).mkdir()
    (tmp_path / CGROUP_GROUP / "cgroup.controllers").write_text("cpu memory pids\n")
    assert Cgroups.detect(str(tmp_path)) == "v2"

    # when a pod's cgroup is made
    cgroups = Cgroups.for_pod("pod-1", kind="v2", root=str(tmp_path))
    cgroups.create(Limits(memory_bytes=1 << 30, cpu_millis=1500, processes=64, tmp_bytes=1 << 20))

    # then
    folder = tmp_path / CGROUP_GROUP / "pod-1"
    assert {name: (folder / name).read_text() for name in ("memory.max", "memory.swap.max", "pids.max", "cpu.max")} == {
        "memory.max": str(1 << 30), "memory.swap.max": "0", "pids.max": "64", "cpu.max": "150000 100000"}
    assert (tmp_path / "cgroup.subtree_control").read_text() == "+memory +pids +cpu"
    # and its counters are read from memory.events and pids.events
    (folder / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n")
    (folder / "pids.events").write_text("max 2\n")
    assert (cgroups.oom_kills(), cgroups.process_limit_hits()) == (1, 2)


def test_a_network_whose_last_supervisor_was_killed_is_swept_by_the_status_sync(sandboxed):
    """Seen in a loaded CI run: a delete that stopped waiting for a pod's supervisor left its workflow's
    network namespace mounted and its pasta running. The sweep the status sync makes removes a network
    no live supervisor uses."""
    import signal

    folder, make = sandboxed
    local = make()
    pod = hostile("orphan", "sleep 60", workflow="wf-orphan")
    local.create_pod(pod)
    pod_folder = local.pod_dir("osmo", "orphan")
    from tests.conftest import wait_for

    wait_for(lambda: (pod_folder / "sandbox.pid").exists(), timeout=30, message="the sandbox to start")
    [network] = [path for path in (local.root / ".sandbox" / "netns").iterdir() if path.is_dir()]
    pasta = int((network / "pasta.pid").read_text())
    # given its supervisor and sandbox killed outright (nothing left to clean up after them)
    os.killpg(int((pod_folder / "pid").read_text()), signal.SIGKILL)
    wait_for(lambda: not Path(f"/proc/{int((pod_folder / 'pid').read_text())}/cmdline").exists()
             or Path(f"/proc/{int((pod_folder / 'pid').read_text())}/stat").read_text().split(") ")[1][0] == "Z",
             timeout=10, message="the supervisor to end")
    assert os.path.ismount(network / "ns")

    # when the status sync lists the pool's pods
    local.pods_list(namespace="osmo", pool="local")

    # then
    assert not network.exists()
    wait_for(lambda: not Path(f"/proc/{pasta}").exists() or "pasta" not in Path(f"/proc/{pasta}/cmdline").read_text(),
             timeout=10, message="pasta to end")
