"""Several clusters behind one service (docs/kubernetes.md, "Backends"): two fake API servers at the HTTP
boundary, each with nodes named alike, each the backend of one pool through its own kubeconfig. Gangs
land in their own cluster; one cluster going down takes only its pool OFFLINE (queued gangs wait with
the backend's name, running tasks keep RUNNING) and the other pool's work completes; the cluster coming
back is reconciled without a pod created twice."""

from __future__ import annotations

import pytest

from scheduler.dispatch import DispatchTransientError
from scheduler.models import Backend, Node, Pool
from scheduler.services import inventory_import_text
from scheduler.services.backends import backend_set
from tests.dispatch.fake_cluster import FakeCluster, kubeconfig_for
from tests.pipeline.helpers import gang_spec
from workflows import jobs
from workflows.models import Task, TaskGroup
from workflows.scheduling import pods
from workflows.scheduling.cycle import placement_cycle_run
from workflows.scheduling.gang_dispatch import gang_dispatch
from workflows.scheduling.pods import pods_sync
from workflows.services import workflow_submit
from workflows.tasks import kubernetes_backend_sync

pytestmark = pytest.mark.django_db

NODES = {"n1": {"rack": "r1"}, "n2": {"rack": "r1"}}
DOCUMENT = """
pool: {{name: {pool}, backend: {backend}, k8s_namespace: osmo-jobs}}
topology_keys: [{{key: rack, label: rack}}]
nodes: []
"""


@pytest.fixture
def clusters(monkeypatch):
    """Two clusters, each the backend of one pool (pa on cluster-a, pb on cluster-b), nodes synced from
    each; pod deletes the service enqueues run inline."""
    first, second = FakeCluster(NODES).start(), FakeCluster(NODES).start()
    for name, cluster in (("cluster-a", first), ("cluster-b", second)):
        backend_set(name=name, kind="kubernetes", kubeconfig=kubeconfig_for(cluster.url, name=name))
    for pool, backend in (("pa", "cluster-a"), ("pb", "cluster-b")):
        inventory_import_text(DOCUMENT.format(pool=pool, backend=backend))
        kubernetes_backend_sync(backend=backend)

    def send(name, countdown=None, **kwargs):
        if name == jobs.POD_DELETE:
            pods.pod_delete(**kwargs)
        elif name == jobs.PODS_EVICT:
            pods.pods_evict(**kwargs)

    monkeypatch.setattr(jobs, "_send", send)
    yield first, second
    first.stop()
    second.stop()


def _submit_and_dispatch(user, pool: Pool, name: str) -> tuple:
    workflow, _ = workflow_submit(user=user, pool_name=pool.name, spec=gang_spec(name, 2, 4, key=None))
    placement_cycle_run(pool_id=pool.pk)
    group = TaskGroup.objects.get(workflow=workflow)
    gang_dispatch(group_id=group.pk)
    return workflow, group


def _statuses(workflow) -> set[str]:
    return set(Task.objects.filter(workflow=workflow).values_list("status", flat=True))


def test_each_pool_s_gangs_land_in_its_own_cluster(user, clusters):
    # given two pools on two clusters whose nodes have the same names
    first, second = clusters
    pa, pb = Pool.objects.get(name="pa"), Pool.objects.get(name="pb")
    assert sorted(Node.objects.filter(pool=pa).values_list("name", flat=True)) == ["n1", "n2"]
    assert sorted(Node.objects.filter(pool=pb).values_list("name", flat=True)) == ["n1", "n2"]
    # when a gang is submitted to each and dispatched
    wa, _ = _submit_and_dispatch(user, pa, "wa")
    wb, _ = _submit_and_dispatch(user, pb, "wb")
    # then each cluster holds exactly its own pool's two pods
    assert {pod["metadata"]["labels"]["osmo.nvidia.com/pool"] for pod in first.pods.values()} == {"pa"}
    assert {pod["metadata"]["labels"]["osmo.nvidia.com/pool"] for pod in second.pods.values()} == {"pb"}
    assert len(first.pods) == len(second.pods) == 2
    pods_sync(pool_id=pa.pk)
    pods_sync(pool_id=pb.pk)
    assert _statuses(wa) == _statuses(wb) == {"RUNNING"}
    assert set(Backend.objects.filter(name__in=["cluster-a", "cluster-b"]).values_list("status", flat=True)) == {
        "ONLINE"}


