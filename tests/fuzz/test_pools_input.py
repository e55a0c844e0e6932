"""Regressions found by fuzzing the pool and node endpoints: inventory imports with malformed documents,
NUL characters in URLs, and form bodies on endpoints whose input is nested."""

from __future__ import annotations

import json

import pytest

from scheduler.models import Node, Pool
from tests.factories import make_node, make_pool

pytestmark = pytest.mark.django_db


@pytest.fixture
def pool():
    pool = make_pool("fz", keys=[("zone", "topology.kubernetes.io/zone")])
    make_node(pool, "n1", {"topology.kubernetes.io/zone": "z1"})
    return pool


def assert_invalid(response, path: str) -> None:
    assert response.status_code == 400, response.content[:500]
    body = response.json()
    assert body["code"] == "validation_error"
    assert path in [error["path"] for error in body["details"]["errors"]], body


@pytest.mark.parametrize("field", ["description", "k8s_namespace", "k8s_node_selector"])
@pytest.mark.parametrize("text", ["a\x00b", "\ud800"], ids=["NUL", "lone surrogate"])
@pytest.mark.parametrize("dry_run", [False, True], ids=["import", "dry_run"])
def test_import_free_text_with_nul_or_lone_surrogate_gets_400(staff_client, field, text, dry_run):
    document = {"pool": {"name": "fresh", field: text}, "nodes": []}
    url = "/api/pools/import/" + ("?dry_run=true" if dry_run else "")

    # json.dumps escapes the lone surrogate; the test client's own JSON encoder cannot send it
    response = staff_client.post(url, json.dumps(document), content_type="application/json")

    assert_invalid(response, f"pool.{field}")
    assert not Pool.objects.filter(name="fresh").exists()


def test_import_yaml_escape_nul_gets_400(staff_client):
    text = 'pool: {name: fresh, description: "a\\0b"}\n'

    response = staff_client.post("/api/pools/import/", text, content_type="application/yaml")

    assert_invalid(response, "pool.description")
    assert not Pool.objects.filter(name="fresh").exists()


@pytest.mark.parametrize(
    "node, path",
    [
        ("{name: n1, capacity: {gpu: 0x" + "f" * 5000 + "}}", "nodes[0].capacity.gpu"),
        ("{name: n1, labels: {zone: 0x" + "f" * 5000 + "}, capacity: {gpu: 1}}", "nodes[0].labels.zone"),
    ],
    ids=["quantity", "label value"],
)
def test_import_yaml_integer_too_large_to_format_gets_400(staff_client, node, path):
    text = f"pool: {{name: fresh}}\nnodes: [{node}]\n"

    response = staff_client.post("/api/pools/import/", text, content_type="application/yaml")

    assert_invalid(response, path)
    assert not Pool.objects.filter(name="fresh").exists()


@pytest.mark.parametrize(
    "method, url",
    [
        ("get", "/api/pools/a%00b/"),
        ("get", "/api/pools/a%00b/inventory/"),
        ("get", "/api/pools/a%00b/nodes/"),
        ("get", "/api/pools/fz/nodes/a%00b/"),
        ("patch", "/api/pools/fz/nodes/a%00b/"),
        ("delete", "/api/pools/a%00b/"),
    ],
)
def test_nul_in_pool_or_node_name_is_404(staff_client, pool, method, url):
    response = getattr(staff_client, method)(url, format="json")

    assert response.status_code == 404
    assert response.json()["code"] == "not_found"


def test_form_body_on_pool_put_is_415_and_keeps_the_keys(staff_client, pool):
    # a multipart body cannot carry the nested topology_keys: DRF read them as [] and PUT wiped the keys
    response = staff_client.put("/api/pools/fz/", {"name": "fz", "topology_keys": '[{"key": "x"}]'},
                                format="multipart")

    assert response.status_code == 415
    assert response.json()["code"] == "unsupported_media_type"
    pool.refresh_from_db()
    assert pool.keys_version == 1
    assert list(pool.topology_keys.values_list("key", flat=True)) == ["zone"]


