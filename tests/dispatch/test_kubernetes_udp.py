"""``port-forward --udp`` into a task of a Kubernetes pool: refused before any call to the API server, naming
why (the API's ``pods/portforward`` carries TCP streams only; kubectl's cannot forward UDP either)."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from tests.factories import make_node, make_pool
from tests.sessions.conftest import running
from workflows.models import TaskSession
from workflows.sessions import service

pytestmark = pytest.mark.django_db


def test_kubernetes_refuses_udp_naming_its_api(user, kube_api, kube_backend, monkeypatch):
    # given a running task of a Kubernetes pool, whose backend talks to the fake API server
    monkeypatch.setattr(service, "backend_for", lambda name, **options: kube_backend)
    pool = make_pool("kube", keys=[], backend="kubernetes", k8s_namespace="osmo-jobs")
    make_node(pool, "n1", {}, gpu=0)
    workflow = running(user, pool)
    client = APIClient()
    client.force_authenticate(user)

    # when a UDP forward is asked for
    answer = client.post(f"/api/workflows/{workflow.workflow_id}/tasks/main/sessions/",
                         {"kind": "port-forward-udp", "port": 53}, format="json")

    # then it is refused in the envelope, naming the backend and why; nothing was recorded or asked of the API
    assert (answer.status_code, answer.json()["code"]) == (409, "sessions_unsupported")
    assert "the Kubernetes API's port-forward carries TCP only" in answer.json()["message"]
    assert answer.json()["details"]["backend"] == "kubernetes"
    assert not TaskSession.objects.exists()
    assert not [r for r in kube_api.requests if "/exec" in r.path or "/portforward" in r.path]
