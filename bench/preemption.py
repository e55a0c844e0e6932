"""Preemption benchmark: ``python -m bench.preemption [--small N] [--pools P] [--json]``.

Compares :func:`scheduler.preemption.victims_choose` (at its default budget and at ``--budget``
solves) with the greedy baseline of :func:`bench.kit.preemption_instances.greedy` (the largest LOW gang
first until the preemptor fits, as KAI/Kueue-style victim choice does) on two families:
- ``small``: of ``--small`` random instances (:func:`bench.kit.preemption_instances.small_instance`, seeds
  0..N-1), those whose preemptor does not fit without evictions, each also solved by the exact oracle;
- ``nvl72-20k``: ``--pools`` generated 20,736-tray pools filled to 97% by seeded gangs (about 470 LOW
  candidates each, 40% borrowing), each with the HIGH gangs of ``LARGE_PREEMPTORS`` that do not fit.

One JSON line per (family, policy): instances where evicting everything lets the preemptor fit
(``feasible``), ``found_rate``, ``optimal_rate`` (small: same set as the oracle), mean GPUs evicted
(``gpu_mean``), mean GPUs from non-borrowing gangs (``own_gpu_mean``), mean gangs, ``unneeded_rate``
(instances whose set has a victim the preemptor fits without), ``solves_mean`` and time ``p50_ms`` /
``max_ms``. Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from bench.kit.preemption_instances import (
    LARGE_PREEMPTORS,
    cost,
    crowded_pool,
    filled_pool,
    greedy,
    oracle,
    released,
    small_instance,
)
from scheduler.placement import DomainIndex, Placement, solve
from scheduler.placement.types import ClusterSnapshot, GangRequest
from scheduler.preemption import DEFAULT_MAX_SOLVES, Candidate, victims_choose, victims_choose_near

Instance = tuple[str, ClusterSnapshot, GangRequest, list[Candidate]]
Chooser = Callable[[ClusterSnapshot, GangRequest, list[Candidate]], tuple[list[Candidate], int] | None]


def _search(budget: int) -> Chooser:
    def choose(snapshot: ClusterSnapshot, preemptor: GangRequest, cands: list[Candidate]) -> Any:
        choice = victims_choose(snapshot, preemptor, cands, max_solves=budget)
        if choice is None:
            return None
        keys = set(choice.victims)
        return [c for c in cands if c.key in keys], choice.explored

    return choose


def _greedy(snapshot: ClusterSnapshot, preemptor: GangRequest, cands: list[Candidate]) -> Any:
    choice = greedy(snapshot, preemptor, cands)
    return None if choice is None else (list(choice.victims), choice.explored)


def _unneeded(snapshot: ClusterSnapshot, preemptor: GangRequest, victims: Sequence[Candidate]) -> bool:
    """Some victim could be spared: the preemptor fits with the others evicted."""
    for v in victims:
        rest = [o for o in victims if o.key != v.key]
        if isinstance(solve(released(snapshot, rest), preemptor), Placement):
            return True
    return False


def run(family: str, instances: list[Instance], policies: dict[str, Chooser], exact: bool) -> list[dict]:
    rows: dict[str, dict[str, Any]] = {
        p: {"found": 0, "optimal": 0, "gpu": [], "own": [], "gangs": [], "unneeded": 0, "solves": [], "ms": []}
        for p in policies
    }
    feasible = 0
    for n, (label, snapshot, preemptor, cands) in enumerate(instances):
        best = oracle(snapshot, preemptor, cands) if exact else None
        results = {}
        for policy, choose in policies.items():
            start = time.perf_counter()
            results[policy] = choose(snapshot, preemptor, cands)
            rows[policy]["ms"].append((time.perf_counter() - start) * 1000)
        if results["search"] is None:
            continue
        feasible += 1
        for policy, result in results.items():
            row = rows[policy]
            if result is None:
                continue
            victims, solves = result
            own, _work, gpu, gangs, _starts, keys = cost(victims)
            row["found"] += 1
            row["optimal"] += int(keys == best)
            row["gpu"].append(gpu)
            row["own"].append(own)
            row["gangs"].append(gangs)
            row["solves"].append(solves)
            row["unneeded"] += int(_unneeded(snapshot, preemptor, victims))
        if family != "small" or (n + 1) % 500 == 0:
            print(f"{family} {n + 1}/{len(instances)} {label}", file=sys.stderr)
    out = []
    for policy, row in rows.items():
        found = row["found"] or 1
        out.append(
            {
                "family": family,
                "policy": policy,
                "instances": len(instances),
                "feasible": feasible,
                "found_rate": round(row["found"] / (feasible or 1), 4),
                "optimal_rate": round(row["optimal"] / found, 4) if exact else None,
                "gpu_mean": round(statistics.fmean(row["gpu"] or [0]), 2),
                "own_gpu_mean": round(statistics.fmean(row["own"] or [0]), 2),
                "gangs_mean": round(statistics.fmean(row["gangs"] or [0]), 2),
                "unneeded_rate": round(row["unneeded"] / found, 4),
                "solves_mean": round(statistics.fmean(row["solves"] or [0]), 1),
                "p50_ms": round(statistics.median(row["ms"]), 1),
                "max_ms": round(max(row["ms"]), 1),
            }
        )
    return out


def large_instances(pools: int) -> list[Instance]:
    found = []
    for seed in range(1, pools + 1):
        snapshot, cands = filled_pool(seed)
        for name, make in LARGE_PREEMPTORS.items():
            preemptor = make()
            if not isinstance(solve(snapshot, preemptor), Placement):
                found.append((f"pool {seed} {name} ({len(cands)} candidates)", snapshot, preemptor, cands))
    return found


NOW = 1_000_000.0  # the crowded pools' clock (epoch seconds)


def crowded(pools: int, min_runtime: float, max_solves: int, max_seconds: float) -> list[dict]:
    """``crowded-5k``: per pool seed, 5,000 running LOW gangs (:func:`crowded_pool`) and each HIGH gang
    of ``LARGE_PREEMPTORS`` that does not fit. ``cycle`` is what the placement cycle runs for it
    (workflows.scheduling.cycle.preemption.candidates): the gangs younger than ``min_runtime`` are no candidates; the
    view without LOW work (a DomainIndex with every candidate released) is built and solved, the
    real pool solved, and the victims sought near the first placement
    (:func:`victims_choose_near`, ``max_solves`` shared by the regions and as many for the whole
    pool, ``max_seconds`` in all, the work lost weighed); ``today`` is the whole pool's bounded search
    (``max_solves``, GPUs alone) on the same candidates. One JSON line per instance and policy, then
    one summary line per policy; times in wall clock (``ms``) and in this process's CPU (``cpu_ms``:
    what a busy machine does not inflate)."""
    rows: list[dict] = []
    for seed in range(1, pools + 1):
        snapshot, everyone = crowded_pool(seed, now=NOW)
        cands = [c for c in everyone if NOW - c.started >= min_runtime]
        for name, make in LARGE_PREEMPTORS.items():
            preemptor = make()
            label = f"pool {seed} {name} ({len(cands)} candidates, {len(everyone) - len(cands)} protected)"
            began, cpu_began = time.perf_counter(), time.process_time()
            absent = DomainIndex(released(snapshot, cands))
            built = time.perf_counter()
            there = solve(absent, preemptor)
            placed = solve(snapshot, preemptor)
            solved = time.perf_counter()
            if isinstance(placed, Placement):
                print(f"crowded {label}: fits without preemption", file=sys.stderr)
                continue
            near = there.nodes if isinstance(there, Placement) else None
            choice, region = victims_choose_near(snapshot, preemptor, cands, near, max_solves=max_solves,
                                                 max_seconds=max_seconds, now=NOW)
            ended, cpu_ended = time.perf_counter(), time.process_time()
            start, cpu_start = time.perf_counter(), time.process_time()
            old = victims_choose(snapshot, preemptor, cands, max_solves=max_solves)
            today = ((time.perf_counter() - start) * 1000, (time.process_time() - cpu_start) * 1000)
            by_key = {c.key: c for c in cands}
            mine = ((ended - began) * 1000, (cpu_ended - cpu_began) * 1000)
            for policy, found, (ms, cpu_ms) in (("cycle", choice, mine),
                                                ("today", old, today)):
                victims = [by_key[k] for k in found.victims] if found is not None else []
                own, work, gpu, gangs, _starts, _keys = cost(victims, NOW)
                row = {"family": "crowded-5k", "policy": policy, "instance": label, "found": found is not None,
                       "gpu": gpu, "own_gpu": own, "gangs": gangs, "work_lost": round(work),
                       "solves": found.explored if found is not None else None, "ms": round(ms, 1),
                       "cpu_ms": round(cpu_ms, 1)}
                if policy == "cycle":
                    row.update({"index_ms": round((built - began) * 1000, 1),
                                "solves_ms": round((solved - built) * 1000, 1),
                                "search_ms": round((ended - solved) * 1000, 1),
                                "region": "pool" if region is None else len(region)})
                rows.append(row)
                print(json.dumps(row))
                sys.stdout.flush()
    out = []
    for policy in ("cycle", "today"):
        mine = [r for r in rows if r["policy"] == policy]
        if mine:
            out.append({"family": "crowded-5k", "policy": policy, "instances": len(mine),
                        "found_rate": round(sum(r["found"] for r in mine) / len(mine), 4),
                        "gpu_mean": round(statistics.fmean(r["gpu"] for r in mine), 2),
                        "own_gpu_mean": round(statistics.fmean(r["own_gpu"] for r in mine), 2),
                        "work_lost_mean": round(statistics.fmean(r["work_lost"] for r in mine)),
                        "p50_ms": round(statistics.median(r["ms"] for r in mine), 1),
                        "max_ms": round(max(r["ms"] for r in mine), 1),
                        "cpu_p50_ms": round(statistics.median(r["cpu_ms"] for r in mine), 1),
                        "cpu_max_ms": round(max(r["cpu_ms"] for r in mine), 1)})
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.preemption", description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=2000, help="small random instances (with the oracle)")
    parser.add_argument("--pools", type=int, default=3, help="filled 20,736-tray pools")
    parser.add_argument("--budget", type=int, default=64, help="the smaller solve budget also reported")
    parser.add_argument("--crowded", type=int, default=0,
                        help="pools with 5,000 running LOW gangs: the cycle's search against today's")
    parser.add_argument("--min-runtime", type=float, default=600.0,
                        help="--crowded: seconds a LOW gang runs before it is a candidate")
    parser.add_argument("--max-seconds", type=float, default=5.0,
                        help="--crowded: the cycle's OSMO_PREEMPTION_MAX_SECONDS")
    parser.add_argument("--json", action="store_true", help="one JSON object per line (the default output)")
    args = parser.parse_args(argv)
    if args.crowded:
        for row in crowded(args.crowded, args.min_runtime, args.budget, args.max_seconds):
            print(json.dumps(row))
        if not args.small and not args.pools:
            return 0
    policies: dict[str, Chooser] = {
        "search": _search(DEFAULT_MAX_SOLVES),
        f"search-{args.budget}": _search(args.budget),
        "greedy": _greedy,
    }
    small = []
    for seed in range(args.small):
        snapshot, preemptor, cands = small_instance(random.Random(seed))
        if not isinstance(solve(snapshot, preemptor), Placement):  # preemption is for gangs that do not fit
            small.append((f"seed {seed}", snapshot, preemptor, cands))
    rows = run("small", small, policies, exact=True)
    if args.pools:
        rows += run("nvl72-20k", large_instances(args.pools), policies, exact=False)
    for row in rows:
        print(json.dumps(row))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
