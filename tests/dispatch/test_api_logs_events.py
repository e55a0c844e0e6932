"""``GET /api/workflows/{id}/logs/`` and ``/events/`` (docs/api.md), through the API, with the pool's
backend played by the fake Kubernetes API server (pod log as text/plain, EventList JSON) or simulated."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from kubernetes import client as k8s_client

from scheduler.dispatch.kubernetes import KubernetesBackend
from tests.dispatch.fake_kube import fixture
from tests.factories import make_node, make_pool
from tests.pipeline.helpers import gang_spec
from workflows.models import StatusTransition, Task
from workflows.scheduling import observe
from workflows.scheduling.cycle import placement_cycle_run
from workflows.services import workflow_submit

pytestmark = pytest.mark.django_db
NS = "osmo-jobs"
PODS = f"/api/v1/namespaces/{NS}/pods"
EVENTS = f"/api/v1/namespaces/{NS}/events"


@pytest.fixture
def kube_pool(kube_api, monkeypatch):
    pool = make_pool("kube", keys=[("rack", "rack")], backend="kubernetes", k8s_namespace=NS)
    for name in ("n1", "n2"):
        make_node(pool, name, {"rack": "r1"}, gpu=4)
    configuration = k8s_client.Configuration()
    configuration.host = kube_api.url
    configuration.retries = 0
    backend = KubernetesBackend(k8s_client.ApiClient(configuration), request_timeout=(2.0, 5.0))
    monkeypatch.setattr(observe, "backend_for", lambda name, **kw: backend)
    return pool


def dispatched(user, pool, name: str = "train", tasks: int = 1, *, ago: float = 30.0):
    workflow, _ = workflow_submit(user=user, pool_name=pool.name, spec=gang_spec(name, tasks, 4, key=None))
    placement_cycle_run(pool_id=pool.pk)
    Task.objects.filter(workflow=workflow).update(dispatched_at=timezone.now() - timedelta(seconds=ago))
    return workflow, list(Task.objects.filter(workflow=workflow).order_by("position"))


def test_logs_of_the_only_task_read_the_pods_tail(user, user_client, kube_api, kube_pool):
    # given a one-task workflow whose pod has a log of 5 lines
    workflow, [task] = dispatched(user, kube_pool)
    kube_api.reply_text("GET", f"{PODS}/{task.pod_name}/log", 200, "pod_log.txt")
    # when its last 2 lines are asked for, without naming the task
    response = user_client.get(f"/api/workflows/{workflow.workflow_id}/logs/?tail=2")
    # then
    assert response.status_code == 200, response.json()
    assert response.json() == {"workflow": workflow.workflow_id, "task": "t0", "pod": task.pod_name,
                               "lines": ["[rank0]: epoch 0 step 200 loss 1.9876 lr 3.0e-04 tokens/s 183377",
                                         "[rank0]: epoch 0 step 300 loss 1.8120 lr 3.0e-04 tokens/s 182950"],
                               "truncated": True,
                               "tasks": [{"task": "t0", "pod": task.pod_name, "truncated": True, "error": None}],
                               "tasks_omitted": 0}
    assert kube_api.requests[0].query == {"container": ["task"], "tailLines": ["3"], "limitBytes": ["67108864"]}


@pytest.mark.parametrize(("query", "path", "words"), [
    ("?task=nope", "task", "no task 'nope'"),
    ("?task=t1&tail=0", "tail", "from 1 to 10000"),
    ("?task=t1&tail=abc", "tail", "from 1 to 10000"),
    ("?task=t1&tail=10001", "tail", "from 1 to 10000"),
])
def test_logs_bad_input_is_400_naming_the_parameter(user, user_client, kube_api, kube_pool, query, path, words):
    workflow, _tasks = dispatched(user, kube_pool, tasks=2)
    response = user_client.get(f"/api/workflows/{workflow.workflow_id}/logs/{query}")
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "validation_error"
    [error] = body["details"]["errors"]
    assert error["path"] == path and words in error["message"]
    assert kube_api.requests == []


@pytest.fixture
def wide_kube_pool(kube_pool):
    """The kube pool with room for twelve 4-GPU tasks."""
    kube_pool.nodes.update(gpu=24)
    return kube_pool


def test_logs_without_a_task_answer_every_tasks_log_each_line_prefixed(user, user_client, kube_api,
                                                                       wide_kube_pool):
    """Replays ``osmo workflow logs ID`` on a workflow of several tasks, which answered "name one
    with task=<name>": without ``task`` every task's log comes, task after task in natural order, each
    line prefixed with its task (kubectl's ``--prefix``), the last 100 lines of each by default."""
    # given twelve dispatched tasks t0..t11, each pod with the 5-line log
    workflow, tasks = dispatched(user, wide_kube_pool, tasks=12)
    for task in tasks:
        kube_api.reply_text("GET", f"{PODS}/{task.pod_name}/log", 200, "pod_log.txt")
    # when
    response = user_client.get(f"/api/workflows/{workflow.workflow_id}/logs/")
    # then
    assert response.status_code == 200, response.json()
    body = response.json()
    order = [f"t{i}" for i in range(12)]
    pods = {task.name: task.pod_name for task in tasks}
    assert (body["workflow"], body["task"], body["pod"], body["truncated"], body["tasks_omitted"]) == (
        workflow.workflow_id, None, None, False, 0)
    assert body["tasks"] == [{"task": name, "pod": pods[name], "truncated": False, "error": None} for name in order]
    assert len(body["lines"]) == 60
    assert body["lines"][:2] == ["[t0] [rank0]: NCCL INFO Bootstrap : Using eth0:10.0.3.17<0>",
                                 "[t0] [rank0]: NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.0.3.17<0>"]
    assert [line.split()[0] for line in body["lines"][::5]] == [f"[{name}]" for name in order]
    assert [request.path.split("/")[-2] for request in kube_api.requests] == [pods[name] for name in order]
    assert {request.query["tailLines"][0] for request in kube_api.requests} == {"101"}


def test_logs_without_a_task_name_those_without_a_log_and_cap_the_answer(user, user_client, kube_api,
                                                                         wide_kube_pool, monkeypatch):
    # given three tasks, t1 not dispatched yet, and an answer capped at two tasks
    monkeypatch.setattr(observe, "LOG_TASKS_MAX", 2)
    workflow, tasks = dispatched(user, wide_kube_pool, tasks=3)
    Task.objects.filter(pk=tasks[1].pk).update(dispatched_at=None)
    kube_api.reply_text("GET", f"{PODS}/{tasks[0].pod_name}/log", 200, "pod_log.txt")
    # when all of it is asked for, 10000 lines each
    response = user_client.get(f"/api/workflows/{workflow.workflow_id}/logs/?tail=10000")
    # then t0's log comes, t1 says why it has none, t2 is left out and counted
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["tasks"] == [
        {"task": "t0", "pod": tasks[0].pod_name, "truncated": False, "error": None},
        {"task": "t1", "pod": tasks[1].pod_name, "truncated": False,
         "error": f"Task t1 of workflow {workflow.workflow_id} has no pod yet (it is INITIALIZING)."},
    ]
    assert body["tasks_omitted"] == 1
    assert len(body["lines"]) == 5 and {line.split()[0] for line in body["lines"]} == {"[t0]"}
    # one backend call, its tail shared so the answer stays within 10000 lines
    assert [request.query["tailLines"] for request in kube_api.requests] == [["5001"]]


def test_logs_before_the_pod_exists_is_409_not_dispatched(user, user_client, kube_api, kube_pool):
    workflow, [task] = dispatched(user, kube_pool)
    Task.objects.filter(pk=task.pk).update(dispatched_at=None)
    response = user_client.get(f"/api/workflows/{workflow.workflow_id}/logs/")
    assert (response.status_code, response.json()["code"]) == (409, "not_dispatched")
    assert kube_api.requests == []


def test_logs_of_a_task_that_ended_without_a_pod_say_it_never_got_one(user, user_client, kube_api, kube_pool):
    # given: a task that ended before its pod was made (its upstream failed, or it was cancelled while queued)
    workflow, [task] = dispatched(user, kube_pool)
    Task.objects.filter(pk=task.pk).update(dispatched_at=None, pod_name="", status="FAILED_UPSTREAM")
    # when
    response = user_client.get(f"/api/workflows/{workflow.workflow_id}/logs/")
    # then: not "no pod yet", which promises one
    assert (response.status_code, response.json()["code"]) == (409, "not_dispatched")
    assert response.json()["message"] == (f"Task t0 of workflow {workflow.workflow_id} has no pod: it ended "
                                          "FAILED_UPSTREAM before it was started.")
    assert kube_api.requests == []


def test_logs_of_a_pod_waiting_to_start_is_409_with_the_apis_reason(user, user_client, kube_api, kube_pool):
    workflow, [task] = dispatched(user, kube_pool)
    kube_api.reply("GET", f"{PODS}/{task.pod_name}/log", 400, "status_log_waiting.json")
    response = user_client.get(f"/api/workflows/{workflow.workflow_id}/logs/")
    assert (response.status_code, response.json()["code"]) == (409, "log_unavailable")
    assert "is waiting to start" in response.json()["message"]


def test_logs_with_the_api_server_down_is_503(user, user_client, kube_api, kube_pool):
    workflow, [task] = dispatched(user, kube_pool)
    kube_api.reply("GET", f"{PODS}/{task.pod_name}/log", 503, "status_service_unavailable.json")
    response = user_client.get(f"/api/workflows/{workflow.workflow_id}/logs/")
    assert response.status_code == 503
    assert response.json()["code"] == "backend_unavailable"
    assert "HTTP 503" in response.json()["details"]["reason"]


def test_logs_and_events_of_someone_elses_workflow_are_404(user, other_user, api_client, kube_api, kube_pool):
    workflow, _tasks = dispatched(user, kube_pool)
    api_client.force_authenticate(other_user)
    assert api_client.get(f"/api/workflows/{workflow.workflow_id}/logs/").status_code == 404
    assert api_client.get(f"/api/workflows/{workflow.workflow_id}/events/").status_code == 404
    api_client.force_authenticate(None)
    assert api_client.get(f"/api/workflows/{workflow.workflow_id}/events/").status_code == 401


def test_events_combine_transitions_and_pod_events_in_time_order(user, user_client, kube_api, kube_pool):
    # given a placed, dispatched task whose pod has three events (12:00:01..04 of 2025-06-01)
    workflow, [task] = dispatched(user, kube_pool, name="train-1")
    listing = fixture("event_list_worker0.json")
    for item in listing["items"]:
        item["involvedObject"]["name"] = task.pod_name
    kube_api.reply("GET", EVENTS, 200, listing)
    kube_api.reply("GET", PODS, 200, {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": []})
    # when
    response = user_client.get(f"/api/workflows/{workflow.workflow_id}/events/")
    # then the pod's events (older) come first, then the service's transitions, each with its source
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["workflow"] == workflow.workflow_id and body["backend_error"] is None
    kinds = [(e["source"], e["task"], e["kind"]) for e in body["events"]]
    assert kinds[:3] == [("backend", "t0", "Scheduled"), ("backend", "t0", "Pulled"), ("backend", "t0", "Started")]
    service = [e for e in body["events"] if e["source"] == "service"]
    assert len(service) == StatusTransition.objects.filter(workflow=workflow).count() > 0
    assert {e["kind"] for e in service} == {"status"}
    assert "task t0: SCHEDULING -> INITIALIZING (placed on n1)" in [e["message"] for e in service]
    assert [e["time"] for e in body["events"]] == sorted(e["time"] for e in body["events"])


def test_events_with_the_api_server_down_still_answer_the_services_part(user, user_client, kube_api, kube_pool):
    workflow, _tasks = dispatched(user, kube_pool)
    kube_api.reply("GET", EVENTS, 503, "status_service_unavailable.json")
    response = user_client.get(f"/api/workflows/{workflow.workflow_id}/events/")
    assert response.status_code == 200
    body = response.json()
    assert body["events"] and {e["source"] for e in body["events"]} == {"service"}
    assert body["backend_error"].startswith("the backend's events are missing: Kubernetes API list events")


def test_events_before_any_dispatch_ask_the_backend_nothing(user, user_client, kube_api, kube_pool):
    workflow, _ = workflow_submit(user=user, pool_name=kube_pool.name, spec=gang_spec("w", 1, 4, key=None))
    body = user_client.get(f"/api/workflows/{workflow.workflow_id}/events/").json()
    assert [e["message"] for e in body["events"]][:1] and body["backend_error"] is None
    assert kube_api.requests == []


def test_simulated_pool_logs_and_events(user, user_client):
    # given a simulated pool (10 s per task) and a task dispatched 20 s ago: finished
    pool = make_pool("sim", keys=[("rack", "rack")], sim_task_seconds=10)
    make_node(pool, "n1", {"rack": "r1"}, gpu=4)
    workflow, [task] = dispatched(user, pool, ago=20)
    # when
    log = user_client.get(f"/api/workflows/{workflow.workflow_id}/logs/?task=t0").json()
    events = user_client.get(f"/api/workflows/{workflow.workflow_id}/events/").json()
    # then a start line, ten progress lines and the exit code; and the simulated kubelet's events
    assert (len(log["lines"]), log["truncated"], log["pod"]) == (12, False, task.pod_name)
    assert "started on n1" in log["lines"][0] and log["lines"][-1].endswith("finished: exit code 0")
    backend = [(e["task"], e["kind"]) for e in events["events"] if e["source"] == "backend"]
    assert backend == [("t0", "Scheduled"), ("t0", "Started")]


def test_logs_of_a_task_whose_pod_was_deleted_say_so(user, user_client, kube_api, kube_pool):
    # given: a task cancelled while it ran; the service deleted its pod, and its log with it
    workflow, [task] = dispatched(user, kube_pool)
    Task.objects.filter(pk=task.pk).update(status="FAILED_CANCELED", pod_deleted_at=timezone.now())
    kube_api.reply("GET", f"{PODS}/{task.pod_name}/log", 404, "status_not_found.json")
    # when
    response = user_client.get(f"/api/workflows/{workflow.workflow_id}/logs/")
    # then: not only "pod ... not found", which reads like a fault
    assert (response.status_code, response.json()["code"]) == (409, "log_unavailable")
    assert response.json()["message"].endswith(
        "; its pod was deleted (the task is FAILED_CANCELED), and its log with it")
