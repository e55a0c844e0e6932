"""The runtime's endpoints (docs/runtime.md): the group barrier and the task's status, with per-task
tokens; a real runtime process waiting at the barrier of the live server; outputs in the workflow detail."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.factories import make_api_key, make_node, make_pool
from tests.pipeline.helpers import gang_spec
from workflows.models import Task, TaskGroup
from workflows.scheduling.cycle import placement_cycle_run
from workflows.scheduling.pod.runtime import task_token
from workflows.services import workflow_submit

BARRIER = "/api/runtime/barrier/"
STATUS = "/api/runtime/status/"


def placed(user, *, tasks: int = 2, backend: str = "local"):
    pool = make_pool(f"{backend}-pool", keys=[], backend=backend)
    make_node(pool, "slot-1", {}, gpu=8)
    workflow, _ = workflow_submit(user=user, pool_name=pool.name, spec=gang_spec("gang", tasks, 1, key=None))
    placement_cycle_run(pool_id=pool.pk)
    return workflow, list(Task.objects.filter(workflow=workflow).order_by("position"))


def arrive(api_client, task: Task, token: str | None = None):
    token = token or task_token(task.pk, task.pod_name)
    return api_client.post(BARRIER, HTTP_AUTHORIZATION=f"Bearer {token}")


@pytest.mark.django_db
def test_the_barrier_opens_when_every_task_of_the_group_arrived(user, api_client):
    # given a placed gang of two tasks
    _workflow, [first, second] = placed(user)

    # when each arrives, the first twice
    one = arrive(api_client, first)
    again = arrive(api_client, first)
    two = arrive(api_client, second)
    three = arrive(api_client, first)

    # then
    assert one.status_code == 200, one.json()
    assert one.json() == {"arrived": 1, "size": 2, "open": False, "abort": False, "reason": ""}
    assert again.json() == {"arrived": 1, "size": 2, "open": False, "abort": False, "reason": ""}
    assert two.json() == {"arrived": 2, "size": 2, "open": True, "abort": False, "reason": ""}
    assert three.json()["open"] is True
    assert sorted(Task.objects.values_list("barrier_pod", flat=True)) == sorted([first.pod_name, second.pod_name])


@pytest.mark.django_db
@pytest.mark.parametrize("header", [
    pytest.param(None, id="_case_no_header"),
    pytest.param("Bearer not-a-token", id="_case_forged"),
    pytest.param("Token x", id="_case_other_scheme"),
])
def test_a_request_without_a_valid_task_token_is_401_and_records_nothing(user, api_client, header):
    # given
    _workflow, [first, _second] = placed(user)
    extra = {"HTTP_AUTHORIZATION": header} if header else {}

    # when
    response = api_client.post(BARRIER, **extra)

    # then
    assert response.status_code == 401
    assert response.json()["code"] in ("not_authenticated", "authentication_failed")
    assert response["WWW-Authenticate"] == 'Bearer realm="osmo-task"'
    assert list(Task.objects.exclude(barrier_pod="").values_list("pk", flat=True)) == []


@pytest.mark.django_db
def test_a_users_api_token_does_not_reach_the_barrier(user, api_client):
    # given
    placed(user)
    key = make_api_key(user)

    # when
    response = api_client.post(BARRIER, HTTP_AUTHORIZATION=f"Bearer {key}")

    # then
    assert response.status_code == 401
    assert Task.objects.exclude(barrier_pod="").count() == 0


@pytest.mark.django_db
def test_the_token_of_an_earlier_pod_is_refused(user, api_client):
    # given a token made for the task's earlier pod name (it was re-placed since)
    _workflow, [first, _second] = placed(user)
    stale = task_token(first.pk, "an-earlier-pod")

    # when
    response = arrive(api_client, first, stale)

    # then
    assert response.status_code == 401
    assert response.json() == {"code": "authentication_failed",
                               "message": "The task token's pod is no longer its task's.", "details": {}}
    assert Task.objects.get(pk=first.pk).barrier_pod == ""


@pytest.mark.django_db
def test_a_stopped_group_aborts_the_barrier(user, api_client):
    # given a gang whose group failed
    _workflow, [first, _second] = placed(user)
    TaskGroup.objects.filter(pk=first.group_id).update(status="FAILED")
    Task.objects.filter(group=first.group_id).update(status="FAILED")

    # when
    response = arrive(api_client, first)

    # then
    assert response.json() == {"arrived": 0, "size": 0, "open": False, "abort": True,
                               "reason": "the task is FAILED, its group FAILED"}


@pytest.mark.django_db
def test_the_status_endpoint_answers_only_the_tokens_task(user, api_client):
    # given
    _workflow, [first, _second] = placed(user)

    # when
    response = api_client.get(STATUS, HTTP_AUTHORIZATION=f"Bearer {task_token(first.pk, first.pod_name)}")

    # then
    assert response.status_code == 200
    assert response.json() == {"task": "t0", "status": "INITIALIZING", "group": "g", "group_status": "INITIALIZING"}


@pytest.mark.django_db
def test_the_workflow_detail_lists_each_tasks_output_url(user, user_client, settings):
    # given
    settings.OSMO_ARTIFACT_STORES = {"local-pool": "s3://bucket/osmo"}
    workflow, _tasks = placed(user)

    # when
    response = user_client.get(f"/api/workflows/{workflow.workflow_id}/")

    # then
    assert response.status_code == 200
    tasks = response.json()["groups"][0]["tasks"]
    assert [(t["name"], t["outputs"]) for t in tasks] == [
        ("t0", [f"s3://bucket/osmo/{workflow.global_id}/t0"]), ("t1", [f"s3://bucket/osmo/{workflow.global_id}/t1"])]


@pytest.mark.django_db
def test_a_simulated_pool_lists_no_outputs(user, user_client):
    # given
    workflow, _tasks = placed(user, tasks=1, backend="simulated")

    # when
    response = user_client.get(f"/api/workflows/{workflow.workflow_id}/")

    # then
    assert response.json()["groups"][0]["tasks"][0]["outputs"] == []


@pytest.mark.django_db(transaction=True)
def test_two_runtimes_wait_for_each_other_at_the_live_servers_barrier(user, live_server, tmp_path):
    # given a placed gang of two and each task's plan with the live server's barrier
    _workflow, tasks = placed(user)
    processes = []
    for task in tasks:
        folder = tmp_path / task.name
        folder.mkdir()
        plan = {"command": ["echo", f"{task.name} started"], "output_dir": str(folder / "out"),
                "input_dir": str(folder / "in"), "start_timeout_s": 60,
                "barrier": {"url": f"{live_server.url}{BARRIER}", "token": task_token(task.pk, task.pod_name),
                            "group_size": 2}}
        (folder / "plan.json").write_text(json.dumps(plan))

    # when both runtimes run as real processes
    for task in tasks:
        folder = tmp_path / task.name
        processes.append(subprocess.Popen([sys.executable, "-m", "runtime", str(folder / "plan.json"), "--result",
                                           str(folder / "result.json")], stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True))
    outputs = [process.communicate(timeout=120) for process in processes]

    # then both ran after the barrier opened
    for task, process, (stdout, stderr) in zip(tasks, processes, outputs, strict=True):
        assert process.returncode == 0, stderr
        assert stdout == f"{task.name} started\n"
        assert "[osmo] barrier open: 2/2 tasks of the group arrived" in stderr
