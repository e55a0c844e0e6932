"""The ceiling of bench.simulate: the topology constraints dropped, the same queue discipline; the
report sets each solver beside it (docs/benchmarks.md)."""

from __future__ import annotations

from bench.kit.pools import nvl72_pool
from bench.kit.traces import _models, _plain, ceiling, simulate, trace
from bench.simulate import against_ceiling
from scheduler.placement import Placement, solve
from scheduler.placement.types import ClusterSnapshot, NodeState, Resources


def _fragmented() -> ClusterSnapshot:
    """Two racks of 18 trays, each rack with 9 trays taken: 18 free trays, no rack with more than 9."""
    base = nvl72_pool(1, 1, 2, occupancy=0.0, seed=1)
    nodes = []
    seen: dict[str, int] = {}
    for node in base.nodes:
        rack = node.labels[3]
        seen[rack] = seen.get(rack, 0) + 1
        taken = seen[rack] <= 9
        free = Resources(0, 0, 0, 0) if taken else node.free
        nodes.append(NodeState(node.name, node.labels, free, node.schedulable))
    return ClusterSnapshot(base.pool, base.keys, tuple(nodes))


def test_the_ceiling_places_a_gang_the_topology_forbids_and_refuses_one_beyond_the_free_gpus():
    # given a pool with 18 free trays, at most 9 in any gpu-clique
    snapshot = _fragmented()
    clique_of_12 = _models("g", [12], 4, zone=False)
    # when the constraint-honouring solver and the ceiling are asked for a 12-tray clique
    strict = solve(snapshot, clique_of_12)
    relaxed = ceiling(snapshot, clique_of_12)
    # then only the ceiling places it, one task per free tray
    assert not isinstance(strict, Placement)
    assert isinstance(relaxed, Placement)
    free = {n.name for n in snapshot.nodes if n.free.gpu == 4}
    assert len(relaxed.nodes) == 12 and relaxed.nodes <= free
    # and 19 trays do not fit in 18
    assert not isinstance(ceiling(snapshot, _models("h", [19], 4, zone=False)), Placement)


def test_the_ceiling_packs_small_tasks_onto_partly_used_machines_first():
    # given a pool where one tray has 1 GPU free and the rest are whole
    base = nvl72_pool(1, 1, 1, occupancy=0.0, seed=1)
    first = base.nodes[0]
    one = Resources(1, first.free.cpu, first.free.memory, first.free.storage)
    nodes = (NodeState(first.name, first.labels, one, True),
             *base.nodes[1:])
    snapshot = ClusterSnapshot(base.pool, base.keys, nodes)
    # when a one-task 1-GPU gang is placed
    placed = ceiling(snapshot, _plain("p", 1, 1))
    # then it takes the tray with 1 GPU (best fit), leaving the whole trays whole
    assert isinstance(placed, Placement)
    assert placed.assignments == (("t0", first.name),)


def test_the_report_gives_each_solver_beside_the_ceiling_and_the_loss():
    # given a small pool and a trace at twice its load
    base = nvl72_pool(1, 1, 2, occupancy=0.0, seed=3)
    total = sum(n.free.gpu for n in base.nodes)
    jobs = trace(60, 3, total, 2.0)
    # when solve and the ceiling run it
    rows = [{**simulate(s, jobs, base), "load": 2.0, "seed": 3} for s in ("solve", "ceiling")]
    out = against_ceiling(rows)
    # then the ceiling's utilisation is at least solve's and the loss is their difference in points
    solve_row, ceil_row = rows
    assert ceil_row["gpu_utilisation"] >= solve_row["gpu_utilisation"]
    loss = round(100 * (ceil_row["gpu_utilisation"] - solve_row["gpu_utilisation"]), 1)
    assert out["solve"] == {"gpu_utilisation": solve_row["gpu_utilisation"], "mean_wait": solve_row["mean_wait"],
                            "loss_points": [loss], "loss_points_mean": loss}
    assert out["ceiling"] == {"gpu_utilisation": ceil_row["gpu_utilisation"], "mean_wait": ceil_row["mean_wait"]}
