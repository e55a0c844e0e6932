"""Placement benchmarks: ``python -m bench.placement --scenario NAME [--runs N] [--json]``.

Speed scenarios (see :mod:`bench.kit.scenarios`) time ``solve`` and both baselines on the same inputs,
interleaved run by run, and print one line per solver with at least
{"scenario", "solver", "nodes", "tasks", "runs", "p50_ms", "p95_ms", "status"}.

``--scenario oracle-5000`` runs the completeness comparison: ``--instances`` (default 5,000) random
small instances (:func:`bench.kit.instances.random_instance`, seeds 0..N-1) checked against the CP-SAT
oracle. Per solver it reports how often the verdict disagrees with the oracle ("wrong_fail": says
unschedulable although a placement exists; "wrong_place": a placement that breaks a constraint or
over-commits), and, when the oracle can meet every preferred constraint, how often not all were met.
Progress goes to stderr.

``--scenario planted-N`` (e.g. ``planted-1000``) solves N feasible multi-shape instances of
:func:`bench.kit.instances.planted_instance` (seeds 0..N-1; 2-4 shapes of (gpu, cpu), tasks cut from the free
capacity of the machines they are planted on) at the default budget and counts, per solver, placed,
undecided, wrongly unschedulable and invalid placements.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import statistics
import sys
import time
from collections.abc import Callable

from bench.kit.baselines import kueue_greedy, pod_affinity
from bench.kit.instances import check, planted_instance, random_instance
from bench.kit.scenarios import SCENARIOS
from scheduler.placement import Placement, Unplaceable, solve
from scheduler.placement.types import ClusterSnapshot, GangRequest

Solver = Callable[[ClusterSnapshot, GangRequest], Placement | Unplaceable]
SOLVERS: dict[str, Solver] = {"solve": solve, "kueue-greedy": kueue_greedy, "pod-affinity": pod_affinity}


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def speed(name: str, runs: int, slow_runs: int) -> list[dict]:
    snapshot, group = SCENARIOS[name]()
    times: dict[str, list[float]] = {s: [] for s in SOLVERS}
    status: dict[str, str] = {}
    for run in range(runs):
        for solver, fn in SOLVERS.items():
            if solver == "pod-affinity" and run >= slow_runs:
                continue
            gc.collect()
            start = time.perf_counter()
            result = fn(snapshot, group)
            times[solver].append((time.perf_counter() - start) * 1000)
            status[solver] = result.status
            if isinstance(result, Placement):
                problems = check(snapshot, group, result)
                if problems:
                    status[solver] = "invalid"
        print(f"{name}: run {run + 1}/{runs}", file=sys.stderr)
    rows = []
    kueue_p50 = statistics.median(times["kueue-greedy"])
    for solver, ts in times.items():
        row = {
            "scenario": name,
            "solver": solver,
            "nodes": len(snapshot.nodes),
            "tasks": len(group.tasks),
            "runs": len(ts),
            "p50_ms": round(statistics.median(ts), 2),
            "p95_ms": round(_pct(ts, 0.95), 2),
            "status": status[solver],
        }
        if solver == "solve":
            row["p50_vs_kueue_greedy"] = round(statistics.median(ts) / kueue_p50, 2)
        rows.append(row)
    return rows


def oracle_run(instances: int) -> list[dict]:
    from bench.kit.oracle import feasible

    counters = {
        s: {"agree": 0, "wrong_fail": 0, "wrong_place": 0, "undecided": 0, "preferred_missed": 0} for s in SOLVERS
    }
    times: dict[str, list[float]] = {s: [] for s in SOLVERS}
    feasible_count = preferred_count = 0
    max_nodes = max_tasks = 0
    for seed in range(instances):
        snapshot, group = random_instance(random.Random(seed))
        max_nodes, max_tasks = max(max_nodes, len(snapshot.nodes)), max(max_tasks, len(group.tasks))
        ok = feasible(snapshot, group)
        all_pref = ok and feasible(snapshot, group, all_preferred=True)
        feasible_count += ok
        preferred_count += all_pref
        for solver, fn in SOLVERS.items():
            start = time.perf_counter()
            result = fn(snapshot, group)
            times[solver].append((time.perf_counter() - start) * 1000)
            c = counters[solver]
            if result.status == "undecided":
                c["undecided"] += 1
            elif isinstance(result, Placement):
                if not ok or check(snapshot, group, result):
                    c["wrong_place"] += 1
                else:
                    c["agree"] += 1
                    if all_pref and not _all_preferred_met(snapshot, group, result):
                        c["preferred_missed"] += 1
            elif ok:
                c["wrong_fail"] += 1
            else:
                c["agree"] += 1
        if (seed + 1) % 500 == 0:
            print(f"oracle: {seed + 1}/{instances} {json.dumps(counters['solve'])}", file=sys.stderr)
    rows = []
    for solver, c in counters.items():
        ts = times[solver]
        rows.append(
            {
                "scenario": f"oracle-{instances}",
                "solver": solver,
                "nodes": max_nodes,
                "tasks": max_tasks,
                "runs": instances,
                "p50_ms": round(statistics.median(ts), 3),
                "p95_ms": round(_pct(ts, 0.95), 3),
                "status": "agree" if c["agree"] == instances and not c["preferred_missed"] else "disagree",
                "oracle_feasible": feasible_count,
                "oracle_infeasible": instances - feasible_count,
                "oracle_all_preferred": preferred_count,
                **c,
            }
        )
    return rows


def planted_run(instances: int) -> list[dict]:
    counters = {s: {"placed": 0, "undecided": 0, "wrong_fail": 0, "invalid": 0} for s in SOLVERS if s != "pod-affinity"}
    times: dict[str, list[float]] = {s: [] for s in counters}
    max_nodes = max_tasks = 0
    for seed in range(instances):
        snapshot, group = planted_instance(random.Random(seed))
        max_nodes, max_tasks = max(max_nodes, len(snapshot.nodes)), max(max_tasks, len(group.tasks))
        for solver in counters:
            start = time.perf_counter()
            result = SOLVERS[solver](snapshot, group)
            times[solver].append((time.perf_counter() - start) * 1000)
            c = counters[solver]
            if isinstance(result, Placement):
                c["invalid" if check(snapshot, group, result) else "placed"] += 1
            else:
                c["undecided" if result.status == "undecided" else "wrong_fail"] += 1
        if (seed + 1) % 200 == 0:
            print(f"planted: {seed + 1}/{instances} {json.dumps(counters['solve'])}", file=sys.stderr)
    return [
        {
            "scenario": f"planted-{instances}",
            "solver": solver,
            "nodes": max_nodes,
            "tasks": max_tasks,
            "runs": instances,
            "p50_ms": round(statistics.median(times[solver]), 3),
            "p95_ms": round(_pct(times[solver], 0.95), 3),
            "max_ms": round(max(times[solver]), 1),
            "status": "all placed" if c["placed"] == instances else "not all placed",
            **c,
        }
        for solver, c in counters.items()
    ]


def _all_preferred_met(snapshot: ClusterSnapshot, group: GangRequest, placement: Placement) -> bool:
    if placement.report:
        return all(r.met for r in placement.report)
    labels = {n.name: n.labels for n in snapshot.nodes}
    level = {k: i for i, k in enumerate(snapshot.keys)}
    for node in group.tree.nodes():
        lvl = level.get(node.key)
        if lvl is None:
            return False
        paths = {labels[placement.tasks[t]][: lvl + 1] for t in node.all_tasks()}
        if len(paths) != 1 or None in next(iter(paths)):
            return False
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.placement", description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", required=True, help=f"one of {sorted(SCENARIOS)}, oracle-N or planted-N")
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--slow-runs", type=int, default=5, help="runs for pod-affinity (per-pod, slow)")
    parser.add_argument("--instances", type=int, default=None)
    parser.add_argument("--json", action="store_true", help="one JSON object per line (the default output)")
    args = parser.parse_args(argv)
    if args.scenario.startswith("planted"):
        suffix = args.scenario.partition("-")[2]
        rows = planted_run(args.instances or (int(suffix) if suffix.isdigit() else 1000))
    elif args.scenario.startswith("oracle"):
        suffix = args.scenario.partition("-")[2]
        n = args.instances or (int(suffix) if suffix.isdigit() else 5000)
        rows = oracle_run(n)
    elif args.scenario in SCENARIOS:
        rows = speed(args.scenario, args.runs, min(args.slow_runs, args.runs))
    else:
        parser.error(f"unknown scenario {args.scenario!r}")
    for row in rows:
        print(json.dumps(row))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
