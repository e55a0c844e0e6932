"""The API refuses what its OpenAPI schema says is invalid and accepts what it says is valid: the
schemathesis findings (ST201/ST202) run as staff, each replayed."""

from __future__ import annotations

import pytest

from scheduler.models import Node, Pool
from tests.factories import make_node, make_pool

pytestmark = pytest.mark.django_db


@pytest.fixture
def pool():
    pool = make_pool("agree", keys=[("rack", "rack")])
    make_node(pool, "a1", {"rack": "r1"}, gpu=4)
    return pool


@pytest.mark.parametrize(("url", "name"), [
    ("/api/pools/?offset=null&offset=null", "offset"),
    ("/api/pools/?limit=-1", "limit"),
    ("/api/workflows/?offset=null", "offset"),
    ("/api/pools/agree/nodes/?offset=1.5", "offset"),
    ("/api/pools/agree/nodes/?schedulable=null", "schedulable"),
], ids=["pools offset", "pools limit", "workflows offset", "nodes offset", "nodes schedulable"])
def test_mistyped_query_parameters_are_400(staff_client, pool, url, name):
    # when a declared integer or boolean parameter gets another value
    response = staff_client.get(url)
    # then it is refused, naming the parameter
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["code"] == "validation_error"
    assert [error["path"] for error in body["details"]["errors"]] == [name]


def test_valid_paging_and_flags_still_work(staff_client, pool):
    # when
    paged = staff_client.get("/api/pools/?limit=1&offset=0")
    cordoned = staff_client.get("/api/pools/agree/nodes/?schedulable=false")
    # then
    assert (paged.status_code, paged.json()["count"]) == (200, 1)
    assert (cordoned.status_code, cordoned.json()["count"]) == (200, 0)


def test_a_mistyped_import_flag_is_400_and_stores_nothing(staff_client):
    # when
    response = staff_client.post("/api/pools/import/?prune=null", {"pool": {"name": "imp"}}, format="json")
    # then
    assert response.status_code == 400
    assert response.json()["details"]["errors"] == [{"path": "prune", "message": "must be true or false, not 'null'"}]
    assert not Pool.objects.filter(name="imp").exists()


def test_a_topology_key_label_that_is_not_text_is_400(staff_client):
    # when a key's label is a number (DRF turned it into "0")
    response = staff_client.post("/api/pools/", {"name": "numeric", "topology_keys": [{"key": "rack", "label": 0}]},
                                 format="json")
    # then
    assert response.status_code == 400
    assert response.json()["details"]["errors"] == [
        {"path": "topology_keys[0].label", "message": "Must be text, not int."}]
    assert not Pool.objects.filter(name="numeric").exists()


def test_a_node_with_null_allocated_is_accepted_as_the_schema_says(staff_client, pool):
    # when
    response = staff_client.post("/api/pools/agree/nodes/", {"name": "a2", "labels": {"rack": "r1"},
                                                            "capacity": {"gpu": 2}, "allocated": None}, format="json")
    # then
    assert response.status_code == 201, response.content
    assert Node.objects.filter(pool=pool, name="a2").exists()


@pytest.mark.parametrize(("url", "body", "path"), [
    ("/api/pools/agree/nodes/", {"name": "a3", "capacity": {"gpu": 1}, "allocated": False}, "allocated"),
    ("/api/pools/import/?dry_run=true", {"pool": {"name": "agree"}, "nodes": {}}, "nodes"),
], ids=["allocated false", "nodes mapping"])
def test_falsy_values_of_the_wrong_type_are_refused(staff_client, pool, url, body, path):
    """schemathesis (ST201): `allocated: false` and `nodes: {}` were taken as absent."""
    # when
    response = staff_client.post(url, body, format="json")
    # then
    assert response.status_code == 400, response.content
    assert [error["path"] for error in response.json()["details"]["errors"]] == [path]
    assert Node.objects.filter(pool=pool).count() == 1


def test_patching_allocated_with_a_list_is_refused(staff_client, pool):
    # when
    response = staff_client.patch("/api/pools/agree/nodes/a1/", {"allocated": [None, None]}, format="json")
    # then
    assert response.status_code == 400
    assert [error["path"] for error in response.json()["details"]["errors"]] == ["allocated"]
