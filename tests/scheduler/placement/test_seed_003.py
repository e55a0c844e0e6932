"""Seed document 003 (OSMO topology-aware scheduling): its five examples on an NVL72 demo pool.

Demo pool: 2 zones x 2 spines x 3 racks x 18 trays x 4 GPUs; gpu-clique == rack (NVL72).
The document's tasks ask for 8 GPUs; a GB200 tray has 4, so each shard here asks for one tray (4 GPUs).

    zone z0                                   zone z1
    ├── spine z0-s0: racks r00 r01 r02        ├── spine z1-s0: racks r00 r01 r02
    └── spine z0-s1: racks r00 r01 r02        └── spine z1-s1: racks r00 r01 r02
"""

from __future__ import annotations

from bench.kit.pools import NVL72_KEYS, nvl72_pool, tray_free
from scheduler.placement import ClusterSnapshot, GangRequest, NodeState, Placement, Resources, TaskRequest, solve
from tests.scheduler.placement.builders import Spec, clique, names, node, rack, spine, tree, zone

TRAY = Resources(gpu=4)


def demo_pool(seed: int = 3) -> ClusterSnapshot:
    return nvl72_pool(2, 2, 3, occupancy=0.6, seed=seed)


def request(*children: Spec) -> GangRequest:
    t = tree(*children)
    return GangRequest("group1", t, tuple(TaskRequest(n, TRAY) for n in t.all_tasks()))


def racks_of(snapshot: ClusterSnapshot, placement: Placement, tasks: list[str]) -> set[tuple]:
    labels = {n.name: n.labels for n in snapshot.nodes}
    return {labels[placement.tasks[t]][:4] for t in tasks}


def zones_of(snapshot: ClusterSnapshot, placement: Placement, tasks: list[str]) -> set[tuple]:
    labels = {n.name: n.labels for n in snapshot.nodes}
    return {labels[placement.tasks[t]][:1] for t in tasks}


def test_single_nvl72_rack_puts_all_four_shards_on_one_clique() -> None:
    # given
    snapshot = demo_pool()
    shards = names("model1-shard", 4)
    group = request(clique("default", tasks=shards))
    # when
    result = solve(snapshot, group)
    # then
    assert isinstance(result, Placement)
    assert len(racks_of(snapshot, result, shards)) == 1
    assert result.report[0].met and result.report[0].met_key == "gpu-clique"


def test_multiple_nvl72_racks_keep_each_model_on_its_clique() -> None:
    # given
    snapshot = demo_pool()
    m1, m2 = names("model1-shard", 4), names("model2-shard", 4)
    group = request(clique("model-1-group", tasks=m1), clique("model-2-group", tasks=m2))
    # when
    result = solve(snapshot, group)
    # then
    assert isinstance(result, Placement)
    assert len(racks_of(snapshot, result, m1)) == 1
    assert len(racks_of(snapshot, result, m2)) == 1
    assert [r.met for r in result.report] == [True, True]


def test_multiple_nvl72_racks_in_same_zone() -> None:
    # given: zone z0's racks are full except one tray each; z1 has two racks with 4 idle trays
    nodes = []
    for z in range(2):
        for s in range(2):
            for r in range(3):
                rk = f"z{z}-s{s}-r{r:02d}"
                idle = 1 if z == 0 else (4 if (s, r) in {(0, 1), (1, 2)} else 2)
                for n in range(18):
                    free = 4 if n < idle else 0
                    nodes.append(NodeState(f"{rk}-n{n:02d}", (f"z{z}", f"z{z}-s{s}", rk, f"{rk}-nvl"), tray_free(free)))
    snapshot = ClusterSnapshot("nvl72", NVL72_KEYS, tuple(nodes))
    m1, m2 = names("model1-shard", 4), names("model2-shard", 4)
    group = request(zone("workflow-group", clique("model-1-group", tasks=m1), clique("model-2-group", tasks=m2)))
    # when
    result = solve(snapshot, group)
    # then
    assert isinstance(result, Placement)
    assert zones_of(snapshot, result, m1 + m2) == {("z1",)}
    assert racks_of(snapshot, result, m1) | racks_of(snapshot, result, m2) == {
        ("z1", "z1-s0", "z1-s0-r01", "z1-s0-r01-nvl"),
        ("z1", "z1-s1", "z1-s1-r02", "z1-s1-r02-nvl"),
    }
    assert all(r.met for r in result.report)


