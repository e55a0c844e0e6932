"""The two-team trace simulation behind bench.simulate --teams runs every policy on a small pool and
keeps its own invariants (docs/benchmarks.md)."""

from __future__ import annotations

from bench.kit.pools import nvl72_pool
from bench.simulate_teams import POLICIES, simulate, summary, team_trace


def test_every_policy_runs_and_the_search_never_evicts_an_unneeded_gang():
    # given a 2-rack pool and a trace offered at twice its capacity
    base = nvl72_pool(1, 1, 2, occupancy=0.0, seed=3)
    total = sum(node.free.gpu for node in base.nodes)
    jobs = team_trace(80, 3, total, 2.0)
    # when each policy runs it
    rows = {policy: simulate(policy, jobs, base) for policy in POLICIES}
    # then no LOW job exists without LOW work, only preempting policies evict, and the search's victim
    # sets are irreducible
    assert "low_mean_wait" not in rows["no-low"]
    assert {p: rows[p]["evictions"] for p in ("no-low", "no-quota", "no-borrow", "borrow")} == {
        "no-low": 0, "no-quota": 0, "no-borrow": 0, "borrow": 0}
    assert rows["borrow+search"]["evictions"] > 0
    assert rows["borrow+search"]["unneeded"] == 0
    for row in rows.values():
        assert 0 < row["gpu_utilisation"] <= 1 and 0 <= row["goodput"] <= row["gpu_utilisation"]
        # and no job's in-quota wait exceeds its wait (an evicted run's stale end event once counted
        # the interval before it twice)
        assert row["in_quota_beyond_wait"] == 0


def test_a_grace_period_delays_the_preemptor_and_the_summary_compares_against_no_low_plus_grace():
    base = nvl72_pool(1, 1, 2, occupancy=0.0, seed=3)
    total = sum(node.free.gpu for node in base.nodes)
    jobs = team_trace(80, 3, total, 2.0)
    # when the victims' pods take a long grace period to stop (the starvation guard off, so that the
    # same jobs preempt with either grace period)
    rows = [{**simulate(policy, jobs, base, grace=30.0, starvation=None), "seed": 3}
            for policy in ("no-low", "no-borrow", "borrow+search")]
    quick = simulate("borrow+search", jobs, base, grace=0.0, starvation=None)
    # then the preemptors wait for it, and the summary judges waits against no-low plus the grace
    slow = rows[2]
    assert slow["evictions"] > 0
    assert slow["high_mean_wait"] > quick["high_mean_wait"]
    out = summary(rows, 30.0)
    gain = round(100 * (slow["gpu_utilisation"] - rows[1]["gpu_utilisation"]), 1)
    assert out["borrow+search_points_over_no_borrow"] == [gain]
    ref = rows[0]
    within = sum(slow[f"{p}_in_quota_{m}_wait"] <= ref[f"{p}_in_quota_{m}_wait"] + 30.0
                 for p in ("high", "normal") for m in ("mean", "p95"))
    assert out["borrow+search_in_quota_waits_within_no_low_plus_grace"] == f"{within}/4"
    # and the in-quota wait is part of the wait (the grace period included)
    for row in rows:
        for p in ("high", "normal"):
            assert 0 <= row[f"{p}_in_quota_mean_wait"] <= row[f"{p}_mean_wait"] + 1e-9
    assert slow["high_in_quota_mean_wait"] > quick["high_in_quota_mean_wait"]


def test_an_in_quota_wait_never_exceeds_the_wait():
    # given a trace where evicted runs leave stale end events behind (a 6-rack pool at twice its load)
    base = nvl72_pool(1, 2, 3, occupancy=0.0, seed=3)
    total = sum(node.free.gpu for node in base.nodes)
    jobs = team_trace(150, 3, total, 2.0)
    # when the service's policy runs it
    row = simulate("borrow+search", jobs, base, grace=0.5)
    # then jobs were evicted, and no HIGH/NORMAL job's in-quota wait exceeds its wait (the interval
    # before a stale event was counted twice: 4 jobs here)
    assert row["evictions"] > 0
    assert row["in_quota_beyond_wait"] == 0


def test_a_minimum_runtime_keeps_young_low_jobs_from_being_evicted():
    # given a 4-rack pool and a trace offered at twice its capacity, preempting with the service's search
    base = nvl72_pool(1, 1, 4, occupancy=0.0, seed=5)
    total = sum(node.free.gpu for node in base.nodes)
    jobs = team_trace(120, 5, total, 2.0)
    # when it runs without a minimum runtime, with one of 30 time units, and with one beyond the trace
    free = simulate("borrow+search", jobs, base, starvation=None)
    kept = simulate("borrow+search", jobs, base, starvation=None, min_runtime=30.0)
    never = simulate("borrow+search", jobs, base, starvation=None, min_runtime=1e9)
    # then without one a victim may have just started; with one, no victim had run less than it
    assert free["evictions"] > 0 and free["shortest_evicted_run"] < 30.0
    assert kept["shortest_evicted_run"] is None or kept["shortest_evicted_run"] >= 30.0
    # and with one longer than any job nothing is evicted and no work is lost
    assert (never["evictions"], never["lost_gpu_time"], never["shortest_evicted_run"]) == (0, 0.0, None)
    assert free["lost_gpu_time"] > 0


def test_fair_share_puts_the_lighter_team_first_within_a_priority():
    # given a 4-rack pool, no quotas, and a trace where team a submits four times as much as team b
    base = nvl72_pool(1, 1, 4, occupancy=0.0, seed=5)
    total = sum(node.free.gpu for node in base.nodes)
    jobs = team_trace(120, 5, total, 2.0, skew=0.8)
    # when it runs in arrival order and with fair share (half-life 60)
    plain = simulate("no-quota", jobs, base, starvation=None)
    fair = simulate("no-quota", jobs, base, starvation=None, fairshare=60.0)
    # then the lighter team waits less relative to the heavier one than in arrival order
    assert fair["team_b_over_a_wait"] < plain["team_b_over_a_wait"]
    assert plain["team_b_over_a_wait"] == round(plain["team_b_mean_wait"] / plain["team_a_mean_wait"], 3)


def test_with_the_eviction_window_normal_jobs_evict_only_low_jobs_within_twice_the_minimum_runtime():
    # given a 4-rack pool and a trace offered at twice its capacity, a minimum runtime of 10
    base = nvl72_pool(1, 1, 4, occupancy=0.0, seed=5)
    total = sum(node.free.gpu for node in base.nodes)
    jobs = team_trace(120, 5, total, 2.0)
    # when it runs with the eviction window (the service) and without it
    window = simulate("borrow+search", jobs, base, starvation=None, min_runtime=10.0)
    before = simulate("borrow+search", jobs, base, starvation=None, min_runtime=10.0, window=False)
    # then without it NORMAL jobs evict LOW jobs that have run far longer than 20; with it none
    assert before["longest_run_evicted_by_normal"] > 20.0
    assert window["longest_run_evicted_by_normal"] is None or window["longest_run_evicted_by_normal"] <= 20.0
    # and no victim had run less than the minimum runtime, and less work is lost
    assert window["shortest_evicted_run"] >= 10.0
    assert window["lost_gpu_time"] < before["lost_gpu_time"]
