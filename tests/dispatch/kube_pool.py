"""A Kubernetes pool whose backend talks to the fake API server (:mod:`tests.dispatch.fake_kube`), with
the service's real database, and pods in the API's shapes: what the reconcile and cluster-rule tests
share. ``kube_pool`` is registered as a fixture by ``tests/dispatch/conftest.py``."""

from __future__ import annotations

import pytest
from kubernetes import client as k8s_client

from scheduler.dispatch.kubernetes import KubernetesBackend
from tests.factories import make_node, make_pool
from tests.pipeline.helpers import backend_use, gang_spec
from workflows import jobs
from workflows.models import Task
from workflows.scheduling import pods
from workflows.scheduling.cycle import placement_cycle_run
from workflows.services import workflow_submit

NS = "osmo-jobs"
PODS = f"/api/v1/namespaces/{NS}/pods"


@pytest.fixture
def kube_pool(kube_api, monkeypatch):
    """A Kubernetes pool of two 4-GPU nodes; the backend talks to the fake API server; the pod deletes
    and evictions the service enqueues run inline (as a worker would, at once)."""
    pool = make_pool("kube", keys=[("rack", "rack")], backend="kubernetes", k8s_namespace=NS)
    for name in ("n1", "n2"):
        make_node(pool, name, {"rack": "r1"}, gpu=4)
    configuration = k8s_client.Configuration()
    configuration.host = kube_api.url
    backend = KubernetesBackend(k8s_client.ApiClient(configuration), request_timeout=(2.0, 5.0))
    backend_use(monkeypatch, backend)

    def send(name, countdown=None, **kwargs):
        if name == jobs.POD_DELETE:
            pods.pod_delete(**kwargs)
        elif name == jobs.PODS_EVICT:
            pods.pods_evict(**kwargs)

    monkeypatch.setattr(jobs, "_send", send)
    return pool


def pod_item(name: str, phase: str, node: str = "n1") -> dict:
    return {"metadata": {"name": name, "namespace": NS, "labels": {"app.kubernetes.io/managed-by": "osmo"}},
            "spec": {"nodeName": node, "nodeSelector": {"kubernetes.io/hostname": node},
                     "containers": [{"name": "task", "image": "busybox"}]},
            "status": {"phase": phase}}


def pod_list(*items: dict) -> dict:
    return {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": list(items)}


def placed(user, pool, name: str = "orphan", tasks: int = 1) -> tuple:
    workflow, _ = workflow_submit(user=user, pool_name=pool.name, spec=gang_spec(name, tasks, 4, key=None))
    placement_cycle_run(pool_id=pool.pk)
    task = Task.objects.get(workflow=workflow, name="t0")
    return workflow, task
