"""Victims sought near where the preemptor would go without LOW work (docs/design.md §9,
``scheduler.preemption.victims_choose_near``): its machines, then the domains around them, then the
whole pool; borrowed work reclaimed first whatever the packing.

Sketch of the pool used here: rack r1 [n0:4 a][n1:4 busy], rack r2 [n2:4 a][n3:4 b], one zone. LOW
gang ``a`` holds n0 and n2 (8 GPUs), ``b`` holds n3 (4 GPUs); n1 is held by work that cannot be
preempted. The preemptor is one task of 4 GPUs.
"""

from __future__ import annotations

from scheduler.placement import Resources
from scheduler.preemption import Candidate, regions_around, victims_choose, victims_choose_near
from scheduler.preemption.near import within_quota_at_least
from tests.scheduler.placement.builders import cluster, gang, names, rack, tree

SNAPSHOT = cluster(("zone", "rack"), [("z1", "r1", 0), ("z1", "r1", 0), ("z1", "r2", 0), ("z1", "r2", 0)])
PREEMPTOR = gang(tree(rack("job", tasks=names("t", 1))), gpu=4)


def low(key: str, *holdings: tuple[str, int], borrowing: bool = False) -> Candidate:
    return Candidate(key, tuple((name, Resources(gpu=gpu)) for name, gpu in holdings), borrowing, 0.0)


def test_the_low_work_where_the_preemptor_would_go_is_evicted_though_elsewhere_costs_fewer_gpus():
    candidates = [low("a", ("n0", 4), ("n2", 4)), low("b", ("n3", 4))]
    # when the preemptor would go to n0 without LOW work
    choice, region = victims_choose_near(SNAPSHOT, PREEMPTOR, candidates, frozenset({"n0"}))
    # then a is evicted and it goes there, where the whole pool's cheapest choice is b
    assert choice is not None and choice.victims == ("a",) and region == frozenset({"n0"})
    assert choice.placement.assignments == (("t1", "n0"),)
    anywhere = victims_choose(SNAPSHOT, PREEMPTOR, candidates)
    assert anywhere is not None and anywhere.victims == ("b",)
    assert victims_choose_near(SNAPSHOT, PREEMPTOR, candidates, None)[0] == anywhere


def test_the_domains_around_are_searched_before_the_whole_pool():
    candidates = [low("a", ("n0", 4), ("n2", 4)), low("b", ("n3", 4))]
    # when the machine it would take (n1) holds work that cannot be preempted
    choice, region = victims_choose_near(SNAPSHOT, PREEMPTOR, candidates, frozenset({"n1"}))
    # then its rack is searched next: a, on n0
    assert regions_around(SNAPSHOT, frozenset({"n1"})) == [frozenset({"n1"}), frozenset({"n0", "n1"}),
                                                          frozenset({"n0", "n1", "n2", "n3"})]
    assert choice is not None and choice.victims == ("a",) and region == frozenset({"n0", "n1"})


def test_borrowed_work_is_reclaimed_first_whatever_the_packing():
    # given b borrows beyond its team's quota, a does not
    candidates = [low("a", ("n0", 4), ("n2", 4)), low("b", ("n3", 4), borrowing=True)]
    # when the preemptor would go to n0 without LOW work
    choice, region = victims_choose_near(SNAPSHOT, PREEMPTOR, candidates, frozenset({"n0"}))
    # then b is evicted (found once the search reached the zone): the reclaim rule comes before packing
    assert choice is not None and choice.victims == ("b",) and choice.placement.assignments == (("t1", "n3"),)
    assert region == frozenset({"n0", "n1", "n2", "n3"})


def test_nothing_is_evicted_when_nothing_anywhere_is_enough():
    big = gang(tree(rack("job", tasks=names("t", 3))), gpu=4)
    candidates = [low("a", ("n0", 4), ("n2", 4)), low("b", ("n3", 4))]
    assert victims_choose_near(SNAPSHOT, big, candidates, frozenset({"n0"})) == (None, None)


