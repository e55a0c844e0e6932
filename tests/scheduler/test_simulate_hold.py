"""The starvation guard's holds on bench.simulate's trace (docs/benchmarks.md, "Reservations by expected
end"): no guard decides as bench.simulate does, timeouts are seeded overestimates, the guards hold."""

from __future__ import annotations

from bench.kit.pools import nvl72_pool
from bench.simulate import simulate as simulate_plain
from bench.simulate import trace
from bench.simulate_hold import Moves, against_ceiling, simulate, timeouts


def _small():
    base = nvl72_pool(2, 4, 7, occupancy=0.0, seed=7)
    return base, trace(220, 7, sum(n.free.gpu for n in base.nodes), 1.5)


def test_timeouts_overestimate_each_run_by_up_to_three_times_and_are_seeded():
    # given the trace of seed 7
    _base, jobs = _small()
    # when
    limits = timeouts(jobs, 7)
    # then each is between the run and three times it, the same again for the seed, others for another
    assert all(job.duration <= limit <= 3 * job.duration for job, limit in zip(jobs, limits, strict=True))
    assert timeouts(jobs, 7) == limits
    assert timeouts(jobs, 8) != limits


def test_without_a_guard_the_trace_runs_as_bench_simulate_runs_it():
    # given
    base, jobs = _small()
    # when
    plain = simulate_plain("solve", jobs, base)
    mine = simulate("none", jobs, base, timeouts(jobs, 7))
    # then the same jobs start at the same times: equal utilisation and wait
    assert (mine["gpu_utilisation"], mine["mean_wait"], mine["started"]) == (
        plain["gpu_utilisation"], plain["mean_wait"], plain["started"])
    assert mine["holds"] == 0


def test_both_guards_hold_and_only_the_expected_end_one_lets_gangs_backfill_its_machines():
    # given a trace at load 1.5, where big gangs starve
    base, jobs = _small()
    limits = timeouts(jobs, 7)
    # when
    idle = simulate("idle", jobs, base, limits)
    ours = simulate("expected-end", jobs, base, limits)
    # then both held machines for starving gangs, and only by expected end did gangs use them meanwhile
    assert idle["holds"] > 0 and ours["holds"] > 0
    assert idle["backfilled_on_kept"] == 0
    assert ours["backfilled_on_kept"] > 0
    assert idle["started"] == ours["started"] == len(jobs)


def test_with_several_holds_more_starving_gangs_are_held_and_one_hold_decides_as_before():
    # given the trace at load 1.5
    base, jobs = _small()
    limits = timeouts(jobs, 7)
    # when
    one = simulate("expected-end", jobs, base, limits)
    again = simulate("expected-end", jobs, base, limits, max_holds=1)
    four = simulate("expected-end", jobs, base, limits, max_holds=4)
    idle = simulate("idle", jobs, base, limits, max_holds=4)
    # then one hold is the default; four make more holds (a scan may hold for several gangs) and today's
    # guard keeps one whatever is asked
    assert again == one
    assert four["holds"] > one["holds"]
    assert "moved_jobs" not in four and four["goodput"] == four["gpu_utilisation"]  # no moves asked
    assert idle == simulate("idle", jobs, base, limits)


def test_the_ceiling_runs_under_the_same_holds_and_without_a_guard_as_bench_simulate_runs_it():
    # given the trace at load 1.5
    base, jobs = _small()
    limits = timeouts(jobs, 7)
    # when the topology-free ceiling runs without a guard and with eight holds by expected end
    plain = simulate_plain("ceiling", jobs, base)
    bare = simulate("none", jobs, base, limits, solver="ceiling")
    held = simulate("expected-end", jobs, base, limits, max_holds=8, solver="ceiling")
    # then without a guard it decides as bench.simulate's ceiling; with holds it held and kept every job going
    assert (bare["gpu_utilisation"], bare["mean_wait"], bare["holds"]) == (
        plain["gpu_utilisation"], plain["mean_wait"], 0)
    assert held["holds"] > 0
    assert held["started"] == len(jobs)
    assert (bare["solver"], held["solver"]) == ("ceiling", "ceiling")


def test_the_loss_under_a_hold_is_the_ceiling_less_solve_with_that_hold():
    # given rows of two seeds, each solver with no guard and with holds
    rows = [{"seed": s, "hold": h, "solver": v, "gpu_utilisation": u, "load": 1.0, "max_holds": 8}
            for s, h, v, u in [(7, "none", "solve", 0.74), (7, "none", "ceiling", 0.78),
                               (7, "expected-end", "solve", 0.75), (7, "expected-end", "ceiling", 0.78),
                               (8, "none", "solve", 0.80), (8, "none", "ceiling", 0.85),
                               (8, "expected-end", "solve", 0.81), (8, "expected-end", "ceiling", 0.83)]]
    # when
    out = against_ceiling(rows)
    # then each hold has its own loss, per seed and on average, in points
    assert out["none"]["loss_points"] == [4.0, 5.0]
    assert out["none"]["loss_points_mean"] == 4.5
    assert out["expected-end"]["loss_points"] == [3.0, 2.0]
    assert out["expected-end"]["loss_points_mean"] == 2.5
    assert (out["expected-end"]["solve"], out["expected-end"]["ceiling"]) == (0.78, 0.805)


def test_consolidation_moves_running_jobs_for_starving_big_gangs_and_goodput_counts_the_work_they_lose():
    # given 160 jobs of the trace at load 2.0 (enough for big gangs to starve, and quick) with eight
    # holds by expected end
    base = nvl72_pool(2, 4, 7, occupancy=0.0, seed=7)
    jobs = trace(160, 7, sum(n.free.gpu for n in base.nodes), 2.0)
    limits = timeouts(jobs, 7)
    # when big gangs may move up to four running jobs, restarted or resumed
    moved = simulate("expected-end", jobs, base, limits, max_holds=8, moves=Moves(4))
    resumed = simulate("expected-end", jobs, base, limits, max_holds=8, moves=Moves(4, resume=True))
    # then jobs moved, every job started; a restarted move loses its work (goodput below utilisation),
    # a resumed one none
    assert (moved["consolidations"], moved["moved_jobs"], moved["lost_points"]) == (1, 3, 0.11)
    assert moved["goodput"] == round(moved["gpu_utilisation"] - 0.0011, 4)
    assert moved["started"] == resumed["started"] == len(jobs)
    assert resumed["moved_jobs"] > 0 and resumed["lost_points"] == 0.0
    assert resumed["goodput"] == resumed["gpu_utilisation"]


def test_the_loss_on_goodput_is_given_when_solve_moved_jobs():
    # given one seed where solve moved jobs and lost 2 points of work
    rows = [{"seed": 7, "hold": "expected-end", "solver": "solve", "gpu_utilisation": 0.78, "goodput": 0.76,
             "moved_jobs": 3, "load": 1.0, "max_holds": 8},
            {"seed": 7, "hold": "expected-end", "solver": "ceiling", "gpu_utilisation": 0.80, "goodput": 0.80,
             "load": 1.0, "max_holds": 8}]
    # when
    out = against_ceiling(rows)["expected-end"]
    # then the loss both ways
    assert (out["loss_points"], out["goodput_loss_points"], out["solve_goodput"]) == ([2.0], [4.0], 0.76)
