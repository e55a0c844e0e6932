"""sync_nodes_from_kubernetes at the HTTP boundary: the real kubernetes client talks to a local HTTP
server that replays recorded ``GET /api/v1/nodes`` pages (the first one with a ``continue`` token)."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command

from scheduler.models import Node, Pool
from scheduler.services import inventory_import, inventory_parse
from tests.scheduler.conftest import FIXTURES
from tests.scheduler.fake_kube_api import FakeApiServer

pytestmark = pytest.mark.django_db
PAGES = {
    None: json.loads((FIXTURES / "k8s" / "nodes-page-1.json").read_text()),
    "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6OTE4MjczLCJzdGFydCI6ImdwdS1hMlx1MDAwMCJ9": json.loads(
        (FIXTURES / "k8s" / "nodes-page-2.json").read_text()
    ),
}
KI = 1024




@pytest.fixture
def api_server():
    with FakeApiServer({"/api/v1/nodes": PAGES}) as server:
        yield server


@pytest.fixture
def kubeconfig(tmp_path, api_server):
    path = tmp_path / "kubeconfig"
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "fake", "cluster": {"server": api_server.url}}],
                "users": [{"name": "tester", "user": {"token": "sync-token"}}],
                "contexts": [{"name": "fake-ctx", "context": {"cluster": "fake", "user": "tester"}}],
                "current-context": "fake-ctx",
            }
        )
    )
    return str(path)


@pytest.fixture
def k8s_pool(db, reserve):
    """Pool ``gb200`` (keys zone > gpu-clique) that already knows gpu-a1 (stale capacity, 1 GPU used
    outside) and two nodes the cluster no longer has, one of them with an active reservation."""
    document = {
        "pool": {"name": "gb200", "k8s_node_selector": "nvidia.com/gpu.present=true"},
        "topology_keys": [
            {"key": "zone", "label": "topology.kubernetes.io/zone"},
            {"key": "gpu-clique", "label": "nvidia.com/gpu-clique"},
        ],
        "nodes": [
            {"name": "gpu-a1", "labels": {"old": "label"}, "capacity": {"gpu": 8, "cpu": 8}, "allocated": {"gpu": 1}},
            {"name": "gone-busy", "capacity": {"gpu": 4}},
            {"name": "gone-idle", "capacity": {"gpu": 4}},
        ],
    }
    inventory_import(inventory_parse(document))
    pool = Pool.objects.get(name="gb200")
    reserve(Node.objects.get(pool=pool, name="gone-busy"), gpu=2)
    return pool


def _nodes(pool) -> dict[str, Node]:
    return {node.name: node for node in Node.objects.filter(pool=pool)}


def test_sync_pages_through_the_node_list_and_maps_nodes(k8s_pool, kubeconfig, api_server):
    # when
    out = io.StringIO()
    call_command(
        "sync_nodes_from_kubernetes",
        "gb200",
        "--kubeconfig",
        kubeconfig,
        "--context",
        "fake-ctx",
        "--page-size",
        "2",
        "--tolerate-taint",
        "nvidia.com/gpu",
        stdout=out,
    )

    # then: two requests, the second with the continue token, both with the pool's selector
    assert [(path, query.get("labelSelector"), query.get("limit")) for path, query in api_server.requests] == [
        ("/api/v1/nodes", ["nvidia.com/gpu.present=true"], ["2"]),
        ("/api/v1/nodes", ["nvidia.com/gpu.present=true"], ["2"]),
    ]
    assert "continue" not in api_server.requests[0][1]
    assert api_server.requests[1][1]["continue"] == [next(t for t in PAGES if t)]
    assert set(api_server.authorizations) == {"Bearer sync-token"}
    assert "listed 5 node(s) in 2 request(s)" in out.getvalue()
    assert "nodes 4 created, 1 updated, 0 unchanged; 2 marked unschedulable" in out.getvalue()

    nodes = _nodes(k8s_pool)
    a1 = nodes["gpu-a1"]
    assert (a1.gpu, a1.cpu_millis, a1.memory_bytes, a1.storage_bytes) == (4, 143_500, 1006392860 * KI, 3683282291043)
    assert a1.used_gpu == 1  # external usage kept (clamped to capacity)
    assert a1.used_cpu_millis == 0
    assert a1.labels["nvidia.com/gpu-clique"] == "cluster-uuid-1.1"
    assert "old" not in a1.labels
    assert a1.schedulable is True
    assert nodes["gpu-a2"].schedulable is False  # cordoned
    assert nodes["gpu-b1"].schedulable is True  # nvidia.com/gpu taint tolerated
    assert nodes["gpu-b2"].schedulable is False  # NoExecute maintenance taint
    login = nodes["login-0"]
    assert (login.gpu, login.cpu_millis, login.memory_bytes, login.storage_bytes, login.schedulable) == (
        0,
        15_800,
        63 * KI**3,
        450 * KI**3,
        True,  # PreferNoSchedule does not count
    )
    assert (nodes["gone-busy"].schedulable, nodes["gone-idle"].schedulable) == (False, False)


def test_sync_twice_changes_nothing_and_untolerated_gpu_taint_cordons(k8s_pool, kubeconfig):
    call_command("sync_nodes_from_kubernetes", "gb200", "--kubeconfig", kubeconfig, stdout=io.StringIO())
    before = {name: node.updated_at for name, node in _nodes(k8s_pool).items()}

    out = io.StringIO()
    call_command("sync_nodes_from_kubernetes", "gb200", "--kubeconfig", kubeconfig, stdout=out)

    assert "nodes 0 created, 0 updated, 5 unchanged" in out.getvalue()
    assert {name: node.updated_at for name, node in _nodes(k8s_pool).items()} == before
    assert _nodes(k8s_pool)["gpu-b1"].schedulable is False  # without --tolerate-taint nvidia.com/gpu


def test_prune_deletes_gone_idle_nodes_only(k8s_pool, kubeconfig):
    out = io.StringIO()
    call_command("sync_nodes_from_kubernetes", "gb200", "--kubeconfig", kubeconfig, "--prune", stdout=out)

    nodes = _nodes(k8s_pool)
    assert "gone-idle" not in nodes
    assert nodes["gone-busy"].schedulable is False
    assert "1 deleted; 1 kept (active reservations)" in out.getvalue()


def test_dry_run_and_explicit_selector(k8s_pool, kubeconfig, api_server):
    out = io.StringIO()
    call_command(
        "sync_nodes_from_kubernetes",
        "gb200",
        "--kubeconfig",
        kubeconfig,
        "--selector",
        "pool=gb200",
        "--dry-run",
        stdout=out,
    )

    assert api_server.requests[0][1]["labelSelector"] == ["pool=gb200"]
    assert out.getvalue().splitlines()[-1].startswith("[dry run] pool gb200")
    assert sorted(_nodes(k8s_pool)) == ["gone-busy", "gone-idle", "gpu-a1"]
    assert _nodes(k8s_pool)["gpu-a1"].gpu == 8


def test_errors_are_command_errors(k8s_pool, tmp_path, kubeconfig):
    with pytest.raises(CommandError, match="does not exist"):
        call_command("sync_nodes_from_kubernetes", "nope", "--kubeconfig", kubeconfig)
    with pytest.raises(CommandError, match="cannot load the Kubernetes configuration"):
        call_command("sync_nodes_from_kubernetes", "gb200", "--kubeconfig", str(tmp_path / "missing"))
    broken = tmp_path / "broken"
    broken.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:9"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}], "current-context": "x",
    }))  # fmt: skip
    with pytest.raises(CommandError, match="listing nodes failed"):
        call_command("sync_nodes_from_kubernetes", "gb200", "--kubeconfig", str(broken))


def test_a_node_of_another_pool_is_not_synced_into_this_one(k8s_pool, kubeconfig):
    """The fault run synced the same node into two pools whose node selectors overlap: its GPUs
    could be booked twice."""
    # given another pool that already has gpu-a1
    inventory_import(inventory_parse({"pool": {"name": "other"}, "topology_keys": [],
                                      "nodes": [{"name": "gpu-a1", "capacity": {"gpu": 8}}]}))
    # when gb200 syncs from the cluster, which lists gpu-a1 too
    out, err = io.StringIO(), io.StringIO()
    call_command("sync_nodes_from_kubernetes", "gb200", "--kubeconfig", kubeconfig, stdout=out, stderr=err)
    # then gb200 does not get it (its stale copy is cordoned as gone), and the report names both pools
    assert Node.objects.filter(name="gpu-a1").values_list("pool__name", "schedulable").order_by("pool__name")[0] \
        == ("gb200", False)
    assert Node.objects.get(pool__name="other", name="gpu-a1").schedulable is True
    assert "node gpu-a1 already belongs to pool other; not synced into pool gb200" in err.getvalue()
    assert "1 skipped" in out.getvalue()
