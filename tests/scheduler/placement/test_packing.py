"""Multi-shape packing inside domains (docs/design.md §5): cliques that pass every count bound but
cannot hold a group are learnt as nogoods, and a packing failure backjumps to the step that caused it."""

from __future__ import annotations

import random

from bench.kit.instances import check, planted_instance
from scheduler.placement import ClusterSnapshot, GangRequest, Placement, Policy, Unplaceable, solve
from scheduler.placement.exact import Machine, pack_exact
from tests.scheduler.placement.builders import clique, cluster, gang, names, tree, zone


def _trays_pool(bad: int = 60) -> ClusterSnapshot:
    """252 machines: 60 cliques c00..c59 of trays with 4/4/4/2 free GPUs, then 3 cliques d0..d2 of 4 x 4."""
    rows = [(f"c{c:03d}" if bad > 100 else f"c{c:02d}", free) for c in range(bad) for free in (4, 4, 4, 2)]
    rows += [(f"d{c}", 4) for c in range(3) for _ in range(4)]
    return cluster(("gpu-clique",), rows)


def _mixed_groups(count: int, *, in_zone: bool = False) -> GangRequest:
    """``count`` clique groups of 2 x 3-GPU + 4 x 2-GPU tasks (14 GPUs, as much as a 4/4/4/2 clique has)."""
    gpu: dict[str, int] = {}
    groups = []
    for g in range(count):
        big, small = names(f"g{g}-big", 2), names(f"g{g}-small", 4)
        gpu.update({t: 3 for t in big} | {t: 2 for t in small})
        groups.append(clique(f"group{g}", tasks=big + small))
    return gang(tree(zone("wf", *groups)) if in_zone else tree(*groups), gpu=gpu)


def _cliques(snapshot: ClusterSnapshot, placement: Placement, prefix: str) -> set[str | None]:
    labels = {n.name: n.labels for n in snapshot.nodes}
    return {labels[m][0] for t, m in placement.assignments if t.startswith(prefix)}


def test_three_mixed_groups_skip_the_sixty_cliques_that_pass_the_counts_but_cannot_pack() -> None:
    """Replays the 252-node reproduction: 60 cliques of 4/4/4/2 free GPUs sort first as tightest (14
    free GPUs, counts fit) but hold one 3-GPU task per 4-GPU tray and then only 3 of the 4 2-GPU tasks;
    only the three cliques of 4 x 4 can hold a group. It used to end undecided at the default budget."""
    # given
    snapshot = _trays_pool()
    group = _mixed_groups(3)
    # when
    result = solve(snapshot, group)
    # then
    assert isinstance(result, Placement)
    assert [_cliques(snapshot, result, f"g{g}-") for g in range(3)] == [{"d0"}, {"d1"}, {"d2"}]


def test_a_clique_shown_unable_to_hold_a_group_is_not_tried_again_for_an_identical_group() -> None:
    # given: the same pool; at most 1,000 steps (each candidate clique tried costs one)
    snapshot = _trays_pool()
    group = _mixed_groups(3)
    # when
    result = solve(snapshot, group, Policy(max_steps=1_000))
    # then
    assert isinstance(result, Placement)


def test_a_fourth_mixed_group_is_proven_unschedulable_not_undecided() -> None:
    # given: only three cliques can hold a group
    snapshot = _trays_pool()
    group = _mixed_groups(4)
    # when
    result = solve(snapshot, group)
    # then
    assert result.status == "unschedulable"


def test_a_zone_counts_only_the_cliques_that_can_pack_a_group() -> None:
    # given: zone a has 3 cliques of 4/4/4/2 (counts say 3 groups fit), zone b has 2 cliques of 4 x 4
    rows = [("a", f"a{c}", free) for c in range(3) for free in (4, 4, 4, 2)]
    rows += [("b", f"b{c}", 4) for c in range(2) for _ in range(4)]
    snapshot = cluster(("zone", "gpu-clique"), rows)
    # when
    two = solve(snapshot, _mixed_groups(2, in_zone=True), Policy(max_steps=1_000))
    three = solve(snapshot, _mixed_groups(3, in_zone=True), Policy(max_steps=1_000))
    # then
    assert isinstance(two, Placement)
    labels = {n.name: n.labels for n in snapshot.nodes}
    assert {labels[m][1] for _t, m in two.assignments} == {"b0", "b1"}
    assert three.status == "unschedulable"


def test_the_exact_packer_proves_two_tasks_do_not_share_a_machine_short_of_cpu() -> None:
    # given: a machine with 4 GPUs and 12 cores; two tasks of 2 GPUs and 8 cores each (each fits alone)
    machine = Machine("m0", (4, 12_000, 0, 0), (1,))
    # when
    alone = pack_exact([((2, 8_000, 0, 0), 1)], [machine], 1.0)
    both = pack_exact([((2, 8_000, 0, 0), 2)], [machine], 1.0)
    # then
    assert alone == ("feasible", [[("m0", 1)]])
    assert both == ("infeasible", [])


def test_planted_multi_shape_instances_are_all_placed() -> None:
    """Replays 60 instances of the planted family (bench.kit.instances.planted_instance: 2-4 shapes of
    (gpu, cpu) cut from the machines' free capacity, so a placement exists), seeds 140-199, which
    include 152 and 199: the depth-first packing used to exhaust the default budget on them."""
    # given
    instances = [planted_instance(random.Random(seed)) for seed in range(140, 200)]
    # when
    results = [solve(snapshot, group) for snapshot, group in instances]
    # then
    assert [r.status for r in results] == ["placed"] * 60
    assert [check(s, g, r) for (s, g), r in zip(instances, results, strict=True) if isinstance(r, Placement)] == [
        []
    ] * 60


def test_the_wall_clock_ceiling_makes_a_solve_undecided_never_unschedulable() -> None:
    # given: four groups on 600 cliques of 4/4/4/2 and 3 of 4 x 4 (a proof of over 512 steps, the clock's
    # period), with a ceiling already reached
    snapshot = _trays_pool(bad=600)
    group = _mixed_groups(4)
    # when
    result = solve(snapshot, group, Policy(max_seconds=0.0))
    # then
    assert isinstance(result, Unplaceable)
    assert result.status == "undecided"
    assert result.reason["max_seconds"] == 0.0
    assert result.message == (
        "the wall-clock ceiling of 0.0 s was reached before a placement was found or ruled out"
    )
