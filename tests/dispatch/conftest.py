"""Fixtures for the dispatch backend tests: pure, no database, a fake Kubernetes API over real HTTP."""

from __future__ import annotations

import pytest
from kubernetes import client as k8s_client

from scheduler.dispatch.kubernetes import KubernetesBackend
from scheduler.dispatch.local import LocalBackend
from tests.dispatch.fake_kube import FakeKubeApi
from tests.dispatch.kube_pool import kube_pool  # noqa: F401  (a fixture: the database tests' Kubernetes pool)
from workflows import jobs


@pytest.fixture
def kube_api():
    """A running fake API server; the test fails if it got a request it had no scripted answer for."""
    api = FakeKubeApi().start()
    yield api
    api.settle()
    api.stop()
    assert not api.unexpected, f"unscripted requests: {[(r.method, r.path) for r in api.unexpected]}"
    assert not api.socket_errors, f"websocket scripts failed: {api.socket_errors}"


@pytest.fixture
def kube_backend(kube_api, monkeypatch):
    """A backend whose ApiClient points at the fake server (no kubeconfig involved)."""
    monkeypatch.delenv("OSMO_K8S_PENDING_TIMEOUT", raising=False)
    configuration = k8s_client.Configuration()
    configuration.host = kube_api.url
    api_client = k8s_client.ApiClient(configuration)
    yield KubernetesBackend.from_settings(api_client=api_client, request_timeout=(2.0, 5.0))
    api_client.close()


@pytest.fixture
def inline_jobs(monkeypatch):
    """Jobs are not sent to the broker: the test runs what it needs itself."""
    monkeypatch.setattr(jobs, "_send", lambda name, countdown=None, **kwargs: None)


@pytest.fixture
def local(tmp_path):
    """A local backend whose pods live under the test's folder; anything a failed test left running is
    stopped."""
    backend = LocalBackend(tmp_path / "pods")
    yield backend
    for namespace in (tmp_path / "pods").glob("[!.]*"):  # (.sandbox: the seccomp filter, the networks)
        for folder in namespace.iterdir():
            backend._remove(folder, 0)
    backend.networks_sweep()  # a network whose last supervisor a delete killed before it left
