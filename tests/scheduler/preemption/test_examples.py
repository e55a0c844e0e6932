"""Hand-written victim choices (docs/design.md §9): topology, irrelevant domains, reclaim of borrowed
work, recency, nothing when nothing suffices, determinism and the solve budget.

Sketches: ``[n0:4 a]`` is machine n0 with 4 GPUs, all held by LOW gang ``a``; ``[n1:4 free]`` is idle;
``[n3:4 busy]`` is held by work that cannot be preempted.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.kit.preemption_instances import released, small_instance
from scheduler.placement import Placement, Resources, solve
from scheduler.preemption import Candidate, victims_choose
from tests.scheduler.placement.builders import cluster, gang, names, rack, tree, zone


def low(key: str, *holdings: tuple[str, int], borrowing: bool = False, started: float = 0.0) -> Candidate:
    return Candidate(key, tuple((name, Resources(gpu=gpu)) for name, gpu in holdings), borrowing, started)


def test_the_gang_in_the_rack_where_the_preemptor_fits_is_chosen():
    # given: rack r1 [n0:4 a][n1:4 free], rack r2 [n2:4 b][n3:4 busy]; two tasks of 4 GPUs in one rack.
    # b started later, so without topology it would be the one to evict.
    snapshot = cluster(("zone", "rack"), [("z1", "r1", 0), ("z1", "r1", 4), ("z1", "r2", 0), ("z1", "r2", 0)])
    preemptor = gang(tree(rack("job", tasks=names("t", 2))), gpu=4)
    candidates = [low("a", ("n0", 4), started=1.0), low("b", ("n2", 4), started=2.0)]
    # when
    choice = victims_choose(snapshot, preemptor, candidates)
    # then
    assert choice is not None
    assert choice.victims == ("a",)
    assert choice.gpu_evicted == 4
    assert choice.placement.assignments == (("t1", "n0"), ("t2", "n1"))


def test_a_borrowing_gang_in_a_zone_too_small_for_the_preemptor_is_never_chosen():
    # given: zone z1 [n0:4 y][n1:4 free], zone z2 [n2:4 x]; two tasks of 4 GPUs in one zone. x borrows
    # and started later, so it is the cheapest to evict, but z2 can never hold the preemptor.
    snapshot = cluster(("zone",), [("z1", 0), ("z1", 4), ("z2", 0)])
    preemptor = gang(tree(zone("job", tasks=names("t", 2))), gpu=4)
    x = low("x", ("n2", 4), borrowing=True, started=9.0)
    y = low("y", ("n0", 4), started=1.0)
    # when
    choice = victims_choose(snapshot, preemptor, [x, y])
    alone = victims_choose(snapshot, preemptor, [x])
    # then
    assert choice is not None
    assert choice.victims == ("y",)
    assert alone is None


def test_a_gang_holding_only_machines_too_small_for_the_preemptor_is_never_chosen():
    # given: [n0:8 y] in rack r1 and [n1:2 x] in rack r2; one task of 4 GPUs. Even with x evicted, n1
    # has 2 GPUs: x is irrelevant, however cheap.
    snapshot = cluster(("zone", "rack"), [("z1", "r1", 0), ("z2", "r2", 0)])
    preemptor = gang(tree(rack("job", tasks=["t1"])), gpu=4)
    x = low("x", ("n1", 2), borrowing=True, started=9.0)
    y = low("y", ("n0", 8))
    # when
    choice = victims_choose(snapshot, preemptor, [x, y])
    # then
    assert choice is not None
    assert choice.victims == ("y",)
    assert choice.explored == 2  # all released, then the solver's placement for {y}


@pytest.mark.parametrize(
    ("borrowed_gpu", "expected"),
    [
        pytest.param(4, ("borrower",), id="_case_equal_sizes"),
        pytest.param(8, ("borrower",), id="_case_borrower_larger"),
    ],
)
def test_borrowing_gangs_are_reclaimed_before_gangs_within_quota(borrowed_gpu, expected):
    # given: [n0:8 within-quota gang, 4 GPUs, started later][n1:8 borrowing gang]; one task of 4 GPUs
    snapshot = cluster(("zone",), [("z1", 4), ("z1", 8 - borrowed_gpu)])
    preemptor = gang(tree(tasks=["t1"]), gpu=8)
    candidates = [
        low("quota", ("n0", 4), started=5.0),
        low("borrower", ("n1", borrowed_gpu), borrowing=True, started=1.0),
    ]
    # when
    choice = victims_choose(snapshot, preemptor, candidates)
    # then
    assert choice is not None
    assert choice.victims == expected
    assert choice.gpu_evicted == borrowed_gpu


def test_fewer_gpus_then_fewer_gangs_then_the_latest_start_then_the_key():
    # given: one task of 4 GPUs on a machine of 4 GPUs; four ways to free one
    snapshot = cluster(("zone",), [("z1", 0), ("z1", 0), ("z1", 0), ("z1", 0), ("z1", 0)])
    preemptor = gang(tree(tasks=["t1"]), gpu=4)
    pair = [low("p1", ("n0", 2), started=9.0), low("p2", ("n0", 2), started=9.0)]
    early = low("early", ("n1", 4), started=1.0)
    late_b = low("late-b", ("n2", 4), started=3.0)
    late_a = low("late-a", ("n3", 4), started=3.0)
    big = low("big", ("n4", 2), ("n4", 2), ("n0", 4), started=9.0)  # 8 GPUs in all
    # when
    choice = victims_choose(snapshot, preemptor, [*pair, early, late_b, late_a, big])
    # then: 4 GPUs in one gang beats two gangs and 8 GPUs; of those, the latest start, then the key
    assert choice is not None
    assert choice.victims == ("late-a",)


def test_nothing_is_chosen_when_evicting_every_gang_would_not_suffice():
    # given: [n0:4 a][n1:4 b], a gang of 3 x 4 GPUs
    snapshot = cluster(("zone",), [("z1", 0), ("z1", 0)])
    preemptor = gang(tree(tasks=names("t", 3)), gpu=4)
    candidates = [low("a", ("n0", 4)), low("b", ("n1", 4), borrowing=True)]
    # when
    choice = victims_choose(snapshot, preemptor, candidates)
    # then
    assert choice is None


def test_a_preemptor_that_fits_already_evicts_nothing():
    # given
    snapshot = cluster(("zone",), [("z1", 4)])
    preemptor = gang(tree(tasks=["t1"]), gpu=4)
    # when
    choice = victims_choose(snapshot, preemptor, [low("a", ("n0", 4))])
    # then
    assert choice is not None
    assert choice.victims == ()
    assert choice.gpu_evicted == 0


@settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(min_value=0, max_value=2**32 - 1), shuffle=st.integers(min_value=0, max_value=2**32 - 1))
def test_the_choice_does_not_depend_on_the_order_of_the_candidates(seed, shuffle):
    # given
    snapshot, preemptor, candidates = small_instance(random.Random(seed))
    reordered = list(candidates)
    random.Random(shuffle).shuffle(reordered)
    # when
    choice = victims_choose(snapshot, preemptor, candidates)
    again = victims_choose(snapshot, preemptor, reordered)
    # then
    assert choice == again


@pytest.mark.parametrize("budget", [pytest.param(1, id="_case_one_solve"), pytest.param(2, id="_case_two_solves")])
def test_a_spent_budget_still_returns_a_set_that_fits(budget):
    # given: 6 racks [n:4 gang][n:4 gang]; two tasks of 4 GPUs in one rack
    rows = [("z1", f"r{r}", 0) for r in range(6) for _ in range(2)]
    snapshot = cluster(("zone", "rack"), rows)
    preemptor = gang(tree(rack("job", tasks=names("t", 2))), gpu=4)
    candidates = [low(f"g{i}", (f"n{i}", 4), started=float(i)) for i in range(12)]
    # when
    choice = victims_choose(snapshot, preemptor, candidates, max_solves=budget)
    # then
    assert choice is not None
    assert choice.explored == budget
    assert len(choice.victims) == 2
    victims = [c for c in candidates if c.key in choice.victims]
    assert isinstance(solve(released(snapshot, victims), preemptor), Placement)


def test_malformed_input_is_refused():
    # given
    snapshot = cluster(("zone",), [("z1", 0)])
    preemptor = gang(tree(tasks=["t1"]), gpu=4)
    twice = [low("a", ("n0", 2)), low("a", ("n0", 2))]
    # when / then
    with pytest.raises(ValueError, match="unique"):
        victims_choose(snapshot, preemptor, twice)
    with pytest.raises(ValueError, match="max_solves"):
        victims_choose(snapshot, preemptor, twice[:1], max_solves=0)


def test_among_equal_gpus_the_set_that_loses_less_work_is_chosen():
    # given: one task of 8 GPUs; [n0:8 old] (8 GPUs run 90 s) or [n1:4 young1][n1:4 young2] (8 GPUs
    # run 10 s and 5 s). Without the work lost, one gang beats two.
    snapshot = cluster(("zone",), [("z1", 0), ("z1", 0)])
    preemptor = gang(tree(tasks=["t1"]), gpu=8)
    candidates = [low("old", ("n0", 8), started=10.0), low("young1", ("n1", 4), started=90.0),
                  low("young2", ("n1", 4), started=95.0)]
    # when
    choice = victims_choose(snapshot, preemptor, candidates, now=100.0)
    without = victims_choose(snapshot, preemptor, candidates)
    # then: 4 x 10 + 4 x 5 = 60 GPU-seconds lost against 8 x 90 = 720
    assert choice is not None and without is not None
    assert choice.victims == ("young1", "young2")
    assert choice.gpu_evicted == 8
    assert choice.work_lost == 60.0
    assert without.victims == ("old",)
    assert without.work_lost == 0.0


def test_work_lost_comes_after_the_reclaim_rule_and_before_gpus():
    # given: one task of 4 GPUs; a borrowing gang that ran long against a gang within its quota that ran
    # briefly; and two borrowing gangs, a big young one against a small old one
    snapshot = cluster(("zone",), [("z1", 0), ("z1", 0)])
    preemptor = gang(tree(tasks=["t1"]), gpu=4)
    borrower = low("borrower", ("n0", 4), borrowing=True, started=0.0)
    quota = low("quota", ("n1", 4), started=99.0)
    big_young = low("big-young", ("n0", 8), borrowing=True, started=95.0)
    small_old = low("small-old", ("n1", 4), borrowing=True, started=0.0)
    # when
    reclaimed = victims_choose(snapshot, preemptor, [borrower, quota], now=100.0)
    packed = victims_choose(snapshot, preemptor, [big_young, small_old], now=100.0)
    # then: borrowed work goes first whatever it loses; among borrowed work, 8 GPUs x 5 s beat 4 GPUs
    # x 100 s (within quota likewise, for equal GPUs within quota)
    assert reclaimed is not None and packed is not None
    assert reclaimed.victims == ("borrower",)
    assert packed.victims == ("big-young",)
    assert packed.work_lost == 40.0