def test_a_cluster_down_takes_only_its_pool_offline_and_is_reconciled_when_it_returns(user, user_client,
                                                                                      clusters):
    # given a running gang in each cluster
    first, second = clusters
    pa, pb = Pool.objects.get(name="pa"), Pool.objects.get(name="pb")
    running_a, _ = _submit_and_dispatch(user, pa, "wa")
    running_b, _ = _submit_and_dispatch(user, pb, "wb")
    pods_sync(pool_id=pa.pk)
    pods_sync(pool_id=pb.pk)

    # when cluster-a stops answering and its backend's sync runs
    first.stop()
    kubernetes_backend_sync(backend="cluster-a")
    kubernetes_backend_sync(backend="cluster-b")

    # then cluster-a is OFFLINE since now, with why; its pool says so in the API; cluster-b is ONLINE
    backend = Backend.objects.get(name="cluster-a")
    assert backend.status == "OFFLINE" and backend.offline_since is not None
    assert "sync of pool pa" in backend.last_error
    assert Backend.objects.get(name="cluster-b").status == "ONLINE"
    answer = user_client.get("/api/pools/pa/").json()
    assert (answer["backend"], answer["backend_kind"], answer["backend_status"]) == ("cluster-a", "kubernetes",
                                                                                     "OFFLINE")
    listed = {row["name"]: row for row in user_client.get("/api/backends/").json()["results"]}
    assert (listed["cluster-a"]["status"], listed["cluster-a"]["pools"], listed["cluster-a"]["nodes"]) == (
        "OFFLINE", ["pa"], 2)
    assert "kubeconfig" not in str(listed["cluster-a"]).replace('"connection": "kubeconfig"', "").replace(
        "'connection': 'kubeconfig'", "")
    # a gang queued on it waits, naming the backend and since when
    queued, _ = workflow_submit(user=user, pool_name="pa", spec=gang_spec("queued", 1, 4, key=None))
    placement_cycle_run(pool_id=pa.pk)
    group = TaskGroup.objects.get(workflow=queued)
    assert group.status == "SCHEDULING"
    assert group.unschedulable_reason["code"] == "backend_not_online"
    assert group.unschedulable_reason["backend"] == "cluster-a"
    assert "backend cluster-a of pool pa is OFFLINE since " in group.unschedulable_reason["message"]
    # its running tasks keep their status (the pod sync cannot read them: it raises for a retry)
    with pytest.raises(DispatchTransientError):
        pods_sync(pool_id=pa.pk)
    assert _statuses(running_a) == {"RUNNING"}
    # the other cluster's work completes meanwhile
    second.pods_set_phase("Succeeded")
    pods_sync(pool_id=pb.pk)
    assert _statuses(running_b) == {"COMPLETED"}

    # when cluster-a answers again (its pods kept, as a cluster's are)
    first.start()
    kubernetes_backend_sync(backend="cluster-a")
    placement_cycle_run(pool_id=pa.pk)
    gang_dispatch(group_id=group.pk)
    pods_sync(pool_id=pa.pk)

    # then it is ONLINE, the queued gang was placed and runs there, the first gang still runs, and no
    # pod was ever created twice
    assert Backend.objects.get(name="cluster-a").status == "ONLINE"
    assert Backend.objects.get(name="cluster-a").last_error == ""
    assert _statuses(running_a) == {"RUNNING"}
    assert _statuses(queued) == {"RUNNING"}
    assert len(first.pods) == 3
    assert set(first.creates.values()) == {1}
    assert len(second.creates) == 2 and set(second.creates.values()) == {1}


def test_a_refused_node_re_read_decides_a_missing_pod_at_once_and_names_the_permission(user, clusters):
    """A pod deleted behind the service's back, on a cluster whose credentials may not read nodes: the
    task used to stay RUNNING for ever (each sync waited for the next); now the one sync decides."""
    # given a running gang on cluster-a
    first, _second = clusters
    pa = Pool.objects.get(name="pa")
    workflow, _ = _submit_and_dispatch(user, pa, "wa")
    pods_sync(pool_id=pa.pk)
    # when a pod is deleted by someone else and the credentials may not get nodes
    gone = sorted(first.pods)[0]
    del first.pods[gone]
    first.forbidden.add(("GET", "/api/v1/nodes/"))
    pods_sync(pool_id=pa.pk)
    # then that task failed with the refusal's words, and the backend says what it lacks
    task = Task.objects.get(workflow=workflow, pod_name=gone)
    assert task.status == "FAILED_BACKEND_ERROR"
    assert f"pod disappeared from the backend; its node {task.node.name} could not be read: HTTP 403" in (
        task.failure_message)
    assert 'cannot get resource "nodes"' in task.failure_message
    backend = Backend.objects.get(name="cluster-a")
    assert backend.status == "ONLINE"  # its syncs (list, not get) still work
    assert backend.permission_error.startswith("re-reading nodes of pool pa: HTTP 403 Forbidden: ")
    assert 'cannot get resource "nodes" in API group "" at the cluster scope' in backend.permission_error


def test_a_sync_refused_by_rbac_takes_the_backend_offline_naming_verb_and_resource(clusters):
    first, _second = clusters
    first.forbidden.add(("GET", "/api/v1/pods"))
    kubernetes_backend_sync(backend="cluster-a")
    backend = Backend.objects.get(name="cluster-a")
    assert backend.status == "OFFLINE"
    assert backend.last_error.startswith("sync of pool pa: HTTP 403 Forbidden: pods is forbidden: User ")
    assert 'cannot list resource "pods" in API group "" at the cluster scope' in backend.last_error
    assert Backend.objects.get(name="cluster-b").status == "ONLINE"


