"""The periodic Kubernetes sync (docs/kubernetes.md, "What the cluster says"): the real kubernetes client
talks to a local HTTP server that serves node and pod list pages in the API's shapes (``metadata.continue``
tokens, a 410 Gone ``Status`` for an expired token), and the pool's rows follow: readiness, taints, and
the requests of every pod this service did not create as the nodes' external usage."""

from __future__ import annotations

import json
import sys

import pytest
from kubernetes.client.exceptions import ApiException

from scheduler.inventory import foreign_usage, pod_requests
from scheduler.models import Node, Pool
from scheduler.services import pool_follow_kubernetes
from scheduler.services.reservations import pool_epochs
from tests.factories import make_pool
from tests.scheduler.fake_kube_api import FakeApiServer

pytestmark = pytest.mark.django_db
GiB = 1024**3
NON_TERMINAL = "status.phase!=Succeeded,status.phase!=Failed"


def node(name: str, *, ready: str | None = "True", gpu: str = "4", taints: list | None = None,
         unschedulable: bool = False, rack: str = "r1") -> dict:
    """One ``/api/v1/nodes`` item as the apiserver answers it."""
    conditions = [] if ready is None else [
        {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory"},
        {"type": "Ready", "status": ready, "reason": "KubeletReady" if ready == "True" else "NodeStatusUnknown",
         "lastTransitionTime": "2026-11-27T00:00:00Z"},
    ]
    spec: dict = {"podCIDR": "10.244.1.0/24", "providerID": f"baremetal://{name}"}
    if taints:
        spec["taints"] = taints
    if unschedulable:
        spec["unschedulable"] = True
    return {
        "metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": "918001",
                     "labels": {"kubernetes.io/hostname": name, "nvidia.com/gpu.present": "true", "rack": rack}},
        "spec": spec,
        "status": {"capacity": {"cpu": "144", "memory": "960Gi", "nvidia.com/gpu": gpu, "pods": "110"},
                   "allocatable": {"cpu": "144", "memory": "960Gi", "ephemeral-storage": "1Ti",
                                   "nvidia.com/gpu": gpu, "pods": "110"},
                   "conditions": conditions},
    }


def pod(name: str, node_name: str | None, *, namespace: str = "team-b", gpu: str | None = None, cpu: str = "1",
        ours: bool = False, phase: str = "Running", init_gpu: str | None = None) -> dict:
    """One ``/api/v1/pods`` item (all namespaces)."""
    labels = {"app": name}
    if ours:
        labels.update({"app.kubernetes.io/managed-by": "osmo", "osmo.nvidia.com/pool": "shared"})
    requests = {"cpu": cpu, "memory": "1Gi"}
    if gpu is not None:
        requests["nvidia.com/gpu"] = gpu
    spec: dict = {"containers": [{"name": "main", "image": "busybox", "resources": {"requests": requests}}],
                  "restartPolicy": "Always"}
    if node_name is not None:
        spec["nodeName"] = node_name
    if init_gpu is not None:
        spec["initContainers"] = [{"name": "init", "image": "busybox",
                                   "resources": {"requests": {"nvidia.com/gpu": init_gpu}}}]
    return {"metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}", "labels": labels},
            "spec": spec, "status": {"phase": phase}}


def listing(kind: str, items: list, token: str | None = None) -> dict:
    metadata: dict = {"resourceVersion": "918273"}
    if token:
        metadata.update({"continue": token, "remainingItemCount": 1})
    return {"kind": kind, "apiVersion": "v1", "metadata": metadata, "items": items}



def cluster(nodes: list[dict], pods: list[dict]) -> dict[str, dict[str | None, dict]]:
    """Nodes and pods each served as two pages (the first with a continue token)."""
    half_nodes, half_pods = (len(nodes) + 1) // 2, (len(pods) + 1) // 2
    return {
        "/api/v1/nodes": {None: listing("NodeList", nodes[:half_nodes], "nodes-2"),
                          "nodes-2": listing("NodeList", nodes[half_nodes:])},
        "/api/v1/pods": {None: listing("PodList", pods[:half_pods], "pods-2"),
                         "pods-2": listing("PodList", pods[half_pods:])},
    }


