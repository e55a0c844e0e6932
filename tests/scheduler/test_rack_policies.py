"""The rack-level proxy of bench.simulate where placement ideas are screened (docs/benchmarks-log.md,
"Placement policies screened at rack level")."""

from __future__ import annotations

from bench.kit.pools import nvl72_pool
from bench.kit.traces import trace
from bench.rack_policies import PLAIN, Racks, Repack, best, ends, place_models, place_plain, repack, run


def _racks(whole: list[int], size: int = 18) -> Racks:
    pool = Racks(zones=1, spines=1, racks=len(whole), size=size)
    pool.whole = list(whole)
    return pool


def test_best_puts_a_model_on_the_tightest_rack_and_takes_its_trays():
    # given three racks with 18, 9 and 12 whole free trays
    pool = _racks([18, 9, 12])
    # when a model of 8 trays and then one of 10 are placed
    first = place_models(pool, [8], False, best, 60.0)
    second = place_models(pool, [10], False, best, 60.0)
    # then each went where it leaves the fewest trays, and those trays are counted off
    assert first == [(1, 8)]
    assert second == [(2, 10)]
    assert pool.whole == [18, 1, 2]


def test_a_zoned_gang_that_does_not_fit_takes_nothing():
    # given a rack with 16 whole free trays and one with 8
    pool = _racks([16, 8])
    # when two models of 16 trays in one zone are asked for
    placed = place_models(pool, [16, 16], True, best, 60.0)
    # then none is placed and the first model's trays are given back
    assert placed is None
    assert pool.whole == [16, 8]


def test_protect_keeps_a_smaller_model_off_a_rack_a_large_gang_could_use():
    # given a rack with 18 whole free trays and one with 10
    pool = _racks([18, 10])
    # when a 12-tray model is placed with and without protect
    kept_off = place_models(pool, [12], False, best, 60.0, protect=True)
    placed = place_models(pool, [12], False, best, 60.0)
    # then with protect it does not fit (only the 18-tray rack has room), without it takes that rack
    assert kept_off is None
    assert placed == [(0, 12)]


def test_ends_breaks_a_tie_of_fit_by_the_closest_end():
    # given two racks equally tight for a 4-tray model, holding models that end at 100 and at 50
    pool = _racks([8, 8])
    pool.ends = [[100.0], [50.0]]
    # when a model that ends at 55 is placed by ends, and by best
    by_end = place_models(_copy(pool), [4], False, ends, 55.0)
    by_fit = place_models(_copy(pool), [4], False, best, 55.0)
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
    honoured = place_models(_racks([9, 9]), [12], False, best, 60.0)
    dropped = place_models(pool, [12], False, best, 60.0, ceiling=True)
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


def test_repack_moves_a_model_off_the_rack_a_waiting_gang_needs_and_keeps_the_others_in_place():
    # given two racks of 18 trays: rack 0 holds a 4-tray model (job 1), rack 1 an 8-tray model (job 2)
    pool = _racks([14, 10])
    units = [(0, [(16, None)], False), (2, [(8, 1)], False), (1, [(4, 0)], False)]
    # when a 16-tray model (job 0) waits and every running model may be placed again
    plan = repack(pool, units)
    # then the waiting model takes rack 0 (it displaces 2 trays there, 6 on rack 1), job 1 moves to
    # rack 1 beside job 2, which stays
    assert plan == {0: [0], 2: [1], 1: [1]}


def test_repack_says_none_when_the_models_cannot_all_be_placed_again():
    # given two racks of 18 trays each holding a 10-tray model
    pool = _racks([8, 8])
    units = [(0, [(16, None)], False), (1, [(10, 0)], False), (2, [(10, 1)], False)]
    # when a 16-tray model waits
    plan = repack(pool, units)
    # then there is no plan (16 + 10 + 10 trays do not fit 2 racks of 18), and the pool is untouched
    assert plan is None
    assert pool.whole == [8, 8]


def test_moves_that_resume_lose_no_work_and_moves_that_restart_do():
    # given the first 200 gangs of seed 10 at load 1.5 (large gangs wait there)
    base = nvl72_pool(2, 4, 7, occupancy=0.0, seed=10)
    jobs = trace(200, 10, sum(n.free.gpu for n in base.nodes), 1.5)
    # when the proxy runs them with repacking that resumes and that restarts
    resumed = run(jobs, best, moves=Repack("resume", wait=0.0))
    restarted = run(jobs, best, moves=Repack("restart", wait=0.0))
    # then both moved gangs; resumed moves threw nothing away, restarted ones did; the pool ends whole
    assert resumed["moved"] > 0 and restarted["moved"] > 0
    assert resumed["goodput"] == resumed["gpu_utilisation"]
    assert restarted["goodput"] < restarted["gpu_utilisation"]
    assert resumed["pool"].whole == [18] * 56 and restarted["pool"].whole == [18] * 56


def test_moves_for_any_waiting_gang_try_more_often_than_for_large_gangs_only():
    # given the first 200 gangs of seed 10 at load 1.5
    base = nvl72_pool(2, 4, 7, occupancy=0.0, seed=10)
    jobs = trace(200, 10, sum(n.free.gpu for n in base.nodes), 1.5)
    # when the proxy moves running models for free, for large gangs only and for any waiting gang
    large = run(jobs, best, moves=Repack("resume", wait=0.0))
    any_ = run(jobs, best, moves=Repack("resume", wait=0.0, for_any=True))
    # then gangs with fewer models also had models moved for them (more repacks), no work was lost,
    # and the pool ends whole
    assert any_["repacks"] > large["repacks"] > 0
    assert any_["goodput"] == any_["gpu_utilisation"]
    assert any_["pool"].whole == [18] * 56


def test_a_plain_task_breaks_a_tray_of_the_rack_the_rule_ranks_first():
    # given racks with 18, 5 and 9 whole free trays, the third with two part-used trays
    def pool() -> Racks:
        p = _racks([18, 5, 9])
        p.trays = [[4] * 18, [4] * 5 + [0] * 13, [4] * 9 + [2, 1] + [0] * 7]
        return p
    # when a task of 4 GPUs is placed by each rule
    tightest, fewest, partial = (place_plain(pool(), [4], PLAIN[rule]) for rule in
                                 ("tightest", "fewest-whole", "partial-rack"))
    # then the lowest rack, the rack with the fewest whole trays, and the one with part-used trays gave one
    assert tightest == [(0, 0, 4)]
    assert fewest == [(1, 0, 4)]
    assert partial == [(2, 0, 4)]
