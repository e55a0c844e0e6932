"""Trace simulation: ``python -m bench.simulate [--jobs N] [--seed S | --seeds S,S] [--solvers ...]``; with
``--teams``, the two-team trace with quotas, borrowing and preemption of :mod:`bench.simulate_teams`; with
``--hold none,idle,expected-end``, this trace with the starvation guard's holds of :mod:`bench.simulate_hold`.

A seeded stream of gangs arrives on an initially idle ~1,000-tray NVL72 pool (2 zones x 4 spines x 7
racks x 18 trays x 4 GPUs = 1,008 trays). Job mix (sizes in tasks, one tray = 4 GPUs):
- 30% plain gangs of 1-4 tasks x 1-2 GPUs, no topology;
- 35% one model: 2-16 tasks x 4 GPUs, gpu-clique required;
- 25% two models of 4-8 tasks x 4 GPUs each, zone required, gpu-clique required per model;
- 10% large: 2-4 models of 16 tasks x 4 GPUs, zone required, gpu-clique required per model.
Durations are exponential; inter-arrival times are exponential, tuned for ~90% offered load.

Event-driven, same policy for every solver: at each arrival or completion, the queue is scanned in
arrival order (first 64 jobs, backfill without reservations) and each job is offered to the solver on
the current snapshot; a placement starts immediately. Metrics: GPU utilisation over [0, last
arrival], mean queue wait (jobs still waiting at the end count until the end of the run), jobs never
started, and the solver's per-call time. Progress goes to stderr.

``ceiling`` drops the topology constraints (a gang fits when its tasks fit on any machines with room)
under the same queue discipline; when it runs, a summary line gives each solver's utilisation and wait
beside it and the fragmentation loss (ceiling less solver, in utilisation points).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

from bench.kit.pools import nvl72_pool
from bench.kit.traces import SOLVERS, simulate, trace


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--teams" in argv:  # two teams, quotas, borrowing and preemption: bench.simulate_teams
        from bench.simulate_teams import main as teams_main

        return teams_main([a for a in argv if a != "--teams"])
    if any(a == "--hold" or a.startswith("--hold=") for a in argv):  # the starvation guard's holds: bench.simulate_hold
        from bench.simulate_hold import main as hold_main

        return hold_main(argv)
    parser = argparse.ArgumentParser(prog="python -m bench.simulate", description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=600)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--seeds", default=None, help="comma-separated trace seeds (overrides --seed); "
                        "with more than one, a summary line averages them")
    parser.add_argument("--load", type=float, default=0.9)
    parser.add_argument("--solvers", default=",".join(SOLVERS), help="comma-separated, of " + ", ".join(SOLVERS))
    parser.add_argument("--json", action="store_true", help="one JSON object per line (the default output)")
    args = parser.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",")] if args.seeds else [args.seed]
    rows = []
    for seed in seeds:
        base = nvl72_pool(2, 4, 7, occupancy=0.0, seed=seed)
        total = sum(n.free.gpu for n in base.nodes)
        jobs = trace(args.jobs, seed, total, args.load)
        for solver in args.solvers.split(","):
            print(f"simulate: seed {seed}, {solver} ...", file=sys.stderr)
            row = simulate(solver, jobs, base)
            row.update({"load": args.load, "seed": seed})
            rows.append(row)
            print(json.dumps(row))
            sys.stdout.flush()
    if "ceiling" in args.solvers.split(","):
        print(json.dumps(against_ceiling(rows)))
    return 0


def against_ceiling(rows: list[dict]) -> dict:
    """Each solver's mean utilisation and wait over the seeds beside the ceiling's (the topology
    constraints dropped), and the fragmentation loss: the ceiling's utilisation less the solver's, in
    points (per seed and on average)."""
    seeds = sorted({r["seed"] for r in rows})
    by = {(r["seed"], r["solver"]): r for r in rows}
    out: dict = {"summary": "ceiling", "seeds": seeds, "load": rows[0]["load"]}
    for solver in dict.fromkeys(r["solver"] for r in rows):
        mine = [by[s, solver] for s in seeds if (s, solver) in by]
        out[solver] = {
            "gpu_utilisation": round(statistics.fmean(r["gpu_utilisation"] for r in mine), 4),
            "mean_wait": round(statistics.fmean(r["mean_wait"] for r in mine), 2),
        }
        if solver != "ceiling":
            loss = [100 * (by[s, "ceiling"]["gpu_utilisation"] - by[s, solver]["gpu_utilisation"])
                    for s in seeds if (s, solver) in by and (s, "ceiling") in by]
            out[solver]["loss_points"] = [round(x, 1) for x in loss]
            out[solver]["loss_points_mean"] = round(statistics.fmean(loss), 1) if loss else None
    return out

if __name__ == "__main__":
    raise SystemExit(main())