def follow(server: FakeApiServer, pool: Pool):
    return pool_follow_kubernetes(pool=pool, core_v1=server.core(), managed_by_label="app.kubernetes.io/managed-by",
                                  managed_by="osmo", page_size=2)


def _rows(pool: Pool) -> dict[str, tuple]:
    return {n.name: (n.schedulable, n.gpu, n.used_gpu, n.used_cpu_millis)
            for n in Node.objects.filter(pool=pool).order_by("name")}


NODES = [node("n1"), node("n2", ready="False"),
         node("n3", taints=[{"key": "example.com/maint", "effect": "NoExecute"}]), node("n4", ready="Unknown")]
PODS = [
    pod("other-train", "n1", gpu="2", cpu="8"),  # another tenant: counted
    pod("ours-0", "n1", namespace="osmo", gpu="4", ours=True),  # ours (even if its task is gone): not counted
    pod("daemon", "n1", namespace="kube-system", cpu="500m"),  # a daemonset pod: counted
    pod("login", "login-0", gpu="1"),  # another pool's node: not counted
    pod("initial", "n3", gpu="1", init_gpu="3"),  # an init container larger than the containers
    pod("unbound", None, gpu="8"),  # not bound to a node yet: holds nothing
]


def test_the_sync_follows_readiness_taints_and_other_pods(settings):
    # given a Kubernetes pool that knows none of its nodes yet
    pool = make_pool("shared", keys=[("rack", "rack")], backend="kubernetes")
    with FakeApiServer(cluster(NODES, PODS)) as server:
        # when
        report = follow(server, pool)
    # then every node is known: NotReady/Unknown and tainted nodes unschedulable; other pods' requests as usage
    assert _rows(pool) == {
        "n1": (True, 4, 2, 8500),
        "n2": (False, 4, 0, 0),
        "n3": (False, 4, 3, 1000),
        "n4": (False, 4, 0, 0),
    }
    # two pages of each list, non-terminal pods of all namespaces only
    assert [path for path, _query in server.requests] == ["/api/v1/nodes", "/api/v1/nodes", "/api/v1/pods",
                                                          "/api/v1/pods"]
    pod_queries = [query for path, query in server.requests if path == "/api/v1/pods"]
    assert all(query["fieldSelector"] == [NON_TERMINAL] and query["limit"] == ["2"] for query in pod_queries)
    assert (report.created, report.foreign_pods, report.requests) == (4, 3, 4)
    pool.refresh_from_db()
    assert pool.k8s_synced_at is not None
    assert {key: value for key, value in pool.k8s_sync.items() if key != "seconds"} == {
        "nodes_created": 4, "nodes_updated": 0, "nodes_unchanged": 0, "nodes_cordoned": 0, "nodes_skipped": 0,
        "foreign_pods": 3, "requests": 4}


def test_a_node_ready_again_is_schedulable_again_and_an_unchanged_cluster_changes_nothing():
    # given a pool synced while n2 was NotReady
    pool = make_pool("shared", keys=[("rack", "rack")], backend="kubernetes")
    with FakeApiServer(cluster(NODES, PODS)) as server:
        follow(server, pool)
    epochs = pool_epochs(pool.pk)
    # when the same cluster is read again
    with FakeApiServer(cluster(NODES, PODS)) as server:
        unchanged = follow(server, pool)
    # then nothing is written and the inventory epoch stays
    assert (unchanged.updated, unchanged.unchanged, pool_epochs(pool.pk)) == (0, 4, epochs)
    # when n2 is Ready again and the other tenant's pod finished (no longer listed)
    ready = [node("n1"), node("n2"), NODES[2], NODES[3]]
    with FakeApiServer(cluster(ready, [p for p in PODS if p["metadata"]["name"] != "other-train"])) as server:
        report = follow(server, pool)
    # then n2 is schedulable, n1 holds only the daemon's CPU, and the inventory epoch moved on
    assert _rows(pool)["n2"] == (True, 4, 0, 0)
    assert _rows(pool)["n1"] == (True, 4, 0, 500)
    assert report.updated == 2
    assert pool_epochs(pool.pk)[1] > epochs[1]
    pool.refresh_from_db()
    assert (pool.k8s_sync["nodes_updated"], pool.k8s_sync["foreign_pods"]) == (2, 2)


