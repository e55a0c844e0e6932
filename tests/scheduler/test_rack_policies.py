"""The rack-level proxy of bench.simulate where placement ideas are screened (docs/benchmarks.md,
"Placement policies screened at rack level")."""

from __future__ import annotations

from bench.pools import nvl72_pool
from bench.rack_policies import Racks, best, ends, place_models, run
from bench.simulate import trace


def _racks(whole: list[int], size: int = 18) -> Racks:
    pool = Racks(zones=1, spines=1, racks=len(whole), size=size)
    pool.whole = list(whole)
    return pool


def test_best_puts_a_model_on_the_tightest_rack_and_takes_its_trays():
    # given three racks with 18, 9 and 12 whole free trays
    pool = _racks([18, 9, 12])
    # when a model of 8 trays and then one of 10 are placed
    first = place_models(pool, [8], False, best, 0.0, 60.0)
    second = place_models(pool, [10], False, best, 0.0, 60.0)
    # then each went where it leaves the fewest trays, and those trays are counted off
    assert first == [(1, 8)]
    assert second == [(2, 10)]
    assert pool.whole == [18, 1, 2]


def test_a_zoned_gang_that_does_not_fit_takes_nothing():
    # given a rack with 16 whole free trays and one with 8
    pool = _racks([16, 8])
    # when two models of 16 trays in one zone are asked for
    placed = place_models(pool, [16, 16], True, best, 0.0, 60.0)
    # then none is placed and the first model's trays are given back
    assert placed is None
    assert pool.whole == [16, 8]


def test_protect_keeps_a_smaller_model_off_a_rack_a_large_gang_could_use():
    # given a rack with 18 whole free trays and one with 10
    pool = _racks([18, 10])
    # when a 12-tray model is placed with and without protect
    kept_off = place_models(pool, [12], False, best, 0.0, 60.0, protect=True)
    placed = place_models(pool, [12], False, best, 0.0, 60.0)
    # then with protect it does not fit (only the 18-tray rack has room), without it takes that rack
    assert kept_off is None
    assert placed == [(0, 12)]


def test_ends_breaks_a_tie_of_fit_by_the_closest_end():
    # given two racks equally tight for a 4-tray model, holding models that end at 100 and at 50
    pool = _racks([8, 8])
    pool.ends = [[100.0], [50.0]]
    # when a model that ends at 55 is placed by ends, and by best
    by_end = place_models(_copy(pool), [4], False, ends, 0.0, 55.0)
    by_fit = place_models(_copy(pool), [4], False, best, 0.0, 55.0)
    # then ends takes the rack whose work ends closest to its own, best the first of the tie
    assert by_end == [(1, 4)]
    assert by_fit == [(0, 4)]


def _copy(pool: Racks) -> Racks:
    out = _racks(list(pool.whole))
    out.ends = [list(e) for e in pool.ends]
    return out


def test_the_ceiling_splits_a_model_over_racks():
    # given two racks with 9 whole free trays each
    pool = _racks([9, 9])
    # when a 12-tray model is placed by the constraint-honouring rule and by the ceiling
    honoured = place_models(_racks([9, 9]), [12], False, best, 0.0, 60.0)
    dropped = place_models(pool, [12], False, best, 0.0, 60.0, ceiling=True)
    # then only the ceiling places it, over both racks
    assert honoured is None
    assert dropped == [(0, 9), (1, 3)]


def test_a_trace_runs_out_with_every_tray_free_again_and_the_ceiling_above():
    # given the first 120 gangs of seed 7 at load 1.0
    base = nvl72_pool(2, 4, 7, occupancy=0.0, seed=7)
    jobs = trace(120, 7, sum(n.free.gpu for n in base.nodes), 1.0)
    # when the proxy runs them with best and with the ceiling
    mine = run(jobs, best)
    top = run(jobs, ceiling=True)
    # then every gang started, the pool is whole again at the end, and the ceiling is not below
    pool = mine["pool"]
    assert mine["started"] == 120
    assert pool.whole == [18] * 56
    assert all(tray == 4 for rack in pool.trays for tray in rack)
    assert all(not e for e in pool.ends)
    assert 0 < mine["gpu_utilisation"] <= top["gpu_utilisation"] <= 1