def test_one_time_budget_covers_every_region_and_the_whole_pool_still_answers(monkeypatch):
    # given a clock that moves 3 s on each region's search, and a budget of 5 s
    import scheduler.preemption.near as near

    clock = [0.0]
    searched: list[tuple[int, float | None]] = []

    def search(view, preemptor, candidates, policy, *, now, budget, ceiling):
        searched.append((len(view.nodes), None if budget.deadline is None else budget.deadline - clock[0]))
        clock[0] += 3.0
        return victims_choose(view, preemptor, candidates, policy, now=now, budget=budget, ceiling=ceiling)

    monkeypatch.setattr(near.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(near, "victims_choose", search)
    candidates = [low("b", ("n3", 4))]  # nothing to evict on n1 or its rack: every region is searched
    # when the preemptor would go to n1, whose rack holds no LOW work
    choice, region = victims_choose_near(SNAPSHOT, PREEMPTOR, candidates, frozenset({"n1"}), max_seconds=5.0)
    # then n1 (5 s left) and its rack (2 s left) are searched; the 5 s are then over, so the zone is not,
    # and the whole pool's search runs past the time (its first, all-evicted solve only): b is found
    assert searched == [(1, 5.0), (2, 2.0), (4, -1.0)]
    assert choice is not None and choice.victims == ("b",) and region is None


def test_the_regions_share_one_solve_budget_and_the_whole_pool_has_its_own(monkeypatch):
    # given: the preemptor would go to n0, held by ``a`` within its quota; ``b`` borrows on n3
    import scheduler.preemption.near as near

    searched: list[tuple[int, int]] = []

    def search(view, preemptor, candidates, policy, *, now, budget, ceiling):
        searched.append((len(view.nodes), budget.solves))
        return victims_choose(view, preemptor, candidates, policy, now=now, budget=budget, ceiling=ceiling)

    monkeypatch.setattr(near, "victims_choose", search)
    candidates = [low("a", ("n0", 4)), low("b", ("n3", 4), borrowing=True)]
    # when each search may ask two questions
    choice, region = victims_choose_near(SNAPSHOT, PREEMPTOR, candidates, frozenset({"n0"}), max_solves=2)
    # then n0's search spends the regions' two (a: its all-evicted solve, then "a spared" by capacity);
    # the whole pool's search starts with two of its own and finds b, which reclaims instead; the zone
    # is not searched (nothing left to the regions), so the whole pool's choice is taken
    assert searched == [(1, 0), (4, 0)]
    assert choice is not None and choice.victims == ("b",) and region is None
    # and with the default budget the zone is searched after the whole pool and b is found there
    searched.clear()
    choice, region = victims_choose_near(SNAPSHOT, PREEMPTOR, candidates, frozenset({"n0"}))
    assert searched == [(1, 0), (4, 0), (4, 2)]
    assert choice is not None and choice.victims == ("b",) and region == frozenset({"n0", "n1", "n2", "n3"})


def test_a_region_that_cannot_beat_the_whole_pools_reclaim_is_not_searched(monkeypatch):
    # given: the preemptor would go to n1, here held by LOW gang ``a`` within its quota (n0 stays
    # busy); ``b`` borrows on n3. Rack r1 holds no borrowed work: any set there evicts 4 GPUs within
    # quota, more than the whole pool's choice (b, none within quota).
    import scheduler.preemption.near as near

    searched: list[int] = []

    def search(view, preemptor, candidates, policy, *, now, budget, ceiling):
        searched.append(len(view.nodes))
        return victims_choose(view, preemptor, candidates, policy, now=now, budget=budget, ceiling=ceiling)

    monkeypatch.setattr(near, "victims_choose", search)
    candidates = [low("a", ("n1", 4)), low("b", ("n3", 4), borrowing=True)]
    # when
    choice, region = victims_choose_near(SNAPSHOT, PREEMPTOR, candidates, frozenset({"n1"}))
    # then: n1, the whole pool, not rack r1 (its set would not be taken), then the zone, where b is
    assert choice is not None
    assert choice.victims == ("b",)
    assert region == frozenset({"n0", "n1", "n2", "n3"})
    assert searched == [1, 4, 4]
    assert within_quota_at_least(SNAPSHOT, PREEMPTOR, candidates, frozenset({"n0", "n1"})) == 4
    assert within_quota_at_least(SNAPSHOT, PREEMPTOR, candidates, region) == 0