def test_a_node_the_cluster_no_longer_lists_is_cordoned():
    # given a synced pool
    pool = make_pool("shared", keys=[("rack", "rack")], backend="kubernetes")
    with FakeApiServer(cluster(NODES, PODS)) as server:
        follow(server, pool)
    # when n4 is deleted from the cluster
    with FakeApiServer(cluster(NODES[:3], PODS)) as server:
        report = follow(server, pool)
    # then its row stays, cordoned
    assert report.marked_unschedulable == 0  # n4 was NotReady (Unknown): already unschedulable
    assert Node.objects.get(pool=pool, name="n4").schedulable is False
    # when n1 goes too
    with FakeApiServer(cluster(NODES[1:3], PODS)) as server:
        report = follow(server, pool)
    assert report.marked_unschedulable == 1
    assert Node.objects.get(pool=pool, name="n1").schedulable is False


def test_an_expired_continue_token_restarts_the_listing():
    # given a cluster whose first pod continue token has expired (410 Gone) when asked for
    pool = make_pool("shared", keys=[("rack", "rack")], backend="kubernetes")
    with FakeApiServer(cluster(NODES, PODS), expired={"pods-2"}) as server:
        # when
        report = follow(server, pool)
    # then the pod list was started again from its first page, and counted once
    assert [(path, query.get("continue")) for path, query in server.requests if path == "/api/v1/pods"] == [
        ("/api/v1/pods", None), ("/api/v1/pods", ["pods-2"]), ("/api/v1/pods", None), ("/api/v1/pods", ["pods-2"])]
    assert report.foreign_pods == 3
    assert _rows(pool)["n1"] == (True, 4, 2, 8500)


def test_a_token_that_keeps_expiring_fails_the_sync_and_writes_nothing():
    # given a cluster that answers 410 Gone for every continued pod page
    pool = make_pool("shared", keys=[("rack", "rack")], backend="kubernetes")
    with FakeApiServer(cluster(NODES, PODS), expired={"pods-2"}, always_expired=True) as server:
        # when / then
        with pytest.raises(ApiException) as raised:
            follow(server, pool)
    assert raised.value.status == 410
    assert Node.objects.filter(pool=pool).count() == 0
    pool.refresh_from_db()
    assert (pool.k8s_synced_at, pool.k8s_sync) == (None, None)


def test_the_beat_task_syncs_every_kubernetes_pool(tmp_path, monkeypatch, settings):
    # given a Kubernetes pool, a simulated one, and a kubeconfig naming the fake cluster
    from scheduler import dispatch
    from workflows.tasks import kubernetes_sync

    k8s = make_pool("shared", keys=[("rack", "rack")], backend="kubernetes")
    simulated = make_pool("sim", keys=[("rack", "rack")])
    with FakeApiServer(cluster(NODES, PODS)) as server:
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "c",
            "clusters": [{"name": "c", "cluster": {"server": server.url}}],
            "users": [{"name": "u", "user": {"token": "t"}}],
            "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
        monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
        monkeypatch.setattr(dispatch, "_BACKENDS", {})
        settings.OSMO_K8S_SYNC_PAGE_SIZE = 500
        # when
        kubernetes_sync()
    # then the Kubernetes pool follows the cluster in one page of each list; the simulated pool is untouched
    assert _rows(k8s)["n1"] == (True, 4, 2, 8500)
    assert len(server.requests) == 4  # the two-page fixture: page sizes are the server's here
    assert Node.objects.filter(pool=simulated).count() == 0
    k8s.refresh_from_db()
    simulated.refresh_from_db()
    assert k8s.k8s_sync["foreign_pods"] == 3
    assert simulated.k8s_synced_at is None


