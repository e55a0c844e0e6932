"""A workflow on a ``local`` pool, end to end with real processes: PostgreSQL, Redis, a `celery worker`
and beat dispatching each task through the task runtime in bubblewrap; the downstream task reads the
upstream task's committed output from the pool's file:// artifact store; `osmo workflow logs` shows the
commands' real output (docs/runtime.md)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from runtime.storage import committed_files
from tests.conftest import wait_for
from tests.dispatch.test_local import running_in_group
from tests.factories import make_api_key, make_node, make_pool
from workflows.models import Task, Workflow
from workflows.services import workflow_cancel, workflow_submit

pytestmark = pytest.mark.django_db(transaction=True)
ROOT = Path(__file__).resolve().parents[2]

CHAIN = """
workflow:
  name: local-chain
  groups:
  - name: first
    tasks:
    - name: producer
      lead: true
      image: ubuntu
      command: [sh, -c, "echo hello from producer; echo data-from-producer > /osmo/output/msg.txt;
                         echo x > /tmp/run.sh"]
  - name: second
    tasks:
    - name: consumer
      lead: true
      image: ubuntu
      command: [sh, -c, "echo consumer read $(cat /osmo/input/0/msg.txt); test ! -e /tmp/run.sh && echo own tmp"]
      inputs: [{task: producer}]
resources:
  default: {cpu: 1, gpu: 0}
"""

LONG = """
workflow:
  name: local-long
  groups:
  - name: g
    tasks:
    - {name: sleeper, lead: true, image: ubuntu, command: [sh, -c, "echo going to sleep; sleep 300"]}
resources:
  default: {cpu: 1, gpu: 0}
"""


@pytest.fixture
def local_pool(tmp_path, monkeypatch, settings, worker_env):
    pods, artifacts = tmp_path / "pods", tmp_path / "artifacts"
    for env in (worker_env,):
        env.update({"OSMO_LOCAL_DIR": str(pods), "OSMO_ARTIFACT_STORE": artifacts.as_uri()})
    monkeypatch.setenv("OSMO_LOCAL_DIR", str(pods))  # this process reads logs through the same backend
    settings.OSMO_ARTIFACT_STORE = artifacts.as_uri()
    pool = make_pool("local", keys=[], backend="local")
    for slot in ("slot-1", "slot-2"):
        make_node(pool, slot, {}, gpu=0, cpu=2)
    return pool


def osmo_cli(live_server, user, *args: str) -> subprocess.CompletedProcess:
    token = make_api_key(user)
    env = {**os.environ, "OSMO_URL": live_server.url, "OSMO_TOKEN": token, "OSMO_CONFIG": "/nonexistent/osmo.json"}
    return subprocess.run([str(Path(sys.executable).parent / "osmo"), *args], env=env, capture_output=True, text=True,
                          timeout=60, cwd=ROOT)


def finished(workflow: Workflow) -> bool:
    workflow.refresh_from_db()
    return workflow.is_terminal


def test_a_two_group_workflow_runs_for_real_on_a_local_pool(user, local_pool, celery_worker_factory, celery_beat,
                                                             live_server, tmp_path):
    # given a worker and beat, and a workflow whose second group reads the first's output
    celery_worker_factory("local", concurrency=2)

    # when
    workflow, _ = workflow_submit(user=user, pool_name="local", spec=CHAIN)
    wait_for(lambda: finished(workflow), timeout=180, message="the workflow to finish")

    # then it completed, with each task's real output in `osmo workflow logs`
    assert workflow.status == "COMPLETED", list(Task.objects.values_list("name", "status", "failure_message"))
    assert sorted(Task.objects.values_list("name", "status", "exit_code")) == [
        ("consumer", "COMPLETED", 0), ("producer", "COMPLETED", 0)]
    producer = osmo_cli(live_server, user, "workflow", "logs", workflow.workflow_id, "--task", "producer")
    consumer = osmo_cli(live_server, user, "workflow", "logs", workflow.workflow_id, "--task", "consumer")
    assert producer.returncode == 0, producer.stderr
    assert "hello from producer" in producer.stdout.splitlines()
    assert consumer.returncode == 0, consumer.stderr
    assert "consumer read data-from-producer" in consumer.stdout.splitlines()
    assert "own tmp" in consumer.stdout.splitlines()
    # and the producer's output was committed where the workflow detail says
    [producer_url] = [t["outputs"][0] for g in osmo_json(live_server, user, workflow)["groups"] for t in g["tasks"]
                      if t["name"] == "producer"]
    assert producer_url == f"{(tmp_path / 'artifacts').as_uri()}/{workflow.global_id}/producer"
    assert committed_files(producer_url) == ["msg.txt"]


def osmo_json(live_server, user, workflow: Workflow) -> dict:
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(user)
    return client.get(f"/api/workflows/{workflow.workflow_id}/").json()


def test_cancel_stops_the_tasks_process(user, local_pool, celery_worker_factory, celery_beat, tmp_path):
    # given a running task that would sleep five minutes
    celery_worker_factory("local", concurrency=2)
    workflow, _ = workflow_submit(user=user, pool_name="local", spec=LONG)
    wait_for(lambda: Task.objects.filter(workflow=workflow, status="RUNNING").exists(), timeout=120,
             message="the task to run")
    [task] = Task.objects.filter(workflow=workflow)
    folder = next((tmp_path / "pods").glob(f"*/{task.pod_name}"))
    pid = int((folder / "pid").read_text())
    assert running_in_group(pid) != []

    # when
    workflow_cancel(workflow_pk=workflow.pk, user=user)

    # then its process and its folder are gone
    wait_for(lambda: running_in_group(pid) == [], timeout=60, message="the task's processes to stop")
    wait_for(lambda: not any((tmp_path / "pods").glob(f"*/{task.pod_name}")), timeout=60,
             message="the pod folder to go")
    workflow.refresh_from_db()
    assert workflow.status == "FAILED_CANCELED"
    assert not folder.exists()


def submit(user, spec: str) -> Workflow:
    from workflows.errors import WorkflowSpecInvalidError

    try:
        return workflow_submit(user=user, pool_name="local", spec=spec)[0]
    except WorkflowSpecInvalidError as exc:  # say which field, not only that it is invalid
        pytest.fail(f"refused: {exc.details}")


def test_the_osmo_tutorial_examples_complete_on_a_local_pool(user, local_pool, celery_worker_factory, celery_beat,
                                                             user_client):
    # given the tutorial examples under examples/osmo/local/ that use only command, args, environment and task inputs
    celery_worker_factory("local", concurrency=2)
    names = ("hello-world", "serial", "parallel")

    # when
    workflows = [submit(user, (ROOT / "examples" / "osmo" / "local" / f"{name}.yaml").read_text()) for name in names]
    for workflow in workflows:
        wait_for(lambda workflow=workflow: finished(workflow), timeout=240, message=f"{workflow.name} to finish")

    # then every one completed, and the logs are the commands' own output
    assert [w.status for w in workflows] == ["COMPLETED"] * 3, list(Task.objects.values_list("name", "failure_message"))

    def log(workflow: Workflow, task: str) -> list[str]:
        answer = user_client.get(f"/api/workflows/{workflow.workflow_id}/logs/?task={task}&tail=100")
        assert answer.status_code == 200, answer.json()
        return [line for line in answer.json()["lines"] if not line.startswith("[osmo]")]

    hello, serial, parallel = workflows
    assert log(hello, "hello") == ["Hello from OSMO on Linux"]
    assert log(serial, "second") == ["step two read the answer 42"]
    assert [log(parallel, name) for name in "abc"] == [["task a"], ["task b"], ["task c"]]


def test_a_task_naming_another_workflows_artifacts_fails_before_it_runs(user, local_pool, celery_worker_factory,
                                                                        celery_beat, settings):
    """Replays the audit's finding: artifact ids are guessable (``<name>-<n>-u<user>``), and a task that
    named another workflow's artifact folder as an output overwrote what that workflow's downstream
    tasks read. Submission refuses such a URL; one made with a token is known only at dispatch."""
    # given a worker, and another user's committed artifact in the pool's store
    celery_worker_factory("local", concurrency=1)
    victim = Path(settings.OSMO_ARTIFACT_STORE.removeprefix("file://")) / "local-chain-1-u99" / "producer"
    victim.mkdir(parents=True)
    (victim / "msg.txt").write_text("the victim's data\n")
    spec = f"""
workflow:
  name: overwriter
  groups:
  - name: g
    tasks:
    - name: writer
      lead: true
      image: ubuntu
      command: [sh, -c, "echo forged > /osmo/output/msg.txt"]
      outputs: [{{url: "{victim.as_uri()}/{{{{workflow_id}}}}"}}]
resources:
  default: {{cpu: 1, gpu: 0}}
"""

    # when
    workflow, _ = workflow_submit(user=user, pool_name="local", spec=spec)
    wait_for(lambda: finished(workflow), timeout=120, message="the workflow to finish")

    # then it failed at dispatch, saying why, and the other workflow's artifact is untouched
    task = Task.objects.get(workflow=workflow)
    assert (workflow.status, task.status) == ("FAILED_BACKEND_ERROR", "FAILED_BACKEND_ERROR"), task.failure_message
    assert "outputs.0.url" in task.failure_message
    assert "is in the service's artifact store" in task.failure_message
    assert (victim / "msg.txt").read_text() == "the victim's data\n"
