"""The backends page and the pool page's backend (docs/pages.md): which cluster a pool runs on, and
when that cluster does not answer, since when and why."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from scheduler.models import Backend, Pool
from scheduler.services.backends import backend_set
from tests.dispatch.fake_cluster import kubeconfig_for
from tests.factories import make_node

pytestmark = pytest.mark.django_db


def _text(response) -> str:
    return re.sub(r"\s+", " ", response.content.decode())


@pytest.fixture
def offline_pool():
    backend_set(name="cluster-a", kubeconfig=kubeconfig_for("https://10.0.0.1:6443", token="never-shown"),
                description="GPU cloud", dashboard_links={"Grafana": "https://grafana.example/d/a"})
    Backend.objects.filter(name="cluster-a").update(
        status="OFFLINE", offline_since=timezone.now() - timedelta(minutes=5),
        last_error="sync of pool pa: HTTPConnectionPool: Connection refused")
    pool = Pool.objects.create(name="pa", backend_ref=Backend.objects.get(name="cluster-a"))
    make_node(pool, "n1", {})
    return pool


def test_the_pool_page_names_its_backend_and_says_it_is_offline(client, user, offline_pool):
    client.force_login(user)
    page = _text(client.get("/pools/pa/"))
    listing = _text(client.get("/pools/"))
    assert '<dt>Backend</dt><dd><a href="/backends/#backend-cluster-a">cluster-a</a>' in page
    assert re.search(r'id="pool-backend-status"[^>]*>OFFLINE since <span[^>]*>5 minutes</span>', page)
    assert "nothing is placed in this pool until it answers again; running tasks keep running" in page
    assert "backend OFFLINE</span>" in listing


def test_the_backends_page_lists_every_backend_with_its_health(client, user, offline_pool):
    client.force_login(user)
    response = client.get("/backends/")
    page = _text(response)
    assert response.status_code == 200
    row = page.split('id="backend-cluster-a"')[1].split("</tr>")[0]
    assert "<strong>cluster-a</strong>" in row and "GPU cloud" in row
    assert '<span class="badge st-amber">OFFLINE</span>' in row
    assert "sync of pool pa: HTTPConnectionPool: Connection refused" in row
    assert '<a href="/pools/pa/">pa</a>' in row and '<td class="num">1</td>' in row
    assert '<a href="https://grafana.example/d/a" rel="noopener">Grafana</a>' in row
    assert 'id="backend-simulated"' in page
    assert "never-shown" not in page
    assert client.get("/backends/").status_code == 200
    client.logout()
    assert client.get("/backends/").status_code == 302
