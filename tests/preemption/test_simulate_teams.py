"""The two-team trace simulation behind bench.simulate --teams runs every policy on a small pool and
keeps its own invariants (docs/benchmarks.md)."""

from __future__ import annotations

from bench.pools import nvl72_pool
from bench.simulate_teams import POLICIES, simulate, team_trace


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
    assert {p: rows[p]["evictions"] for p in ("no-low", "no-borrow", "borrow")} == {
        "no-low": 0, "no-borrow": 0, "borrow": 0}
    assert rows["borrow+search"]["evictions"] > 0
    assert rows["borrow+search"]["unneeded"] == 0
    for row in rows.values():
        assert 0 < row["gpu_utilisation"] <= 1 and 0 <= row["goodput"] <= row["gpu_utilisation"]
