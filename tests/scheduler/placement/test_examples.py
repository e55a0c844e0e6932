"""The placement examples that must come out right, plus the cases docs/design.md §5 names (flat, exact)."""

from __future__ import annotations

import pytest

from scheduler.placement import GangRequest, Placement, Policy, Resources, TaskRequest, Unplaceable, solve
from tests.scheduler.placement.builders import clique, cluster, consume, gang, names, rack, tree, zone


def test_four_racks_of_two_gpus_cannot_hold_four_tasks_in_one_rack() -> None:
    # given
    #   rack r1: n0 [2 free]   rack r2: n1 [2]   rack r3: n2 [2]   rack r4: n3 [2]
    snapshot = cluster(("rack",), [("r1", 2), ("r2", 2), ("r3", 2), ("r4", 2)])
    group = gang(tree(rack("default", tasks=names("t", 4))), gpu=1)
    # when
    result = solve(snapshot, group)
    # then
    assert isinstance(result, Unplaceable)
    assert result.status == "unschedulable"
    assert (
        result.message
        == "rack=default (required) needs 4 tasks of 1 gpu in one rack; the largest free rack fits 2 of 4"
    )
    assert result.reason["code"] == "no_domain"
    assert result.reason["node"] == {
        "path": [["rack", "default"]],
        "key": "rack",
        "group": "default",
        "requirement": "required",
    }
    assert result.reason["tasks_needed"] == 4
    assert result.reason["best_domain"] == {"path": ["r1"], "fits": 2}
    assert result.reason["domains"] == 4
    assert result.reason["totals"]["requested"]["gpu"] == 4
    assert result.reason["totals"]["free_usable"]["gpu"] == 8


def test_two_racks_with_four_free_gpus_but_no_rack_for_two_two_gpu_tasks() -> None:
    # given
    #   rack r1: n0 [1] n1 [1]      rack r2: n2 [2]
    snapshot = cluster(("rack",), [("r1", 1), ("r1", 1), ("r2", 2)])
    group = gang(tree(rack("default", tasks=names("t", 2))), gpu=2)
    # when
    result = solve(snapshot, group)
    # then
    assert isinstance(result, Unplaceable)
    assert result.status == "unschedulable"
    assert result.message == (
        "rack=default (required) needs 2 tasks of 2 gpu in one rack; the largest free rack fits 1 of 2"
        " (the whole pool fits 1 of 2)"
    )
    assert result.reason["best_domain"] == {"path": ["r2"], "fits": 1}
    assert result.reason["excluded"]["too_small"] == 2


def test_two_racks_one_two_gpu_task_goes_to_the_second_rack() -> None:
    # given
    #   rack r1: n0 [1] n1 [1]      rack r2: n2 [2]
    snapshot = cluster(("rack",), [("r1", 1), ("r1", 1), ("r2", 2)])
    group = gang(tree(rack("default", tasks=["t1"])), gpu=2)
    # when
    result = solve(snapshot, group)
    # then
    assert isinstance(result, Placement)
    assert result.assignments == (("t1", "n2"),)
    assert result.report[0].met is True
    assert result.report[0].met_key == "rack"
    assert result.report[0].domains == (("r2",),)


def test_unconstrained_gang_takes_the_small_hosts_so_a_later_two_gpu_job_fits() -> None:
    # given
    #   n0 [2]   n1 [1]   n2 [1]      (no topology keys)
    snapshot = cluster((), [(2,), (1,), (1,)])
    first = gang(tree(tasks=["a1", "a2"]), gpu=1)
    # when
    result = solve(snapshot, first)
    # then
    assert isinstance(result, Placement)
    assert result.assignments == (("a1", "n1"), ("a2", "n2"))
    later = solve(consume(snapshot, first, result.assignments), gang(tree(tasks=["b1"]), gpu=2))
    assert isinstance(later, Placement)
    assert later.assignments == (("b1", "n0"),)


