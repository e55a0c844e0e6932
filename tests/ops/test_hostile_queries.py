"""What hostile query parameters may cost (docs/design.md §7: refused with the envelope naming the
parameter, never a 5xx)."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.test import override_settings

from credentials.models import Credential
from tests.factories import make_api_key, make_node, make_pool

pytestmark = pytest.mark.django_db


def rates(**overrides: str):
    return override_settings(REST_FRAMEWORK={
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {**settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], **overrides},
    })


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


def _guess_then_staff(client, staff_user, path: str):
    """Three wrong tokens from 10.77.9.1 at ``path`` under a rate of 3 failures a minute; then a staff token
    new to that address at the API and at ``path``, and at ``path`` from another address."""
    staff_token = make_api_key(staff_user)
    staff = {"HTTP_AUTHORIZATION": f"Token {staff_token}"}
    with rates(auth_failure="3/min"):
        wrong = [client.get(path, HTTP_AUTHORIZATION=f"Token {index:040d}", REMOTE_ADDR="10.77.9.1")
                 for index in range(3)]
        api = client.get("/api/pools/", REMOTE_ADDR="10.77.9.1", **staff)
        probe = client.get(path, REMOTE_ADDR="10.77.9.1", **staff)
        elsewhere = client.get(path, REMOTE_ADDR="10.77.9.2", **staff)
    return wrong, api, probe, elsewhere


def test_wrong_tokens_at_metrics_count_against_the_api_throttle(client, staff_user):
    """Replays the attack run's finding: ``/metrics`` (and ``/readyz``) looked every presented token up
    without the API's failed-token throttle: 25 wrong tokens from one address all answered 401 there,
    while ``/api/`` answered 429 from the 21st."""
    # when
    wrong, api, probe, elsewhere = _guess_then_staff(client, staff_user, "/metrics")

    # then the guesses count at the API, and the address gets no more token lookups at the probe
    assert [response.status_code for response in wrong] == [401] * 3
    assert api.status_code == 429
    assert probe.status_code == 401
    assert elsewhere.status_code == 200


def test_wrong_tokens_at_readyz_count_against_the_api_throttle(client, staff_user):
    # when
    wrong, api, probe, elsewhere = _guess_then_staff(client, staff_user, "/readyz")

    # then: no detail for the guesses nor for the throttled address; the detail elsewhere
    assert [response.json()["details"] for response in wrong] == [{}] * 3
    assert api.status_code == 429
    assert probe.json()["details"] == {}
    assert set(elsewhere.json()["details"]["checks"]) >= {"database", "broker"}


def test_a_credential_of_too_many_keys_is_refused_in_one_problem(user_client):
    """Replays the attack run's finding: a 2 MB credential of 100,000 unknown keys was answered with a
    problem per key, 10.8 MB."""
    # given
    values = {"registry": "r", "username": "u", "auth": "a", **{f"x{index}": "y" for index in range(10_000)}}

    # when
    response = user_client.post("/api/credentials/", {"name": "c", "kind": "registry", "values": values},
                                format="json")

    # then
    assert response.status_code == 400
    assert response.json()["details"]["errors"] == [{"path": "values", "message": "at most 32 keys, got 10003"}]
    assert Credential.objects.count() == 0


@pytest.mark.parametrize("method", ["get", "delete"])
def test_a_credential_named_with_a_nul_is_a_404(user_client, method):
    """Replays the attack run's finding: ``GET`` and ``DELETE /api/credentials/a%00/`` answered 500 on
    PostgreSQL (a NUL in the query)."""
    # when
    response = getattr(user_client, method)("/api/credentials/a%00/")

    # then
    assert response.status_code == 404
    assert response.json()["code"] == "not_found"
