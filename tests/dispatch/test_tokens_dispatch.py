"""OSMO's run-time tokens resolved at dispatch (docs/spec.md, "Tokens"), on the simulated backend and on
Kubernetes (the fake API server answers in the API's shapes), with the service's real database: a
torchrun-style two-node workflow whose ranks find the master at ``{{host:master}}``."""

from __future__ import annotations

import copy
import json
from datetime import timedelta

import pytest
from kubernetes import client as k8s_client

from scheduler.dispatch.kubernetes import KubernetesBackend
from scheduler.dispatch.pod.naming import group_service_name
from scheduler.dispatch.simulated import SimulatedBackend
from scheduler.models import PoolPlatform
from tests.dispatch.fake_kube import fixture
from tests.dispatch.recorder import Recorder
from tests.factories import make_node, make_pool
from tests.pipeline.helpers import backend_use
from workflows.models import Task, TaskGroup, Workflow
from workflows.scheduling import gang_dispatch
from workflows.scheduling.cycle import placement_cycle_run
from workflows.scheduling.pod.request import pod_request
from workflows.services import workflow_submit

pytestmark = pytest.mark.django_db
NS = "osmo-jobs"
PODS = f"/api/v1/namespaces/{NS}/pods"
GB200 = {"nvidia.com/gpu.product": "GB200"}  # the labels of the platform's nodes (placement keeps it there)

TORCHRUN = """
workflow:
  name: torch
  labels: {team: vision}
  resources:
    default: {gpu: 4, platform: gb200}
  groups:
  - name: training
    tasks:
%s
"""
RANK = """    - name: %(name)s
      %(lead)s
      image: nvcr.io/nvidia/pytorch:24.03-py3
      command: [bash]
      args: [/opt/train/launch.sh, "--master_addr={{host:master}}", "--run={{workflow_id}}"]
      environment: {CKPT: "{{output}}/ckpt"}
      files:
      - path: /opt/train/launch.sh
        contents: |
          torchrun --node_rank %(rank)s --master_addr {{host:master}} --save-to {{output}}/ckpt
"""


def torchrun_spec() -> str:
    ranks = [RANK % {"name": "master", "lead": "lead: true", "rank": 0},
             RANK % {"name": "worker-1", "lead": "", "rank": 1}]
    return TORCHRUN % "".join(ranks)


def submitted(user, pool):
    PoolPlatform.objects.create(pool=pool, name="gb200", node_selector=GB200,
                                tolerations=[{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}])
    workflow, _ = workflow_submit(user=user, pool_name=pool.name, spec=torchrun_spec())
    placement_cycle_run(pool_id=pool.pk)
    group = TaskGroup.objects.get(workflow=workflow)
    assert group.status == "INITIALIZING"
    return workflow, group


@pytest.fixture
def sim_pool():
    pool = make_pool("sim", keys=[("rack", "rack")], k8s_namespace=NS, sim_task_seconds=10)
    for name in ("n1", "n2"):
        make_node(pool, name, {"rack": "r1", **GB200}, gpu=4)
    return pool


def test_on_the_simulated_backend_the_rendered_args_hold_the_masters_dns_name(user, sim_pool, inline_jobs):
    # given a placed torchrun-style gang on a simulated pool
    workflow, group = submitted(user, sim_pool)

    # when its pods are dispatched
    gang_dispatch.gang_dispatch(group_id=group.pk)

    # then every rank's rendered args name the master by its DNS name in the group's Service
    master = f"master.{group_service_name(workflow.global_id, 'training')}.{NS}.svc"
    tasks = list(Task.objects.filter(workflow=workflow).select_related("workflow", "group", "node").order_by("name"))
    requests = [pod_request(task, sim_pool) for task in tasks]
    assert [r.args for r in requests] == [
        ("/opt/train/launch.sh", f"--master_addr={master}", f"--run={workflow.workflow_id}")] * 2
    assert [r.environment["CKPT"] for r in requests] == ["/osmo/output/ckpt"] * 2
    assert requests[0].files == (("/opt/train/launch.sh",
                                  f"torchrun --node_rank 0 --master_addr {master} --save-to /osmo/output/ckpt\n"),)
    # the simulated log shows the rendered command
    task = tasks[0]
    log = SimulatedBackend().pod_log(requests[0], tail=20, now=task.dispatched_at + timedelta(seconds=1))
    assert f"--master_addr={master}" in log.lines[0]
    # the stored task keeps the spec as written
    assert Task.objects.get(pk=task.pk).args[1] == "--master_addr={{host:master}}"


@pytest.fixture
def kube_pool(kube_api, monkeypatch, inline_jobs):
    pool = make_pool("kube", keys=[("rack", "rack")], backend="kubernetes", k8s_namespace=NS)
    for name in ("n1", "n2"):
        make_node(pool, name, {"rack": "r1", **GB200}, gpu=4)
    configuration = k8s_client.Configuration()
    configuration.host = kube_api.url
    backend = KubernetesBackend(k8s_client.ApiClient(configuration), request_timeout=(2.0, 5.0))
    backend_use(monkeypatch, backend)
    return pool