def test_zone_with_two_cliques_where_greedy_order_fails_is_placed() -> None:
    # given: m1 (2 x 1 gpu) fits best in clique X, but X's 2-gpu machine is the only home of m2 (1 x 2 gpu)
    #   zone z1
    #   ├── clique X: n0 [2]
    #   └── clique Y: n1 [1] n2 [1] n3 [1]
    snapshot = cluster(("zone", "gpu-clique"), [("z1", "X", 2), ("z1", "Y", 1), ("z1", "Y", 1), ("z1", "Y", 1)])
    t = tree(zone("wf", clique("m1", tasks=["m1-a", "m1-b"]), clique("m2", tasks=["m2-a"])))
    group = gang(t, gpu={"m1-a": 1, "m1-b": 1, "m2-a": 2})
    # when
    result = solve(snapshot, group)
    # then
    assert isinstance(result, Placement)
    assert result.tasks == {"m1-a": "n1", "m1-b": "n2", "m2-a": "n0"}
    assert all(r.met for r in result.report)


def test_domain_identity_is_the_full_label_path() -> None:
    # given: two racks named r1, one per zone; each has one 1-gpu machine
    #   zone a: rack r1: n0 [1]      zone b: rack r1: n1 [1]
    snapshot = cluster(("zone", "rack"), [("a", "r1", 1), ("b", "r1", 1)])
    group = gang(tree(rack("default", tasks=["t1", "t2"])))
    # when
    result = solve(snapshot, group)
    # then
    assert isinstance(result, Unplaceable)
    assert (
        result.message
        == "rack=default (required) needs 2 tasks of 1 gpu in one rack; the largest free rack fits 1 of 2"
    )


def test_machines_missing_the_label_only_take_unconstrained_tasks() -> None:
    # given
    #   rack r1: n0 [1]       (no rack label): n1 [4]
    snapshot = cluster(("rack",), [("r1", 1), (None, 4)])
    group = gang(tree(rack("default", tasks=["c1"]), tasks=["free1", "free2"]))
    # when
    result = solve(snapshot, group)
    # then
    assert isinstance(result, Placement)
    assert result.tasks == {"c1": "n0", "free1": "n1", "free2": "n1"}


def test_missing_label_is_counted_in_the_reason() -> None:
    # given
    #   rack r1: n0 [1]       (no rack label): n1 [4]
    snapshot = cluster(("rack",), [("r1", 1), (None, 4)])
    group = gang(tree(rack("default", tasks=["c1", "c2"])))
    # when
    result = solve(snapshot, group)
    # then
    assert isinstance(result, Unplaceable)
    assert result.reason["excluded"] == {"cordoned": 0, "nodes_excluded": 0, "missing_label": 1, "too_small": 0}
    assert result.reason["best_domain"] == {"path": ["r1"], "fits": 1}


def test_cordoned_and_excluded_machines_are_not_used() -> None:
    # given
    #   rack r1: n0 [4, cordoned]  n1 [4]  n2 [2]
    snapshot = cluster(("rack",), [("r1", 4), ("r1", 4), ("r1", 2)], cordoned=["n0"])
    t = tree(rack("default", tasks=["a", "b"]))
    group = gang(t, gpu=2, excluded={"a": frozenset({"n2"})})
    # when
    result = solve(snapshot, group)
    # then
    assert isinstance(result, Placement)
    assert result.tasks == {"a": "n1", "b": "n1"}  # b packs next to a: n2 stays whole


def test_excluded_and_cordoned_machines_show_in_the_reason() -> None:
    # given
    #   rack r1: n0 [4, cordoned]  n1 [4]
    snapshot = cluster(("rack",), [("r1", 4), ("r1", 4)], cordoned=["n0"])
    group = gang(tree(rack("default", tasks=["a"])), gpu=2, excluded={"a": frozenset({"n1"})})
    # when
    result = solve(snapshot, group)
    # then
    assert isinstance(result, Unplaceable)
    assert result.status == "unschedulable"
    assert result.reason["excluded"]["cordoned"] == 1
    assert result.reason["excluded"]["nodes_excluded"] == 1


def test_multi_resource_requests_respect_cpu_and_memory() -> None:
    # given: n0 has the gpus but too little memory
    #   rack r1: n0 [8 gpu, 64 cpu, 16 GiB]   n1 [4 gpu, 64 cpu, 512 GiB]
    gib = 1 << 30
    snapshot = cluster(
        ("rack",),
        [("r1", Resources(8, 64000, 16 * gib, 0)), ("r1", Resources(4, 64000, 512 * gib, 0))],
    )
    t = tree(rack("default", tasks=["a"]))
    group = GangRequest("g", t, (TaskRequest("a", Resources(gpu=4, cpu=8000, memory=64 * gib)),))
    # when
    result = solve(snapshot, group)
    # then
    assert isinstance(result, Placement)
    assert result.tasks == {"a": "n1"}


