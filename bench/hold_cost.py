"""What the starvation guard's holds cost a placement cycle: ``python -m bench.hold_cost [--pools N]
[--holds 1,4,8] [--json]``.

Pool: :func:`bench.kit.preemption_instances.crowded_pool` (the 20,736-tray NVL72 pool, 5,000 running LOW
gangs of 1-3 trays, NORMAL work between them, about 3 % of the trays idle). Each running LOW gang is a
:class:`scheduler.hold.Holder`: half of them (seeded) have an ``exec_timeout`` of 1-4 hours from
their start, the others are estimated to run as long again as they have
(:func:`scheduler.hold.expected_end`); the NORMAL work is not a holder (it does not end within the
search). Starving gangs: the shapes of ``LARGE_PREEMPTORS`` that do not fit the pool now (a whole
rack, 4 or 8 cliques of 16 trays in a zone, 1,400 trays anywhere), taken in turn until there are
``K``.

Per ``K`` (``OSMO_STARVATION_MAX_HOLDS``): what the walk does for its holds
(``workflows.scheduling.cycle.walk``): each starving gang's hold sought by
:func:`scheduler.hold.soonest_hold` on the pool without the earlier holds' machines, and the gang
solved once more on the pool for its verdict. Beside it, in the same run, the baseline: the verdict
solves alone (what the same starving gangs cost a cycle without holds). Reported: seconds (wall and
this process's CPU), holds found, the CPU per hold beyond the baseline, and ``vs_baseline`` (CPU
ratio).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Callable
from dataclasses import replace

from bench.kit.preemption_instances import LARGE_PREEMPTORS, crowded_pool
from scheduler.hold import Holder, expected_end, soonest_hold
from scheduler.placement import ClusterSnapshot, GangRequest, Placement, solve

NOW = 1_000_000.0  # the crowded pool's clock (epoch seconds)
HOUR = 3600.0


def holders(seed: int) -> tuple[ClusterSnapshot, list[Holder]]:
    """The crowded pool and its running LOW gangs as holders (half with a timeout, seeded)."""
    snapshot, candidates = crowded_pool(seed, now=NOW)
    rng = random.Random(seed * 31 + 5)
    out = []
    for c in candidates:
        timeout = rng.uniform(1 * HOUR, 4 * HOUR) if rng.random() < 0.5 else None
        if timeout is not None and c.started + timeout <= NOW:
            timeout = NOW - c.started + rng.uniform(60, HOUR)  # a timeout still ahead of it
        ends, bounded = expected_end(c.started, NOW, timeout)
        out.append(Holder(c.key, c.holdings, ends, bounded))
    return snapshot, out


def starving(snapshot: ClusterSnapshot, count: int) -> list[tuple[str, GangRequest]]:
    """``count`` starving gangs: the large shapes that do not fit the pool now, in turn."""
    shapes: list[tuple[str, Callable[[], GangRequest]]] = [
        (name, make) for name, make in LARGE_PREEMPTORS.items() if not isinstance(solve(snapshot, make()), Placement)]
    return [(shapes[i % len(shapes)][0], shapes[i % len(shapes)][1]()) for i in range(count)]


def cycle_holds(snapshot: ClusterSnapshot, running: list[Holder], gangs: list[tuple[str, GangRequest]],
                holds: bool) -> dict:
    """The starving gangs' part of one cycle: with ``holds``, each one's hold on the pool without the
    earlier holds' machines, then its verdict solve; without, the verdict solves alone."""
    began, cpu_began = time.perf_counter(), time.process_time()
    taken: set[str] = set()
    found = 0
    for _name, gang in gangs:
        if holds:
            view = snapshot if not taken else replace(
                snapshot, nodes=tuple(node for node in snapshot.nodes if node.name not in taken))
            hold = soonest_hold(view, gang, running)
            if hold is not None:
                found += 1
                taken |= hold.machines
        solve(snapshot, gang)
    return {"seconds": time.perf_counter() - began, "cpu_seconds": time.process_time() - cpu_began,
            "holds_found": found}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pools", type=int, default=1, help="crowded pool seeds 1..N")
    parser.add_argument("--holds", default="1,4,8", help="comma-separated K: starving gangs holding at once")
    parser.add_argument("--json", action="store_true", help="one JSON object per line (the default output)")
    args = parser.parse_args(argv)
    ks = [int(k) for k in args.holds.split(",")]
    for seed in range(1, args.pools + 1):
        print(f"pool {seed}: building the crowded pool", file=sys.stderr)
        snapshot, running = holders(seed)
        for k in ks:
            gangs = starving(snapshot, k)
            base = cycle_holds(snapshot, running, gangs, holds=False)
            held = cycle_holds(snapshot, running, gangs, holds=True)
            row = {"bench": "hold-cost", "pool": seed, "max_holds": k, "running": len(running),
                   "starving": [name for name, _ in gangs],
                   "holds_seconds": round(held["seconds"], 3), "holds_cpu_seconds": round(held["cpu_seconds"], 3),
                   "holds_found": held["holds_found"],
                   "baseline_seconds": round(base["seconds"], 3),
                   "baseline_cpu_seconds": round(base["cpu_seconds"], 3),
                   "vs_baseline": round(held["cpu_seconds"] / max(base["cpu_seconds"], 1e-9), 2),
                   "per_hold_cpu_seconds": round((held["cpu_seconds"] - base["cpu_seconds"]) / max(k, 1), 3)}
            print(json.dumps(row))
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