def test_on_kubernetes_the_pods_args_files_service_and_platform_are_created(user, kube_api, kube_pool):
    # given a placed torchrun-style gang on a Kubernetes pool, the API answering in its shapes
    workflow, group = submitted(user, kube_pool)
    service = group_service_name(workflow.global_id, "training")
    master = f"master.{service}.{NS}.svc"
    names = dict(Task.objects.filter(workflow=workflow).values_list("name", "pod_name"))
    for index, task in enumerate(("master", "worker-1")):
        created = copy.deepcopy(fixture("pod_created.json"))
        created["metadata"].update(name=names[task], uid=f"00000000-0000-4000-8000-00000000000{index}")
        kube_api.reply("POST", PODS, 201, created)
        kube_api.reply("POST", f"/api/v1/namespaces/{NS}/configmaps", 201, "configmap_created.json")
    kube_api.reply("PATCH", f"/api/v1/namespaces/{NS}/services/{service}", 404, "status_service_not_found.json")
    kube_api.reply("POST", f"/api/v1/namespaces/{NS}/services", 201, "service_created.json")
    kube_api.reply("PATCH", f"/api/v1/namespaces/{NS}/services/{service}", 200, "service_created.json")

    # when the gang is dispatched
    gang_dispatch.gang_dispatch(group_id=group.pk)

    # then each rank's pod carries the resolvable name, its host name in the Service, the labels and
    # the platform; its files' ConfigMap and the Service are owned by the pods (gone with them)
    assert kube_api.pending() == []
    posted = {r.body["metadata"]["name"]: r.body for r in kube_api.requests if r.method == "POST" and r.path == PODS}
    assert sorted(posted) == sorted(names.values())
    for task, pod_name in names.items():
        pod = posted[pod_name]
        assert pod["spec"]["containers"][0]["args"] == [
            "/opt/train/launch.sh", f"--master_addr={master}", f"--run={workflow.workflow_id}"]
        assert (pod["spec"]["hostname"], pod["spec"]["subdomain"]) == (task, service)
        assert pod["metadata"]["labels"]["team"] == "vision"
        assert pod["spec"]["nodeSelector"]["nvidia.com/gpu.product"] == "GB200"
        assert pod["spec"]["tolerations"][0] == {"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}
    configmaps = [r.body for r in kube_api.requests if r.path.endswith("/configmaps")]
    assert [c["data"]["file-0"] for c in configmaps] == [
        f"torchrun --node_rank {rank} --master_addr {master} --save-to /osmo/output/ckpt\n" for rank in (0, 1)]
    assert [c["metadata"]["ownerReferences"][0]["uid"] for c in configmaps] == [
        "00000000-0000-4000-8000-000000000000", "00000000-0000-4000-8000-000000000001"]
    services = [r for r in kube_api.requests if "/services" in r.path]
    assert [(r.method, r.body["metadata"]["ownerReferences"][0]["uid"]) for r in services] == [
        ("PATCH", "00000000-0000-4000-8000-000000000000"), ("POST", "00000000-0000-4000-8000-000000000000"),
        ("PATCH", "00000000-0000-4000-8000-000000000001")]
    assert services[1].body["spec"]["clusterIP"] == "None"
    assert Task.objects.filter(workflow=workflow, dispatched_at__isnull=False).count() == 2


@pytest.mark.parametrize("backend, host", [("local", "127.0.0.1"), ("kubernetes", None)])
def test_the_runtime_plan_holds_the_texts_dispatch_resolved(user, monkeypatch, inline_jobs, settings, backend, host):
    # given a placed torchrun-style gang on a pool whose tasks run through the runtime
    settings.OSMO_RUNTIME_IMAGE = "registry.example/osmo-runtime:1"
    pool = make_pool(backend, keys=[("rack", "rack")], backend=backend, k8s_namespace=NS)
    for name in ("n1", "n2"):
        make_node(pool, name, {"rack": "r1", **GB200}, gpu=4)
    recorder = Recorder()
    backend_use(monkeypatch, recorder)
    workflow, group = submitted(user, pool)
    host = host or f"master.{group_service_name(workflow.global_id, 'training')}.{NS}.svc"

    # when
    gang_dispatch.gang_dispatch(group_id=group.pk)

    # then the plan's args carry the backend's host for the master, resolved in one place
    plans = [json.loads(pod.runtime_plan) for pod in recorder.created]
    assert [plan["args"][1] for plan in plans] == [f"--master_addr={host}"] * 2
    assert [plan["env"]["CKPT"] for plan in plans] == ["/osmo/output/ckpt"] * 2
    if backend == "local":  # the runtime writes the files; on Kubernetes the ConfigMap holds them
        assert [plan["files"][0]["contents"] for plan in plans] == [
            f"torchrun --node_rank {rank} --master_addr {host} --save-to /osmo/output/ckpt\n" for rank in (0, 1)]
    else:
        assert [plan["files"] for plan in plans] == [[], []]
        assert [pod.files[0][0] for pod in recorder.created] == ["/opt/train/launch.sh"] * 2


def test_a_stored_token_without_a_value_fails_the_gang_and_creates_no_pod(user, sim_pool, inline_jobs, monkeypatch):
    # given a placed gang whose stored spec's files name an input the task does not have (stored
    # before submission checked it)
    workflow, group = submitted(user, sim_pool)
    broken = torchrun_spec().replace("--save-to {{output}}/ckpt", "--save-to {{input:3}}")
    assert broken != torchrun_spec()
    Workflow.objects.filter(pk=workflow.pk).update(spec_text=broken)
    recorder = Recorder()
    backend_use(monkeypatch, recorder)

    # when
    result = gang_dispatch.gang_dispatch(group_id=group.pk)

    # then
    assert result is not None and result.refused
    assert recorder.created == []
    group.refresh_from_db()
    assert group.status == "FAILED_BACKEND_ERROR"
    assert "{{input:3}}: the task has 0 inputs" in group.tasks.get(name="master").failure_message