def test_best_effort_topology_places_even_when_no_rack_holds_a_model() -> None:
    # given: every rack has only 3 idle trays, so no rack holds a 4-shard model
    nodes = []
    for z in range(2):
        for s in range(2):
            for r in range(3):
                rk = f"z{z}-s{s}-r{r:02d}"
                for n in range(18):
                    nodes.append(
                        NodeState(
                            f"{rk}-n{n:02d}", (f"z{z}", f"z{z}-s{s}", rk, f"{rk}-nvl"), tray_free(4 if n < 3 else 0)
                        )
                    )
    snapshot = ClusterSnapshot("nvl72", NVL72_KEYS, tuple(nodes))
    m1, m2 = names("model1-shard", 4), names("model2-shard", 4)
    group = request(
        spine(
            "workflow-group",
            rack("model-1-group", tasks=m1, required=False),
            rack("model-2-group", tasks=m2, required=False),
            required=False,
        )
    )
    # when
    result = solve(snapshot, group)
    # then: the spine preference still holds (one spine has 9 idle trays); each model spans 2 racks
    assert isinstance(result, Placement)
    by_path = {r.path: r for r in result.report}
    top = by_path[(("spine", "workflow-group"),)]
    assert (top.met, top.met_key) == (True, "spine")
    for g in ("model-1-group", "model-2-group"):
        r = by_path[(("spine", "workflow-group"), ("rack", g))]
        assert (r.met, r.met_key, len(r.domains)) == (False, "spine", 2)


def test_reused_group_names_resolve_independently_under_each_zone() -> None:
    # given: one idle rack slot pattern: z0-s0-r00 has exactly 2 idle trays, everything else 1 per rack
    nodes = []
    for z in range(2):
        for s in range(2):
            for r in range(3):
                rk = f"z{z}-s{s}-r{r:02d}"
                idle = 2 if rk == "z0-s0-r00" else 1
                for n in range(18):
                    nodes.append(
                        NodeState(
                            f"{rk}-n{n:02d}", (f"z{z}", f"z{z}-s{s}", rk, f"{rk}-nvl"), tray_free(4 if n < idle else 0)
                        )
                    )
    snapshot = ClusterSnapshot("nvl72", NVL72_KEYS, tuple(nodes))
    group = request(
        zone("zone-a", rack("rack-group-1", tasks=["task-1", "task-2"])),
        zone("zone-b", rack("rack-group-1", tasks=["task-3"]), rack("rack-group-2", tasks=["task-4"])),
    )
    # when
    result = solve(snapshot, group)
    # then: task-3 does not join task-1/task-2's rack (it is full), and that is allowed
    assert isinstance(result, Placement)
    labels = {n.name: n.labels for n in snapshot.nodes}
    rack_of = {t: labels[m][:3] for t, m in result.tasks.items()}
    assert rack_of["task-1"] == rack_of["task-2"] == ("z0", "z0-s0", "z0-s0-r00")
    assert rack_of["task-3"] != rack_of["task-1"]
    assert rack_of["task-3"][0] == rack_of["task-4"][0]
    assert rack_of["task-3"] != rack_of["task-4"]  # one idle tray per other rack
    paths = [r.path for r in result.report]
    assert (("zone", "zone-a"), ("rack", "rack-group-1")) in paths
    assert (("zone", "zone-b"), ("rack", "rack-group-1")) in paths
    assert all(r.met for r in result.report)


def test_reused_group_names_may_share_a_rack_when_the_zone_is_the_same() -> None:
    # given: a single rack with plenty of room; both zone groups may pick it
    nodes = tuple(
        NodeState(f"n{n:02d}", ("z0", "z0-s0", "z0-s0-r00", "z0-s0-r00-nvl"), tray_free(4)) for n in range(18)
    )
    snapshot = ClusterSnapshot("nvl72", NVL72_KEYS, nodes)
    group = request(
        zone("zone-a", rack("rack-group-1", tasks=["task-1", "task-2"])),
        zone("zone-b", rack("rack-group-1", tasks=["task-3"])),
    )
    # when
    result = solve(snapshot, group)
    # then
    assert isinstance(result, Placement)
    assert all(r.met for r in result.report)


def test_a_plain_node_helper_builds_any_key() -> None:
    assert node("rack", "g", tasks=["a"]).key == "rack"