def test_best_fit_keeps_the_empty_rack_whole() -> None:
    # given
    #   rack r1: n0 [4] n1 [4]   (empty)        rack r2: n2 [4] n3 [1]  (partly used)
    snapshot = cluster(("rack",), [("r1", 4), ("r1", 4), ("r2", 4), ("r2", 1)])
    group = gang(tree(rack("default", tasks=["a", "b"])), gpu=2)
    # when
    result = solve(snapshot, group)
    # then
    assert isinstance(result, Placement)
    assert result.tasks == {"a": "n2", "b": "n2"}


def test_equally_tight_racks_go_to_the_fuller_spine_so_a_whole_spine_stays_free() -> None:
    # given: racks r1, r2, r3 each fit the two tasks exactly; spine s2 is partly used (r4), s1 is free
    #   spine s1: rack r1: n0 [2] n1 [2]   rack r2: n2 [2] n3 [2]
    #   spine s2: rack r3: n4 [2] n5 [2]   rack r4: n6 [1]
    snapshot = cluster(
        ("spine", "rack"),
        [("s1", "r1", 2), ("s1", "r1", 2), ("s1", "r2", 2), ("s1", "r2", 2),
         ("s2", "r3", 2), ("s2", "r3", 2), ("s2", "r4", 1)],
    )
    group = gang(tree(rack("default", tasks=["a", "b"])), gpu=2)
    # when
    result = solve(snapshot, group)
    # then
    assert isinstance(result, Placement)
    assert result.tasks == {"a": "n4", "b": "n5"}


def test_equally_tight_racks_in_equally_full_spines_go_to_the_fuller_zone() -> None:
    # given: racks r1 and r2 fit the task exactly, their spines have the same free GPUs; zone z2 is fuller
    #   zone z1: spine s1: rack r1: n0 [2]      spine s2: rack r3: n2 [4]
    #   zone z2: spine s3: rack r2: n1 [2]      spine s4: rack r4: n3 [1]
    snapshot = cluster(
        ("zone", "spine", "rack"),
        [("z1", "s1", "r1", 2), ("z2", "s3", "r2", 2), ("z1", "s2", "r3", 4), ("z2", "s4", "r4", 1)],
    )
    group = gang(tree(rack("default", tasks=["a"])), gpu=2)
    # when
    result = solve(snapshot, group)
    # then
    assert isinstance(result, Placement)
    assert result.tasks == {"a": "n1"}


def test_preferred_rack_falls_back_to_the_zone_with_fewest_racks() -> None:
    # given: no rack holds 3 tasks; zone z1 holds them in 2 racks, zone z2 would need 3
    #   zone z1: rack r1: n0 [2]  rack r2: n1 [1]
    #   zone z2: rack r3: n2 [1]  rack r4: n3 [1]  rack r5: n4 [1]
    snapshot = cluster(
        ("zone", "rack"), [("z1", "r1", 2), ("z1", "r2", 1), ("z2", "r3", 1), ("z2", "r4", 1), ("z2", "r5", 1)]
    )
    group = gang(tree(rack("default", tasks=names("t", 3), required=False)))
    # when
    result = solve(snapshot, group)
    # then
    assert isinstance(result, Placement)
    assert sorted(result.tasks.values()) == ["n0", "n0", "n1"]
    (report,) = result.report
    assert (report.met, report.met_key, report.domains) == (False, "zone", (("z1", "r1"), ("z1", "r2")))


@pytest.mark.parametrize(
    "max_steps,status",
    [
        pytest.param(1, "undecided", id="_case_budget_too_small"),
        pytest.param(10_000, "placed", id="_case_budget_enough"),
    ],
)
def test_an_exhausted_budget_is_undecided_never_unschedulable(max_steps: int, status: str) -> None:
    # given: backtracking needed (see the greedy-order example)
    snapshot = cluster(("zone", "gpu-clique"), [("z1", "X", 2), ("z1", "Y", 1), ("z1", "Y", 1), ("z1", "Y", 1)])
    t = tree(zone("wf", clique("m1", tasks=["m1-a", "m1-b"]), clique("m2", tasks=["m2-a"])))
    group = gang(t, gpu={"m1-a": 1, "m1-b": 1, "m2-a": 2})
    # when
    result = solve(snapshot, group, Policy(max_steps=max_steps))
    # then
    assert result.status == status


