"""The periodic Kubernetes sync's metrics (docs/kubernetes.md §9) in the /metrics scrape."""

from __future__ import annotations

import json

import pytest

from tests.factories import make_pool
from tests.ops.test_metrics import scrape, value
from tests.scheduler.test_kubernetes_follow import NODES, PODS, FakeApiServer, cluster

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("metrics_token")]


def _kubeconfig(tmp_path, url: str) -> str:
    path = tmp_path / "kubeconfig"
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": url}}], "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    return str(path)


def test_a_sync_records_its_duration_changes_and_foreign_pods(client, tmp_path, monkeypatch):
    # given a Kubernetes pool and its cluster
    from scheduler import dispatch
    from workflows.tasks import kubernetes_sync

    make_pool("metered", keys=[("rack", "rack")], backend="kubernetes")
    monkeypatch.setattr(dispatch, "_BACKENDS", {})
    with FakeApiServer(cluster(NODES, PODS)) as server:
        monkeypatch.setenv("KUBECONFIG", _kubeconfig(tmp_path, server.url))
        # when
        kubernetes_sync()
    samples = scrape(client)
    # then
    assert value(samples, "osmo_k8s_sync_duration_seconds_count", pool="metered") == 1
    assert value(samples, "osmo_k8s_sync_changes_total", pool="metered", kind="created") == 4
    assert value(samples, "osmo_k8s_sync_changes_total", pool="metered", kind="updated") is None
    assert value(samples, "osmo_k8s_sync_foreign_pods_total", pool="metered") == 3
    assert value(samples, "osmo_k8s_sync_errors_total", pool="metered") is None


def test_a_failed_sync_is_counted(client, tmp_path, monkeypatch):
    # given a Kubernetes pool whose cluster is gone
    from scheduler import dispatch
    from workflows.tasks import kubernetes_sync

    make_pool("unreachable", keys=[("rack", "rack")], backend="kubernetes")
    monkeypatch.setattr(dispatch, "_BACKENDS", {})
    with FakeApiServer({}) as server:
        url = server.url
    monkeypatch.setenv("KUBECONFIG", _kubeconfig(tmp_path, url))
    # when
    kubernetes_sync()
    # then
    samples = scrape(client)
    assert value(samples, "osmo_k8s_sync_errors_total", pool="unreachable") == 1
    assert value(samples, "osmo_k8s_sync_duration_seconds_count", pool="unreachable") is None
