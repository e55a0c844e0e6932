"""Reservations by expected end, the pure part (docs/design.md §6): the hold on the placement that can
start soonest, its binary search against a linear scan, and EASY backfill's rule."""

from __future__ import annotations

import random

from bench.kit.traces import ceiling
from scheduler.hold import Holder, expected_end, may_backfill, released, soonest_hold, where
from scheduler.placement import Placement, Resources, solve
from tests.scheduler.placement.builders import cluster, gang, names, rack, tree, zone

NOW = 1_000_000.0


def _two_racks_full():
    """Two racks of two 4-GPU machines, every GPU taken: n0, n1 in r1, n2, n3 in r2."""
    return cluster(("rack",), [("r1", 0), ("r1", 0), ("r2", 0), ("r2", 0)])


def _on(key: str, machines: list[str], ends: float, *, bounded: bool = True) -> Holder:
    return Holder(key, tuple((m, Resources(gpu=4)) for m in machines), ends, bounded)


def _two_machines_of_a_rack():
    return gang(tree(rack("r", tasks=names("t", 2))), gpu=4)


def test_the_hold_is_on_the_rack_whose_gangs_end_first():
    # given rack r1 held by a gang ending in two hours and rack r2 by one ending in one hour
    running = [_on("late", ["n0", "n1"], NOW + 7200), _on("early", ["n2", "n3"], NOW + 3600)]
    # when a gang of two whole machines in one rack asks where it starts soonest
    hold = soonest_hold(_two_racks_full(), _two_machines_of_a_rack(), running)
    # then it holds r2, free when the early gang ends, and waits for that gang only
    assert hold is not None
    assert hold.machines == frozenset({"n2", "n3"})
    assert hold.free_by == NOW + 3600
    assert hold.waits_for == ("early",)
    assert hold.bounded is True


def test_an_estimated_end_counts_like_a_timeout_but_is_no_bound():
    # given r1's gang with a timeout ending in three hours and r2's without one, started an hour ago
    # (expected to run as long again: it ends in an hour)
    r1_end, r1_bounded = expected_end(NOW - 600, NOW, 3 * 3600 + 600)
    r2_end, r2_bounded = expected_end(NOW - 3600, NOW, None)
    running = [_on("timed", ["n0", "n1"], r1_end, bounded=r1_bounded),
               _on("untimed", ["n2", "n3"], r2_end, bounded=r2_bounded)]
    # when
    hold = soonest_hold(_two_racks_full(), _two_machines_of_a_rack(), running)
    # then the estimate is sooner: r2 is held, and the time is no bound
    assert (r1_end, r1_bounded, r2_end, r2_bounded) == (NOW + 3 * 3600, True, NOW + 3600, False)
    assert hold is not None
    assert hold.machines == frozenset({"n2", "n3"})
    assert hold.free_by == NOW + 3600
    assert hold.bounded is False


def test_a_timeout_sooner_than_an_estimate_wins():
    # given r1's gang has run ten minutes of a twenty-minute timeout, r2's has run an hour, no timeout
    r1_end, _ = expected_end(NOW - 600, NOW, 1200)
    r2_end, _ = expected_end(NOW - 3600, NOW, None)
    running = [_on("timed", ["n0", "n1"], r1_end), _on("untimed", ["n2", "n3"], r2_end, bounded=False)]
    # when
    hold = soonest_hold(_two_racks_full(), _two_machines_of_a_rack(), running)
    # then r1 is held, free in ten minutes at the latest
    assert hold is not None
    assert (hold.machines, hold.free_by, hold.bounded) == (frozenset({"n0", "n1"}), NOW + 600, True)


def test_the_hold_waits_for_both_gangs_of_a_rack_when_each_holds_one_machine():
    # given r1 held by two gangs ending in 1 h and 4 h, r2 by two gangs ending in 2 h and 3 h
    running = [_on("a", ["n0"], NOW + 3600), _on("b", ["n1"], NOW + 4 * 3600),
               _on("c", ["n2"], NOW + 2 * 3600), _on("d", ["n3"], NOW + 3 * 3600)]
    # when
    hold = soonest_hold(_two_racks_full(), _two_machines_of_a_rack(), running)
    # then r2 (whole in 3 h) beats r1 (whole in 4 h)
    assert hold is not None
    assert (hold.machines, hold.free_by, hold.waits_for) == (frozenset({"n2", "n3"}), NOW + 3 * 3600, ("c", "d"))


def test_no_hold_for_a_gang_that_does_not_fit_even_when_everything_ended():
    # given the two racks and a gang of three machines in one rack
    running = [_on("a", ["n0", "n1"], NOW + 60), _on("b", ["n2", "n3"], NOW + 120)]
    too_big = gang(tree(rack("r", tasks=names("t", 3))), gpu=4)
    # when / then
    assert soonest_hold(_two_racks_full(), too_big, running) is None
    # and nothing running: no time to hold until
    assert soonest_hold(_two_racks_full(), _two_machines_of_a_rack(), []) is None


def _linear(snapshot, request, running) -> float | None:
    """The first expected end at which the gang fits, trying every one in order."""
    for t in sorted({g.ends for g in running}):
        if isinstance(solve(released(snapshot, [g for g in running if g.ends <= t]), request), Placement):
            return t
    return None


def _as_the_scan_finds(snapshot, request, running) -> bool:
    """The hold has the time a linear scan finds, and the very placement a solve on the pool built
    afresh with those gangs ended gives (the search moves one index between its probes and starts at
    a capacity bound); whether the gang fits at all."""
    hold = soonest_hold(snapshot, request, running)
    expected = _linear(snapshot, request, running)
    if expected is None:
        assert hold is None
        return False
    assert hold is not None and hold.free_by == expected
    assert hold.placement == solve(released(snapshot, [g for g in running if g.ends <= expected]), request)
    return True


