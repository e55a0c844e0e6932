"""REST contract of /api/pools/ (docs/design.md §7): reads for users, writes for staff, 4xx envelopes with paths."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from scheduler.models import Node, Pool, TopologyKey
from tests.scheduler.conftest import EXAMPLES, KEYS, alias_bomb_inventory, node_entry

pytestmark = pytest.mark.django_db


def test_anonymous_gets_401_envelope(small_pool):
    response = APIClient().get("/api/pools/")

    assert response.status_code == 401
    assert response.json() == {
        "code": "not_authenticated",
        "message": "Authentication credentials were not provided.",
        "details": {},
    }


def test_pool_list_has_keys_in_order_and_totals(user_client, small_pool, reserve):
    reserve(Node.objects.get(pool=small_pool, name="a2"), gpu=5)

    response = user_client.get("/api/pools/")

    assert response.status_code == 200
    body = response.json()
    assert body["count"] == 1
    pool = body["results"][0]
    assert pool["name"] == "small"
    assert pool["keys_version"] == 1
    assert pool["topology_keys"] == [
        {"key": "zone", "label": "topology.kubernetes.io/zone", "position": 0},
        {"key": "rack", "label": "topology.kubernetes.io/rack", "position": 1},
    ]
    assert pool["totals"]["node_count"] == 5
    assert pool["totals"]["capacity"]["gpu"] == 36
    assert pool["totals"]["used"]["gpu"] == 2
    assert pool["totals"]["reserved"]["gpu"] == 5
    assert pool["totals"]["free"]["gpu"] == 21
    assert "domains" not in pool


def test_pool_detail_has_totals_per_domain_of_each_key(user_client, small_pool):
    response = user_client.get("/api/pools/small/")

    assert response.status_code == 200
    body = response.json()
    assert [entry["key"] for entry in body["domains"]] == ["zone", "rack"]
    racks = body["domains"][1]
    assert racks["domain_count"] == 3
    assert racks["domains"][0] == {
        "path": {"zone": "a", "rack": "r1"},
        "value": "r1",
        "node_count": 2,
        "schedulable_node_count": 2,
        "capacity": {"gpu": 16, "cpu_millis": 64000, "memory_bytes": 512 * 1024**3, "storage_bytes": 2 * 1024**4},
        "used": {"gpu": 2, "cpu_millis": 0, "memory_bytes": 0, "storage_bytes": 0},
        "reserved": {"gpu": 0, "cpu_millis": 0, "memory_bytes": 0, "storage_bytes": 0},
        "free": {"gpu": 14, "cpu_millis": 64000, "memory_bytes": 512 * 1024**3, "storage_bytes": 2 * 1024**4},
    }
    assert racks["unlabelled"]["node_count"] == 1


def test_unknown_pool_is_404_envelope(user_client):
    response = user_client.get("/api/pools/nope/")

    assert response.status_code == 404
    assert response.json()["code"] == "not_found"


def test_a_pool_or_node_not_found_is_named_in_the_404(user_client, small_pool):
    # when
    answers = [user_client.get(path) for path in ("/api/pools/nope/", "/api/pools/nope/nodes/",
                                                  "/api/pools/nope/inventory/", "/api/pools/small/nodes/zz/")]
    # then: not a bare "Not found.", which does not say what was missing
    assert [(a.status_code, a.json()) for a in answers] == [
        (404, {"code": "not_found", "message": "Pool 'nope' not found.", "details": {"pool": "nope"}}),
        (404, {"code": "not_found", "message": "Pool 'nope' not found.", "details": {"pool": "nope"}}),
        (404, {"code": "not_found", "message": "Pool 'nope' not found.", "details": {"pool": "nope"}}),
        (404, {"code": "not_found", "message": "Node 'zz' not found in pool 'small'.",
               "details": {"pool": "small", "node": "zz"}}),
    ]


def test_pool_reads_run_a_constant_number_of_queries(user_client, generated_pool, reserve, django_assert_num_queries):
    small = generated_pool("gen-small", racks=1)  # 72 nodes
    big = generated_pool("gen-big", racks=6)  # 432 nodes
    for node in Node.objects.filter(pool=big)[:40]:
        reserve(node, gpu=1)

    for pool in (small, big):
        # pool, access, its keys, nodes grouped by domain, reservations per node, quotas, quota use
        # (+ ATOMIC_REQUESTS savepoint, release)
        with django_assert_num_queries(9):
            response = user_client.get(f"/api/pools/{pool.name}/")
        assert response.status_code == 200
        assert response.json()["totals"]["node_count"] == pool.nodes.count()
    # count, page, keys, nodes grouped by pool, reservations, quotas, quota use (+ savepoint, release)
    with django_assert_num_queries(9):
        assert user_client.get("/api/pools/").status_code == 200
    for pool in (small, big):
        # pool, access, keys, count, page (+ savepoint, release)
        with django_assert_num_queries(7):
            response = user_client.get(f"/api/pools/{pool.name}/nodes/?limit=200")
        assert response.status_code == 200


def test_node_list_with_usage_and_filters(user_client, small_pool, reserve):
    reserve(Node.objects.get(pool=small_pool, name="a1"), gpu=3)

    everything = user_client.get("/api/pools/small/nodes/").json()
    in_zone_a_rack_r1 = user_client.get("/api/pools/small/nodes/?topology=zone=a,rack=r1").json()
    racks_r1 = user_client.get("/api/pools/small/nodes/?label=topology.kubernetes.io/rack=r1").json()
    cordoned = user_client.get("/api/pools/small/nodes/?schedulable=false").json()
    unlabelled = user_client.get("/api/pools/small/nodes/?search=loo").json()
    by_value = user_client.get("/api/pools/small/nodes/?search=r2").json()

    assert everything["count"] == 5
    a1 = everything["results"][0]
    assert a1["name"] == "a1"
    assert a1["domains"] == {"zone": "a", "rack": "r1"}
    assert (a1["capacity"]["gpu"], a1["used"]["gpu"], a1["reserved"]["gpu"], a1["free"]["gpu"]) == (8, 2, 3, 3)
    assert [n["name"] for n in in_zone_a_rack_r1["results"]] == ["a1", "a2"]
    assert [n["name"] for n in racks_r1["results"]] == ["a1", "a2", "b1"]
    assert [n["name"] for n in cordoned["results"]] == ["a3"]
    assert [n["name"] for n in unlabelled["results"]] == ["loose"]
    assert unlabelled["results"][0]["domains"] == {"zone": None, "rack": None}
    assert [n["name"] for n in by_value["results"]] == ["a3"]


def test_unknown_topology_key_filter_is_400_with_path(user_client, small_pool):
    response = user_client.get("/api/pools/small/nodes/?topology=spine=s1")

    assert response.status_code == 400
    assert response.json()["details"]["errors"] == [
        {"path": "topology", "message": "'spine' is not a topology key of this pool (keys: zone, rack)"}
    ]


def test_non_staff_writes_get_403(user_client, small_pool):
    responses = [
        user_client.post("/api/pools/", {"name": "x"}, format="json"),
        user_client.patch("/api/pools/small/", {"description": "x"}, format="json"),
        user_client.delete("/api/pools/small/"),
        user_client.post("/api/pools/import/", {"pool": {"name": "x"}}, format="json"),
        user_client.post("/api/pools/small/nodes/", node_entry("n", "a", "r1"), format="json"),
        user_client.delete("/api/pools/small/nodes/a1/"),
    ]

    assert [r.status_code for r in responses] == [403] * 6
    assert responses[0].json()["code"] == "permission_denied"
    assert Pool.objects.count() == 1 and Node.objects.count() == 5


def test_staff_creates_pool_with_keys(staff_client):
    response = staff_client.post(
        "/api/pools/", {"name": "fresh", "description": "new", "topology_keys": KEYS}, format="json"
    )

    assert response.status_code == 201
    body = response.json()
    assert body["keys_version"] == 1
    assert [k["key"] for k in body["topology_keys"]] == ["zone", "rack"]
    assert body["totals"]["node_count"] == 0


@pytest.mark.parametrize(
    ("_case", "payload", "paths"),
    [
        ("_case_bad_name", {"name": "-bad-"}, ["name"]),
        ("_case_reserved_name", {"name": "import"}, ["name"]),
        ("_case_bad_key", {"name": "ok", "topology_keys": [{"key": "Bad", "label": "a/b"}]}, ["topology_keys[0].key"]),
        ("_case_key_missing_label", {"name": "ok", "topology_keys": [{"key": "zone"}]}, ["topology_keys[0].label"]),
        ("_case_keys_not_list", {"name": "ok", "topology_keys": "zone"}, ["topology_keys"]),
        ("_case_bad_backend", {"name": "ok", "backend": "slurm"}, ["backend"]),
        ("_case_negative_seconds", {"name": "ok", "sim_task_seconds": -1}, ["sim_task_seconds"]),
    ],
)
def test_bad_pool_writes_are_400_with_paths(staff_client, small_pool, _case, payload, paths):
    response = staff_client.post("/api/pools/", payload, format="json")

    assert response.status_code == 400, response.content
    body = response.json()
    assert body["code"] == "validation_error"
    assert [e["path"] for e in body["details"]["errors"]] == paths
    assert Pool.objects.count() == 1


def test_a_pool_name_taken_is_a_409_conflict_naming_the_field(staff_client, small_pool):
    """schemathesis (ST202): a schema-valid name refused with 400; a name another pool has is a conflict."""
    # when a pool is created with the name of an existing one
    response = staff_client.post("/api/pools/", {"name": "small"}, format="json")
    # then
    assert response.status_code == 409, response.content
    body = response.json()
    assert body["code"] == "conflict"
    assert [e["path"] for e in body["details"]["errors"]] == ["name"]
    assert Pool.objects.count() == 1


def test_patch_keys_bumps_keys_version_and_description_does_not(staff_client, small_pool):
    described = staff_client.patch("/api/pools/small/", {"description": "changed"}, format="json")
    reordered = staff_client.patch("/api/pools/small/", {"topology_keys": [KEYS[1], KEYS[0]]}, format="json")
    same = staff_client.patch("/api/pools/small/", {"topology_keys": [KEYS[1], KEYS[0]]}, format="json")

    assert (described.status_code, described.json()["keys_version"]) == (200, 1)
    assert (reordered.status_code, reordered.json()["keys_version"]) == (200, 2)
    assert [k["key"] for k in reordered.json()["topology_keys"]] == ["rack", "zone"]
    assert same.json()["keys_version"] == 2


def test_put_replaces_fields_and_keys(staff_client, small_pool):
    response = staff_client.put("/api/pools/small/", {"name": "renamed", "topology_keys": [KEYS[0]]}, format="json")

    assert response.status_code == 200
    assert response.json()["name"] == "renamed"
    assert list(TopologyKey.objects.filter(pool=small_pool).values_list("key", flat=True)) == ["zone"]
    assert staff_client.get("/api/pools/renamed/").status_code == 200


def test_delete_pool_with_workflows_is_409_and_without_is_204(staff_client, small_pool, reserve):
    reserve(Node.objects.get(pool=small_pool, name="a1"), gpu=1)
    empty = Pool.objects.create(name="empty")

    refused = staff_client.delete("/api/pools/small/")
    deleted = staff_client.delete("/api/pools/empty/")

    assert refused.status_code == 409
    assert refused.json()["code"] == "conflict"
    assert deleted.status_code == 204
    assert Pool.objects.filter(pk=small_pool.pk).exists()
    assert not Pool.objects.filter(pk=empty.pk).exists()


def test_import_endpoint_accepts_json_and_yaml(staff_client):
    yaml_text = (EXAMPLES / "demo.yaml").read_text()

    created = staff_client.generic("POST", "/api/pools/import/", yaml_text, content_type="application/yaml")
    again = staff_client.generic("POST", "/api/pools/import/", yaml_text, content_type="application/yaml")
    exported = staff_client.get("/api/pools/demo/inventory/").json()
    exported["nodes"][0]["capacity"]["gpu"] = 4
    changed = staff_client.post("/api/pools/import/?dry_run=true", exported, format="json")

    assert created.status_code == 201
    assert created.json()["nodes_created"] == 32
    assert again.status_code == 200
    assert (again.json()["nodes_unchanged"], again.json()["nodes_updated"]) == (32, 0)
    assert changed.status_code == 200
    assert (changed.json()["nodes_updated"], changed.json()["dry_run"]) == (1, True)
    assert Node.objects.get(name="demo-01").gpu == 8


def test_import_endpoint_reports_every_problem_and_stores_nothing(staff_client):
    document = {
        "pool": {"name": "bad"},
        "nodes": [node_entry("n0", "a", "r1"), {"name": "n1", "capacity": {"gpu": -1}}, {"capacity": {}}],
    }

    response = staff_client.post("/api/pools/import/", document, format="json")

    assert response.status_code == 400
    assert [e["path"] for e in response.json()["details"]["errors"]] == ["nodes[1].capacity.gpu", "nodes[2].name"]
    assert not Pool.objects.filter(name="bad").exists()


@pytest.mark.parametrize(
    "body",
    ["not a mapping", ["a", "list"], {"pool": None}, {"pool": {"name": "p"}, "nodes": [None]}],
)
def test_import_garbage_is_400_not_500(staff_client, body):
    response = staff_client.post("/api/pools/import/", body, format="json")

    assert response.status_code == 400
    assert response.json()["code"] == "validation_error"


def test_staff_node_writes(staff_client, small_pool, reserve):
    created = staff_client.post("/api/pools/small/nodes/", node_entry("c1", "b", "r9", gpu=2), format="json")
    patched = staff_client.patch(
        "/api/pools/small/nodes/c1/", {"capacity": {"gpu": 4}, "schedulable": False}, format="json"
    )
    bad = staff_client.patch("/api/pools/small/nodes/c1/", {"allocated": {"gpu": 5}}, format="json")
    duplicate = staff_client.post("/api/pools/small/nodes/", node_entry("a1", "b", "r9"), format="json")
    reserve(Node.objects.get(pool=small_pool, name="a1"), gpu=1)
    refused = staff_client.delete("/api/pools/small/nodes/a1/")
    deleted = staff_client.delete("/api/pools/small/nodes/c1/")

    assert created.status_code == 201
    assert created.json()["domains"] == {"zone": "b", "rack": "r9"}
    assert patched.status_code == 200
    assert (patched.json()["capacity"]["gpu"], patched.json()["schedulable"]) == (4, False)
    assert patched.json()["capacity"]["cpu_millis"] == 32_000  # other resources kept
    assert bad.status_code == 400
    assert bad.json()["details"]["errors"][0]["path"] == "allocated.gpu"
    assert duplicate.status_code == 409  # a name another node has: a conflict
    assert refused.status_code == 409
    assert deleted.status_code == 204
    assert sorted(Node.objects.filter(pool=small_pool).values_list("name", flat=True)) == [
        "a1",
        "a2",
        "a3",
        "b1",
        "loose",
    ]


def test_staff_import_of_a_yaml_alias_bomb_is_refused_and_stores_nothing(staff_client):
    """Replays a staff member posting a YAML alias bomb to the import endpoint: 90 aliases that expand
    to 10**10 values. Inventory loading bounded only the values walked after loading (50,000,000), so the
    request burned 30-40 s of CPU before its 400; the alias expansion is now bounded while the YAML is
    composed (docs/pools.md, "Limits")."""
    # given
    text = alias_bomb_inventory()

    # when
    response = staff_client.generic("POST", "/api/pools/import/", text, content_type="application/yaml")

    # then
    assert response.status_code == 400
    assert response.json() == {
        "code": "validation_error",
        "message": "The pool inventory could not be read.",
        "details": {
            "errors": [{"path": "", "message": "YAML aliases expand to more than 12800 values at line 7, column 8"}]
        },
    }
    assert not Pool.objects.filter(name="bomb").exists()
    assert Node.objects.count() == 0


def test_a_pools_retry_limit_is_read_and_patched_and_a_negative_one_refused(staff_client, small_pool):
    # given a pool with the default retry limit
    assert staff_client.get("/api/pools/small/").json()["max_retries"] == 3
    # when staff set it, then set it negative
    patched = staff_client.patch("/api/pools/small/", {"max_retries": 1}, format="json")
    refused = staff_client.patch("/api/pools/small/", {"max_retries": -1}, format="json")
    # then the first is stored, the second is a 400 naming the field and changes nothing
    assert (patched.status_code, patched.json()["max_retries"]) == (200, 1)
    assert refused.status_code == 400
    assert [e["path"] for e in refused.json()["details"]["errors"]] == ["max_retries"]
    assert Pool.objects.get(name="small").max_retries == 1
