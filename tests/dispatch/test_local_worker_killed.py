"""A worker killed while it creates a local pod: the redelivered dispatch starts the pod, and never
twice (docs/runtime.md, "Local backend"; docs/operations.md, "Recovery"). Real processes: the killed
worker is a child process SIGKILLed while it starts the pod's supervisor, the pods run in bubblewrap."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.conftest import wait_for
from tests.dispatch.test_local import request, wait_done

ROOT = Path(__file__).resolve().parents[2]


# A worker's dispatch: create one pod. Its `setsid` (which starts the pod's supervisor) never returns.
CREATE = """
import sys
from scheduler.dispatch.pod.request import PodRequest
from scheduler.dispatch.local import LocalBackend
LocalBackend(sys.argv[1]).create_pod(PodRequest(
    pod_name="once", namespace="osmo", node_name="slot-1", workflow_id="wf-1", group="g", task="once",
    pool="local", image="ignored", runtime_plan=sys.argv[2]))
"""


def counting_pod(name: str, runs: Path):
    """A pod whose command adds a line to ``runs`` (an upload folder, so writable in the sandbox) each
    time it runs."""
    runs.mkdir(exist_ok=True)
    return request(name, plan={"command": ["sh", "-c", f"echo ran >> {runs}/count"],
                               "outputs": [{"url": runs.as_uri()}]})


def test_a_pod_whose_creator_was_killed_before_its_supervisor_started_is_started_by_the_redelivery(local, tmp_path):
    """Replays a worker SIGKILLed between making the pod's folder and starting its supervisor: the
    redelivered dispatch took the folder for the pod (AlreadyExists), which never started and failed
    60 s later ("the task's sandbox did not start")."""
    # given a worker killed while it starts a pod's supervisor (its folder made, nothing running)
    shims = tmp_path / "bin"
    shims.mkdir()
    (shims / "setsid").write_text(f"#!/bin/sh\ntouch {tmp_path / 'in-setsid'}\nexec sleep 600\n")
    (shims / "setsid").chmod(0o755)
    env = {**os.environ, "PATH": f"{shims}:{os.environ['PATH']}", "PYTHONPATH": str(ROOT)}
    pod = counting_pod("once", tmp_path / "runs")
    worker = subprocess.Popen([sys.executable, "-c", CREATE, str(local.root), pod.runtime_plan], env=env, cwd=ROOT,
                              start_new_session=True)
    wait_for(lambda: (tmp_path / "in-setsid").exists(), timeout=60, message="the worker in setsid")
    os.killpg(worker.pid, signal.SIGKILL)
    worker.wait(timeout=10)
    folder = local.pod_dir(pod.namespace, pod.pod_name)
    assert folder.is_dir() and not (folder / "pid").exists()

    # when the dispatch is delivered again, and once more (the tick's re-dispatch)
    local.create_pod(pod)
    local.create_pod(pod)

    # then the pod ran, once
    states = wait_done(local, [pod])
    assert states[pod.pod_name].phase == "Succeeded", states
    assert (tmp_path / "runs" / "count").read_text() == "ran\n"


def test_a_pod_started_by_two_creators_at_once_runs_once(local, tmp_path):
    # given a pod created, and its folder's supervisor started by a second creator too
    pod = counting_pod("twice", tmp_path / "runs")
    local.create_pod(pod)
    folder = local.pod_dir(pod.namespace, pod.pod_name)
    subprocess.run(["setsid", "-f", "/bin/sh", str(folder / "supervisor.sh")], check=True, timeout=30)

    # when both ran
    states = wait_done(local, [pod])

    # then the command ran once
    assert states[pod.pod_name].phase == "Succeeded", states
    assert (tmp_path / "runs" / "count").read_text() == "ran\n"