def test_taints_tolerated_at_import_are_kept_by_the_periodic_sync(tmp_path, monkeypatch, settings):
    """As an operator following docs/pools.md: a pool imported with --tolerate-taint nvidia.com/gpu was
    cordoned whole by the next periodic sync, which tolerated only OSMO_K8S_TOLERATED_TAINTS."""
    from django.core.management import call_command

    from workflows.tasks import kubernetes_sync

    # given a cluster whose GPU nodes carry the nvidia.com/gpu NoSchedule taint, reached by the
    # environment's kubeconfig (the built-in kubernetes backend)
    cluster = FakeCluster(NODES).start()
    cluster.taints = {name: [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
                      for name in NODES}
    config = tmp_path / "kubeconfig"
    config.write_text(kubeconfig_for(cluster.url))
    monkeypatch.setenv("KUBECONFIG", str(config))
    settings.OSMO_K8S_TOLERATED_TAINTS = []
    inventory_import_text(DOCUMENT.format(pool="gpus", backend="kubernetes"))
    try:
        # when the operator imports it tolerating the taint, and the periodic sync runs after
        call_command("sync_nodes_from_kubernetes", "gpus", "--kubeconfig", str(config),
                     "--tolerate-taint", "nvidia.com/gpu")
        imported = dict(Node.objects.filter(pool__name="gpus").values_list("name", "schedulable"))
        kubernetes_sync()
        synced = dict(Node.objects.filter(pool__name="gpus").values_list("name", "schedulable"))
    finally:
        cluster.stop()
    # then the nodes stay schedulable: the pool keeps the taints its operator chose
    assert imported == {"n1": True, "n2": True}
    assert synced == {"n1": True, "n2": True}
    assert Pool.objects.get(name="gpus").k8s_tolerated_taints == ["nvidia.com/gpu"]


def test_a_backend_s_scheduler_name_and_node_condition_rules_apply_to_its_cluster_only(user, clusters):
    # given cluster-a's backend names a scheduler and makes DiskPressure unschedulable; n2 of both
    # clusters reports DiskPressure
    first, second = clusters
    backend_set(name="cluster-a", scheduler_name="osmo-gang-scheduler", node_conditions=["DiskPressure"])
    for cluster in (first, second):
        cluster.conditions = {"n2": [{"type": "DiskPressure", "status": "True"}]}
    # when both backends sync and a gang is dispatched to each
    kubernetes_backend_sync(backend="cluster-a")
    kubernetes_backend_sync(backend="cluster-b")
    _submit_and_dispatch(user, Pool.objects.get(name="pa"), "wa")
    _submit_and_dispatch(user, Pool.objects.get(name="pb"), "wb")
    # then only cluster-a's n2 is unschedulable, and only cluster-a's pods name the scheduler
    schedulable = set(Node.objects.filter(schedulable=True).values_list("pool__name", "name"))
    assert schedulable == {("pa", "n1"), ("pb", "n1"), ("pb", "n2")}
    assert {pod["spec"].get("schedulerName") for pod in first.pods.values()} == {"osmo-gang-scheduler"}
    assert {pod["spec"].get("schedulerName") for pod in second.pods.values()} == {None}
    assert {pod["spec"]["nodeName"] for pod in first.pods.values()} == {"n1"}


def test_with_several_backends_the_periodic_sync_sends_one_task_per_backend(clusters, monkeypatch,
                                                                           django_capture_on_commit_callbacks):
    from workflows.tasks import kubernetes_sync

    sent = []
    monkeypatch.setattr(jobs, "_send_expiring", lambda name, expires, **kwargs: sent.append((name, expires, kwargs)))
    with django_capture_on_commit_callbacks(execute=True):
        kubernetes_sync()
    assert sent == [(jobs.KUBERNETES_BACKEND_SYNC, 30.0, {"backend": "cluster-a"}),
                    (jobs.KUBERNETES_BACKEND_SYNC, 30.0, {"backend": "cluster-b"})]


def test_a_dispatch_refused_by_rbac_names_the_verb_in_the_backend_until_a_pod_is_created(user, clusters):
    # given cluster-a refuses to create pods
    first, _second = clusters
    pa = Pool.objects.get(name="pa")
    first.forbidden.add(("POST", "/api/v1/namespaces/osmo-jobs/pods"))
    # when a gang is dispatched there
    refused, _ = _submit_and_dispatch(user, pa, "refused")
    # then the gang failed with the API's words and the backend keeps them
    assert _statuses(refused) == {"FAILED_BACKEND_ERROR"}
    backend = Backend.objects.get(name="cluster-a")
    assert backend.permission_error.startswith("dispatch to pool pa: Kubernetes API create pod osmo-jobs/refused-")
    assert 'pods is forbidden: User "system:serviceaccount:osmo:osmo-scheduler" cannot create resource "pods"' in (
        backend.permission_error)
    # and once the permission is granted, the next pod created clears it
    first.forbidden.clear()
    placed, _ = _submit_and_dispatch(user, pa, "placed")
    assert Backend.objects.get(name="cluster-a").permission_error == ""
    assert len(first.pods) == 2