def test_unknown_key_is_unschedulable_with_reason() -> None:
    # given
    snapshot = cluster(("rack",), [("r1", 4)])
    group = gang(tree(zone("wf", tasks=["a"])))
    # when
    result = solve(snapshot, group)
    # then
    assert isinstance(result, Unplaceable)
    assert result.reason["code"] == "unknown_key"
    assert result.message == "zone=wf (required): 'zone' is not a topology key of this pool"


def test_equal_inputs_give_equal_outputs() -> None:
    snapshot = cluster(("zone", "rack"), [("z1", f"r{i % 3}", 1 + i % 4) for i in range(12)])
    group = gang(tree(zone("wf", rack("a", tasks=names("a", 3)), rack("b", tasks=names("b", 3)))), gpu=1)
    assert solve(snapshot, group) == solve(snapshot, group)


def test_single_task_node_and_empty_gang() -> None:
    snapshot = cluster(("rack",), [("r1", 1)])
    assert solve(snapshot, gang(tree(rack("solo", tasks=["a"])))).assignments == (("a", "n0"),)  # type: ignore[union-attr]
    empty = solve(snapshot, GangRequest("g", tree(), ()))
    assert isinstance(empty, Placement) and empty.assignments == ()


def test_kueue_greedy_baseline_fails_where_the_solver_backtracks() -> None:
    # given: the greedy-order cluster (m1's best fit X is m2's only home)
    from bench.kit.baselines import kueue_greedy

    snapshot = cluster(("zone", "gpu-clique"), [("z1", "X", 2), ("z1", "Y", 1), ("z1", "Y", 1), ("z1", "Y", 1)])
    t = tree(zone("wf", clique("m1", tasks=["m1-a", "m1-b"]), clique("m2", tasks=["m2-a"])))
    group = gang(t, gpu={"m1-a": 1, "m1-b": 1, "m2-a": 2})
    # when
    baseline = kueue_greedy(snapshot, group)
    ours = solve(snapshot, group)
    # then
    assert baseline.status == "unschedulable"
    assert ours.status == "placed"


def test_zone_without_room_for_all_clique_groups_names_the_groups() -> None:
    # given: a zone has room for 6 tasks, but each clique only for one group of 2 (3 free 1-gpu machines)
    #   zone a: clique a1 [1][1][1]  clique a2 [1][1][1]      zone b: the same
    rows = [(z, f"{z}{c}", 1) for z in ("a", "b") for c in (1, 2) for _ in range(3)]
    snapshot = cluster(("zone", "gpu-clique"), rows)
    t = tree(zone("wf", *(clique(f"m{i}", tasks=[f"m{i}-a", f"m{i}-b"]) for i in range(3))))
    # when
    result = solve(snapshot, gang(t))
    # then
    assert isinstance(result, Unplaceable)
    assert result.reason["code"] == "no_room_for_groups"
    assert result.message == (
        "zone=wf (required) needs 3 gpu-clique groups (6 tasks) in one zone; the best zone has room for 2 of 3"
    )


def test_clique_groups_met_everywhere_win_over_a_zone_that_holds_them_all() -> None:
    """Finest constraints first (docs/design.md §5): zone a can hold all four groups, but only two on
    their own gpu-clique; giving up the zone meets all four clique preferences."""
    # given
    #   zone a: clique a1 [1][1]  clique a2 [1][1]  four machines without a clique label [1]
    #   zone b: clique b1 [1][1]  clique b2 [1][1]
    rows = [("a", "a1", 1), ("a", "a1", 1), ("a", "a2", 1), ("a", "a2", 1)]
    rows += [("a", None, 1)] * 4
    rows += [("b", "b1", 1), ("b", "b1", 1), ("b", "b2", 1), ("b", "b2", 1)]
    snapshot = cluster(("zone", "gpu-clique"), rows)
    groups = [clique(f"m{i}", tasks=names(f"m{i}-", 2), required=False) for i in range(4)]
    group = gang(tree(zone("wf", *groups, required=False)))
    # when
    result = solve(snapshot, group)
    # then
    assert isinstance(result, Placement)
    assert [(r.key, r.met, r.met_key) for r in result.report] == [
        ("zone", False, None),
        ("gpu-clique", True, "gpu-clique"),
        ("gpu-clique", True, "gpu-clique"),
        ("gpu-clique", True, "gpu-clique"),
        ("gpu-clique", True, "gpu-clique"),
    ]