def test_the_beat_task_without_a_kubernetes_pool_is_one_query_and_loads_no_client(monkeypatch,
                                                                                  django_assert_num_queries):
    # given only a simulated pool, in a process that has not loaded the Kubernetes backend
    from workflows.tasks import kubernetes_sync

    simulated = make_pool("sim", keys=[("rack", "rack")])
    monkeypatch.delitem(sys.modules, "scheduler.dispatch.kubernetes", raising=False)
    # when the beat's run comes
    with django_assert_num_queries(1):
        kubernetes_sync()
    # then it read the pools and stopped: no client loaded, the simulated pool untouched
    assert "scheduler.dispatch.kubernetes" not in sys.modules
    simulated.refresh_from_db()
    assert simulated.k8s_synced_at is None


def test_the_beat_task_survives_an_unreachable_cluster(tmp_path, monkeypatch):
    # given a Kubernetes pool whose cluster is gone (a closed port)
    from scheduler import dispatch
    from workflows.tasks import kubernetes_sync

    pool = make_pool("shared", keys=[("rack", "rack")], backend="kubernetes")
    with FakeApiServer({}) as server:
        url = server.url
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": url}}], "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    monkeypatch.setattr(dispatch, "_BACKENDS", {})
    # when
    kubernetes_sync()
    # then nothing was recorded and no exception escaped
    pool.refresh_from_db()
    assert (pool.k8s_synced_at, Node.objects.filter(pool=pool).count()) == (None, 0)


def test_the_beat_schedule_syncs_every_30_seconds_by_default(settings):
    # the deployed settings' schedule (the test settings keep only a fast tick for beat)
    from osmo.settings import base

    entry = base.CELERY_BEAT_SCHEDULE["workflows-kubernetes-sync"]
    assert (entry["task"], entry["schedule"]) == ("workflows.kubernetes_sync", 30.0)
    assert settings.CELERY_TASK_ROUTES["workflows.kubernetes_sync"] == {"queue": "default"}


def test_pod_requests_follow_the_schedulers_rule():
    # given a pod whose init container asks for more GPUs than its containers, with overhead
    item = pod("p", "n1", gpu="1", cpu="2", init_gpu="3")
    item["spec"]["containers"].append({"name": "side", "resources": {"requests": {"cpu": "250m", "memory": "512Mi"}}})
    item["spec"]["overhead"] = {"cpu": "100m"}
    # when / then
    assert pod_requests(item) == {"gpu": 3, "cpu": 2350, "memory": GiB + GiB // 2, "storage": 0}


def test_terminal_and_unbound_pods_hold_nothing():
    pods = [pod("done", "n1", gpu="4", phase="Succeeded"), pod("failed", "n1", gpu="4", phase="Failed"),
            pod("unbound", None, gpu="4")]
    usage, counted = foreign_usage(pods, nodes=["n1"], managed_by_label="app.kubernetes.io/managed-by",
                                   managed_by="osmo")
    assert (usage, counted) == ({"n1": {"gpu": 0, "cpu": 0, "memory": 0, "storage": 0}}, 0)


def test_the_admin_and_the_pool_page_show_the_last_sync(admin_client):
    # given a Kubernetes pool synced once, and one never synced
    pool = make_pool("shared", keys=[("rack", "rack")], backend="kubernetes")
    make_pool("later", keys=[("rack", "rack")], backend="kubernetes")
    with FakeApiServer(cluster(NODES, PODS)) as server:
        follow(server, pool)
    seconds = Pool.objects.get(pk=pool.pk).k8s_sync["seconds"]
    words = f"nodes: 4 created; 3 other pods on its nodes; 4 requests in {seconds} s"
    # when
    page = admin_client.get("/pools/shared/").content.decode()
    never = admin_client.get("/pools/later/").content.decode()
    change = admin_client.get(f"/admin/scheduler/pool/{pool.pk}/change/").content.decode()
    # then
    assert "Kubernetes sync" in page and words in page
    assert "never synced" in never
    assert words in change
