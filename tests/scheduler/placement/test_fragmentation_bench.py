"""bench.fragmentation (docs/benchmarks-log.md, "Against a ceiling without topology"): its re-pack test and
its copy of the trace loop, which must measure what bench.simulate measures."""

from __future__ import annotations

from bench.fragmentation import repacks, run
from bench.kit.pools import nvl72_pool
from bench.kit.traces import simulate, trace


def test_the_repack_puts_each_model_on_one_rack_and_the_plain_gpus_in_what_is_left() -> None:
    # given two empty racks of 18 trays
    # when / then: 16 + 2 share a rack, the other 16 takes the second
    assert repacks([16, 2, 16], 0, racks=2, trays=18) is True
    # a 3-tray model fits beside neither 16
    assert repacks([16, 3, 16], 0, racks=2, trays=18) is False
    # 4 trays are left: 16 plain GPUs fit, 17 do not
    assert repacks([16, 16], 16, racks=2, trays=18) is True
    assert repacks([16, 16], 17, racks=2, trays=18) is False


def test_the_instrumented_loop_measures_the_same_utilisation_as_bench_simulate() -> None:
    # given a small pool (one zone, one spine, two racks) and a trace offered at full load
    base = nvl72_pool(1, 1, 2, occupancy=0.0, seed=5)
    jobs = trace(60, 5, sum(n.free.gpu for n in base.nodes), 1.0)
    for solver in ("solve", "ceiling"):
        # when both loops run it
        counted = run(solver, jobs, base)
        plain = simulate(solver, jobs, base)
        # then they agree, and the idle points are what utilisation leaves
        assert counted["gpu_utilisation"] == plain["gpu_utilisation"] > 0
        assert abs(sum(counted["idle_points"].values()) + 100 * counted["gpu_utilisation"] - 100) < 0.05
