"""Consolidation (docs/design.md §6, "Consolidation"): running gangs move so that a waiting gang fits,
only when every moved gang is placed again at once.

Sketch of the pool: racks r1 (n0-n3) and r2 (n4-n7), one GPU per machine. ``s`` (one task) runs on
n0, ``t`` (two tasks, one rack) on n4 and n5: r1 has 3 free, r2 has 2. The waiting gang needs four
tasks in one rack.
"""

from __future__ import annotations

from bench.kit.consolidate import consolidate, holdings_of, joined, shifted
from scheduler.placement import Placement, Resources, solve
from scheduler.preemption import Candidate, victims_choose
from tests.scheduler.placement.builders import cluster, gang, names, node, tree

POOL = cluster(("rack",), [("r1", 1)] * 4 + [("r2", 1)] * 4)
WAITING = gang(tree(node("rack", "w", tasks=names("w", 4))), gpu=1)
S = gang(tree(tasks=["s1"], group="s"), gpu=1)
T = gang(tree(node("rack", "t", tasks=names("t", 2)), group="t"), gpu=1)
T4 = gang(tree(node("rack", "t", tasks=names("t", 4)), group="t"), gpu=1)


def running(group, machines: list[str], started: float) -> Candidate:
    placement = Placement("placed", tuple(zip(sorted(t.name for t in group.tasks), machines, strict=True)))
    return Candidate(group.name, holdings_of(group, placement), False, started)


def pool_with(*candidates: Candidate):
    return shifted(POOL, [h for c in candidates for h in c.holdings], -1)


def test_a_small_gang_moves_to_the_other_rack_and_the_waiting_gang_takes_the_rack_it_frees():
    # given s on n0 (started at 2) and t on n4, n5 (started at 1), both movable
    s, t = running(S, ["n0"], 2.0), running(T, ["n4", "n5"], 1.0)
    snapshot = pool_with(s, t)
    # when, at time 5
    done = consolidate(snapshot, WAITING, [s, t], {"s": S, "t": T}, now=5.0, max_moves=2)
    # then s moves to r2 (3 units of work lost), the waiting gang gets all of r1, t stays
    assert done is not None
    assert done.placement.assignments == (("w1", "n0"), ("w2", "n1"), ("w3", "n2"), ("w4", "n3"))
    assert [(key, p.nodes <= {"n6", "n7"}) for key, p in done.moves] == [("s", True)]
    assert done.work_lost == 3.0 and done.attempts == 1


def test_nothing_moves_when_no_moved_gang_could_start_again():
    # given t holds all of r2: s could only go back to r1, and t (one rack of four) nowhere but r2
    s, t = running(S, ["n0"], 2.0), running(T4, ["n4", "n5", "n6", "n7"], 1.0)
    snapshot = pool_with(s, t)
    # when
    done = consolidate(snapshot, WAITING, [s, t], {"s": S, "t": T4}, now=5.0, max_moves=2)
    # then no consolidation, though evicting s alone would let the gang fit (preemption's answer)
    assert done is None
    evict = victims_choose(snapshot, WAITING, [s, t], now=5.0)
    assert evict is not None and evict.victims == ("s",)


def test_a_set_larger_than_max_moves_or_losing_more_work_than_allowed_is_none():
    # given two single-task gangs on r1 (n0, n1) and r2 with 4 free: the gang fits on r2 without moves,
    # so fill n4 and n5 with t: r1 has 2 free, r2 has 2; freeing r1 needs both small gangs moved
    a = running(gang(tree(tasks=["a1"], group="a"), gpu=1), ["n0"], 2.0)
    b = running(gang(tree(tasks=["b1"], group="b"), gpu=1), ["n1"], 3.0)
    t = running(T, ["n4", "n5"], 0.0)
    requests = {"a": gang(tree(tasks=["a1"], group="a"), gpu=1), "b": gang(tree(tasks=["b1"], group="b"), gpu=1),
                "t": T}
    snapshot = pool_with(a, b, t)
    # when
    one = consolidate(snapshot, WAITING, [a, b], requests, now=5.0, max_moves=1)
    two = consolidate(snapshot, WAITING, [a, b], requests, now=5.0, max_moves=2)
    stingy = consolidate(snapshot, WAITING, [a, b], requests, now=5.0, max_moves=2, max_work_lost=4.9)
    # then only two moves are enough: a and b to n6, n7 (3 + 2 units of work lost)
    assert one is None and stingy is None
    assert two is not None
    assert sorted(key for key, _p in two.moves) == ["a", "b"]
    assert frozenset().union(*(p.nodes for _k, p in two.moves)) == {"n6", "n7"}
    assert two.placement.nodes == {"n0", "n1", "n2", "n3"} and two.work_lost == 5.0


def test_shifted_gives_back_and_takes_what_holdings_hold():
    # given
    holdings = (("n0", Resources(gpu=1, cpu=2)), ("n0", Resources(gpu=0, cpu=3)))
    # when
    back = shifted(POOL, holdings, 1)
    # then
    assert back.nodes[0].free == Resources(gpu=2, cpu=5) and back.nodes[1:] == POOL.nodes[1:]
    assert shifted(back, holdings, -1) == POOL


def test_joined_renames_every_task_and_group_by_its_gang_and_keeps_each_gangs_constraints():
    # given the waiting gang (one rack of four) and t (one rack of two)
    # when
    both = joined([("w", WAITING), ("t", T)])
    # then one gang of six tasks, each rack constraint over its own gang's tasks only
    assert [t.name for t in both.tasks] == ["t/t1", "t/t2", "w/w1", "w/w2", "w/w3", "w/w4"]
    assert [(c.key, c.group, c.path, c.tasks) for c in both.tree.children] == [
        ("rack", "t/t", (("rack", "t/t"),), ("t/t1", "t/t2")),
        ("rack", "w/w", (("rack", "w/w"),), ("w/w1", "w/w2", "w/w3", "w/w4")),
    ]
    assert both.tree.tasks == ()


def test_joined_gangs_fit_together_only_where_each_one_fits():
    # given r1 with 1 free and r2 with 4: four in one rack and two in one rack do not fit at once
    snapshot = shifted(POOL, tuple((f"n{i}", Resources(gpu=1)) for i in range(3)), -1)
    # when
    result = solve(snapshot, joined([("w", WAITING), ("t", T)]))
    roomy = solve(POOL, joined([("w", WAITING), ("t", T)]))
    # then
    assert not isinstance(result, Placement)
    assert isinstance(roomy, Placement)
    racks = {name: labels[0] for name, labels in ((n.name, n.labels) for n in POOL.nodes)}
    by_gang = {racks[m] for t, m in roomy.assignments if t.startswith("w/")}, {
        racks[m] for t, m in roomy.assignments if t.startswith("t/")}
    assert by_gang == ({"r1"}, {"r2"}) or by_gang == ({"r2"}, {"r1"})
