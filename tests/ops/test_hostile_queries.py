"""What hostile query parameters may cost (docs/design.md §7: refused with the envelope naming the
parameter, never a 5xx)."""

from __future__ import annotations

import pytest

from tests.factories import make_node, make_pool

pytestmark = pytest.mark.django_db


@pytest.fixture
def pool():
    pool = make_pool("filtered", keys=[("zone", "zone"), ("rack", "rack")])
    make_node(pool, "a1", {"zone": "z1", "rack": "r1"})
    return pool


@pytest.mark.parametrize(
    ("name", "term"), [("label", "zone"), ("topology", "zone=z1")], ids=["_case_label", "_case_topology"]
)
def test_a_node_filter_of_thousands_of_terms_is_refused_naming_it(user_client, pool, name, term):
    """Replays the attack run's finding: ``?label=a,a,...`` of 4,000 terms (an 8 KB query string) spent 2 s
    of CPU building one condition per term, then answered 503 ``database_unavailable`` on SQLite
    ("Expression tree is too large"), and 200 after ~3 s on PostgreSQL for a pool of one node."""
    # when
    response = user_client.get(f"/api/pools/filtered/nodes/?{name}={','.join([term] * 4000)}")

    # then
    assert response.status_code == 400
    assert response.json() == {"code": "validation_error", "message": "The request is invalid.", "details": {
        "errors": [{"path": name, "message": "at most 32 comma-separated terms, not 4000"}]}}


@pytest.mark.parametrize(
    ("name", "term"), [("label", "zone"), ("topology", "zone=z1")], ids=["_case_label", "_case_topology"]
)
def test_a_node_filter_of_32_terms_is_applied(user_client, pool, name, term):
    # when
    response = user_client.get(f"/api/pools/filtered/nodes/?{name}={','.join([term] * 32)}")

    # then
    assert response.status_code == 200
    assert [node["name"] for node in response.json()["results"]] == ["a1"]