@pytest.mark.parametrize("method, url", [("post", "/api/pools/"), ("post", "/api/pools/fz/nodes/"),
                                         ("patch", "/api/pools/fz/nodes/n1/")])
def test_form_bodies_are_refused_with_415(staff_client, pool, method, url):
    response = getattr(staff_client, method)(url, {"name": "x"}, format="multipart")

    assert response.status_code == 415
    assert Pool.objects.count() == 1 and Node.objects.count() == 1


def test_yaml_import_still_accepted(staff_client):
    text = "pool: {name: fresh}\nnodes: [{name: n1, capacity: {gpu: 8}}]\n"

    response = staff_client.post("/api/pools/import/", text, content_type="application/yaml")

    assert response.status_code == 201, response.json()
    assert Node.objects.filter(pool__name="fresh").count() == 1


def many_keys(count: int) -> list[dict[str, str]]:
    return [{"key": f"k{index}", "label": f"example.com/k{index}"} for index in range(count)]


def test_import_with_thousands_of_keys_gets_400(staff_client):
    # 2,000 keys used to be stored; every later read of the pool then failed (PostgreSQL: at most
    # 1664 columns in the capacity summary's GROUP BY query)
    document = {"pool": {"name": "fresh"}, "topology_keys": many_keys(2000), "nodes": []}

    response = staff_client.post("/api/pools/import/", document, format="json")

    assert_invalid(response, "topology_keys")
    assert not Pool.objects.filter(name="fresh").exists()


@pytest.mark.parametrize("method, url", [("post", "/api/pools/"), ("patch", "/api/pools/fz/")])
def test_pool_writes_with_too_many_keys_get_400(staff_client, pool, method, url):
    response = getattr(staff_client, method)(url, {"name": "fz2", "topology_keys": many_keys(33)}, format="json")

    assert_invalid(response, "topology_keys")
    pool.refresh_from_db()
    assert pool.keys_version == 1 and not Pool.objects.filter(name="fz2").exists()


def test_pool_with_32_keys_can_be_read(staff_client):
    created = staff_client.post("/api/pools/", {"name": "wide", "topology_keys": many_keys(32)}, format="json")

    assert created.status_code == 201, created.json()
    assert staff_client.get("/api/pools/wide/").status_code == 200


def test_patch_with_incomplete_key_gets_400_and_keeps_the_keys(staff_client, pool):
    # PATCH is a partial update, and DRF skipped the nested items' required fields: KeyError, a 500
    response = staff_client.patch("/api/pools/fz/", {"topology_keys": [{"key": "zone"}, {"label": "x/y"}]},
                                  format="json")

    assert_invalid(response, "topology_keys[0].label")
    assert_invalid(response, "topology_keys[1].key")
    pool.refresh_from_db()
    assert pool.keys_version == 1
    assert list(pool.topology_keys.values_list("key", flat=True)) == ["zone"]


def test_patch_with_complete_keys_still_works(staff_client, pool):
    keys = [{"key": "zone", "label": "topology.kubernetes.io/zone"}, {"key": "rack", "label": "example.com/rack"}]

    response = staff_client.patch("/api/pools/fz/", {"topology_keys": keys}, format="json")

    assert response.status_code == 200, response.json()
    assert [key["key"] for key in response.json()["topology_keys"]] == ["zone", "rack"]


def test_duplicate_node_name_error_names_the_field(staff_client):
    make_pool("dup", keys=[("rack", "rack")])
    body = {"name": "n1", "labels": {"rack": "r1"}, "capacity": {"gpu": 1}}
    assert staff_client.post("/api/pools/dup/nodes/", body, format="json").status_code == 201
    again = staff_client.post("/api/pools/dup/nodes/", body, format="json")
    # a name another node has is a conflict (409), as the OpenAPI schema documents
    assert (again.status_code, again.json()["code"]) == (409, "conflict")
    assert again.json()["details"]["errors"] == [
        {"path": "name", "message": "a node named 'n1' already exists in pool 'dup'"}
    ]