def test_the_binary_search_finds_the_time_a_linear_scan_finds():
    rng = random.Random(32)
    checked = fits = 0
    for _ in range(60):
        # given three racks of three 4-GPU machines, each machine full or partly held by gangs with
        # random ends (some sharing an end), and a gang of 2-4 machines' worth in one rack
        rows, running = [], []
        for r in range(3):
            for m in range(3):
                name = f"n{3 * r + m}"
                held = rng.choice((0, 2, 4))
                rows.append((f"r{r}", 4 - held))
                if held:
                    running.append(Holder(f"g{name}", ((name, Resources(gpu=held)),),
                                               NOW + 60 * rng.randint(1, 6), True))
        snapshot = cluster(("rack",), rows)
        request = gang(tree(rack("r", tasks=names("t", rng.randint(2, 4)))), gpu=rng.choice((2, 4)))
        # when / then
        checked += 1
        fits += _as_the_scan_finds(snapshot, request, running)
    assert checked == 60 and fits > 20  # the instances exercise both outcomes


def test_the_search_started_at_the_capacity_bound_finds_what_a_linear_scan_finds_for_nested_gangs():
    rng = random.Random(5)
    checked = fits = 0
    for _ in range(80):
        # given two zones of three racks of two 4-GPU machines, each machine full, half or free, held
        # by gangs with random ends, some gangs holding machines in two racks
        rows, held = [], []
        for z in range(2):
            for r in range(3):
                for _m in range(2):
                    taken = rng.choice((0, 2, 4, 4))
                    rows.append((f"z{z}", f"z{z}r{r}", 4 - taken))
                    held.append((f"n{len(rows) - 1}", taken))
        running: list[Holder] = []
        while held:
            take = [held.pop() for _ in range(min(len(held), rng.choice((1, 2))))]
            take = [(m, gpu) for m, gpu in take if gpu]
            if take:
                running.append(Holder(f"g{len(running)}", tuple((m, Resources(gpu=gpu)) for m, gpu in take),
                                      NOW + 60 * rng.randint(1, 8), True))
        snapshot = cluster(("zone", "rack"), rows)
        # and a gang of 2-3 racks in one zone, each rack's part 1 or 2 machines' worth (two parts of
        # two machines never share a rack; parts of one may)
        parts = [rack(f"p{i}", tasks=names(f"p{i}t", rng.choice((1, 2)))) for i in range(rng.choice((2, 3)))]
        request = gang(tree(zone("z", *parts)), gpu=4)
        # when / then
        checked += 1
        fits += _as_the_scan_finds(snapshot, request, running)
    assert checked == 80 and fits > 30


def test_backfill_uses_the_kept_machines_only_when_it_ends_by_then():
    free_by = NOW + 3600
    # a gang whose timeout ends before the hold's time may use the machines, one ending exactly then too
    assert may_backfill(NOW, 1800, free_by) is True
    assert may_backfill(NOW, 3600, free_by) is True
    # one ending after it may not, nor one without a timeout, nor any when the hold has no time
    assert may_backfill(NOW, 3601, free_by) is False
    assert may_backfill(NOW, None, free_by) is False
    assert may_backfill(NOW, 60, None) is False


def test_the_held_machines_are_named_by_the_smallest_domain_holding_them():
    # given two zones of two racks of two machines
    snapshot = cluster(("zone", "rack"), [("z1", "r1", 4), ("z1", "r1", 4), ("z1", "r2", 4), ("z1", "r2", 4),
                                          ("z2", "r3", 4), ("z2", "r3", 4), ("z2", "r4", 4), ("z2", "r4", 4)])
    # when / then: one rack, with its zone; two racks of a zone; machines of both zones
    assert where(snapshot, frozenset({"n0", "n1"})) == "zone z1 (rack r1), 2 machines"
    assert where(snapshot, frozenset({"n6"})) == "zone z2 (rack r4), 1 machine"
    assert where(snapshot, frozenset({"n1", "n2", "n3"})) == "zone z1, 3 machines"
    assert where(snapshot, frozenset({"n3", "n4"})) == "2 machines"


def test_the_hold_asks_the_solver_it_is_given_so_a_topology_free_one_holds_across_racks():
    # given r1's machines free in 1 h and 4 h, r2's in 2 h and 3 h (one gang on each machine)
    running = [_on("a", ["n0"], NOW + 3600), _on("b", ["n1"], NOW + 4 * 3600),
               _on("c", ["n2"], NOW + 2 * 3600), _on("d", ["n3"], NOW + 3 * 3600)]

    def anywhere(snapshot, request, _policy):
        return ceiling(snapshot, request)

    # when the same gang asks with the solver and with the ceiling of bench.simulate (no topology)
    racked = soonest_hold(_two_racks_full(), _two_machines_of_a_rack(), running)
    free = soonest_hold(_two_racks_full(), _two_machines_of_a_rack(), running, solver=anywhere)
    # then the solver keeps its rack (r2, whole in 3 h); the ceiling takes the two machines free first
    assert racked is not None and free is not None
    assert (racked.machines, racked.free_by) == (frozenset({"n2", "n3"}), NOW + 3 * 3600)
    assert (free.machines, free.free_by, free.waits_for) == (frozenset({"n0", "n2"}), NOW + 2 * 3600, ("a", "c"))
