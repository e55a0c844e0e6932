"""The starvation guard's hold on the single-queue trace: ``python -m bench.simulate --hold
none,idle,expected-end [--starvation S] [--jobs N] [--seeds S,S] [--load L]`` (or ``python -m
bench.simulate_hold``).

The trace and pool of :mod:`bench.simulate` (the 1,008-tray NVL72 pool, 600 gangs, seeds 7-10) and
its queue discipline (FIFO; at each arrival or completion the first 64 queued jobs are offered to
``solve`` in order; one that fits starts), plus the starvation guard of docs/design.md §6: the first
job that does not fit after queueing ``--starvation`` time units (default 10, the service's 600 s if
the unit is a minute; the same as ``bench.simulate --teams``) has machines kept for it, and the jobs
behind it (one priority: all of them) are solved with those machines taken out. Holds:

- ``none``: no guard (``bench.simulate``'s ``solve`` row: the same decisions);
- ``idle``: today's guard: the machines of its placement on the idle pool, whatever runs there;
- ``expected-end``: reservations by expected end (:mod:`scheduler.hold`): the placement where
  it can start soonest as the running jobs end by their timeouts, and EASY backfill: a job behind it
  may use the kept machines when its own timeout ends by the time they are free.

Timeouts are given the way users give one: an overestimate of the run, ``duration x uniform(1, 3)``
(seeded from the trace's seed, so each seed's jobs get the same timeouts under every hold;
``--timeout-factor LO,HI`` changes the range); a job runs its duration, never past its timeout.

Reported per hold: GPU utilisation over [0, last arrival], mean wait of all jobs, mean and p95 wait
of the big gangs (16 tasks or more; a task is one tray here), jobs never started (counted until the
end), how many times the guard held and the solver's calls. Wait is in the trace's time unit (mean
job 60). With ``idle`` and ``expected-end`` both run, a summary line per load gives the big gangs'
p95 wait change and the utilisation difference, per seed and on average.

``--solvers solve,ceiling`` runs each hold with ``bench.simulate``'s topology-free ``ceiling`` too: the
same queue, starvation guard and holds, the ceiling placing every job and finding every hold (the
hold's binary search needs only a complete solver, which the ceiling is for the trace's gangs: their
tasks are alike, so they fit exactly when enough machines have room for one). A summary line per
load then gives the fragmentation loss under each hold (ceiling less ``solve``, in points).

``--consolidate N`` (``solve`` only; the ceiling moves nothing): a starving big gang that does not
fit may move up to N running jobs, each placed again at once (:mod:`bench.kit.consolidate`,
KAI Scheduler's consolidation rule; limits in :class:`Moves`). A moved job restarts from the
beginning unless ``--move-resume``; rows then give ``goodput`` (busy GPU time less the work moves
threw away) beside the utilisation, and the ceiling line the loss on both.
"""

from __future__ import annotations

import argparse
import heapq
import json
import random
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from bench.kit.consolidate import consolidate, holdings_of
from bench.kit.pools import nvl72_pool
from bench.kit.traces import SOLVERS, WINDOW, Job, occupy, trace
from scheduler.hold import Holder, may_backfill, soonest_hold
from scheduler.placement import ClusterSnapshot, GangRequest, Placement, Policy, Unplaceable
from scheduler.placement.signature import gang_signature
from scheduler.preemption import Candidate, cordoned

HOLDS = ("none", "idle", "expected-end")
BIG = 16  # tasks (trays): the big gangs the hold is for


def timeouts(jobs: list[Job], seed: int, factor: tuple[float, float] = (1.0, 3.0)) -> list[float]:
    """Each job's exec timeout: its duration times uniform(``factor``), by default (1, 3), seeded by
    the trace's seed."""
    rng = random.Random(seed * 104_729 + 32)
    return [job.duration * rng.uniform(*factor) for job in jobs]


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[int(0.95 * (len(ordered) - 1))] if ordered else 0.0


@dataclass(frozen=True, slots=True)
class Moves:
    """Consolidation's limits (``--consolidate``): a starving job that does not fit may move at most
    ``max_moves`` running jobs that have run at most ``max_age`` (and were never moved, unless
    ``again``), each placed again at once; ``big_only``: only for big gangs; at most ``per_event``
    tries per event; with ``worth``, the work thrown away at most ``worth`` times the GPU-time the
    hold by expected end would keep idle (the GPUs free now on the machines it would hold, until the
    time it says they are all free); ``resume``: a moved job goes on from where it was (checkpoint and
    restore, free here: an upper bound), instead of from the beginning."""

    max_moves: int = 4
    max_age: float = float("inf")
    big_only: bool = True
    per_event: int = 1
    again: bool = False
    worth: float | None = None  # work lost at most this times the GPU-time the gang's hold would keep idle
    resume: bool = False  # a moved job resumes where it was (a checkpoint): no work lost, its end unchanged


def simulate(hold: str, jobs: list[Job], base: ClusterSnapshot, limits: list[float],
             starvation: float = 10.0, max_holds: int = 1, solver: str = "solve",
             moves: Moves | None = None) -> dict:
    fn: Callable[[ClusterSnapshot, GangRequest], Placement | Unplaceable] = SOLVERS[solver]

    def solve(snapshot: ClusterSnapshot, group: GangRequest, _policy: Policy | None = None) -> Placement | Unplaceable:
        return fn(snapshot, group)

    nodes = list(base.nodes)
    index = {n.name: i for i, n in enumerate(nodes)}
    total_gpus = sum(n.free.gpu for n in nodes)
    signatures = [gang_signature(job.group) for job in jobs]
    events: list[tuple[float, int, int]] = [(job.arrival, 1, j) for j, job in enumerate(jobs)]
    heapq.heapify(events)
    queue: list[int] = []
    started: dict[int, float] = {}  # first start (the wait)
    run_start: dict[int, float] = {}  # the current run's start (a moved job restarts)
    ends: dict[int, float] = {}  # the current run's end event
    moved: set[int] = set()
    lost = 0.0  # GPU-time of moved jobs' runs before the horizon, thrown away
    moved_jobs = moved_gpus = consolidations = tries = 0
    running: dict[int, Placement] = {}
    idle_hold: dict[str, frozenset[str]] = {}  # signature -> machines of its idle-pool placement
    used_gpus = 0
    busy = 0.0
    last = 0.0
    horizon = max(job.arrival for job in jobs)
    calls = holds = backfilled = 0
    if hold != "expected-end":
        max_holds = 1  # today's guard (and none) keeps machines for one gang at a time

    def apply(job: Job, placement: Placement, sign: int) -> None:
        occupy(nodes, index, job.group, placement, sign)

    def holder(j: int, placement: Placement) -> Holder:
        return Holder(str(j), holdings_of(jobs[j].group, placement), run_start[j] + limits[j], True)

    def kept_for(q: int, view: ClusterSnapshot, first: bool) -> tuple[frozenset[str], float | None] | None:
        """The machines kept for the starving job ``q`` on ``view`` (the pool less the machines kept
        for the starving jobs ahead of it) and, by expected end, when they are free. Today's guard
        (and the first hold when no placement frees in time) keeps its idle-pool placement."""
        group = jobs[q].group
        if hold == "expected-end":
            found = soonest_hold(view, group, [holder(j, p) for j, p in running.items()], solver=solve)
            if found is not None:
                return found.machines, found.free_by
            if not first:
                return None
        machines = idle_hold.get(signatures[q])
        if machines is None:
            target = solve(base, group)
            machines = idle_hold[signatures[q]] = target.nodes if isinstance(target, Placement) else frozenset(index)
        return machines, None

    while events:
        now, kind, j = heapq.heappop(events)
        end = min(now, horizon)
        if end > last:
            busy += used_gpus * (end - last)
            last = end
        if kind == 0:
            if ends.get(j) != now:
                continue  # the end of a run a move cut short
            apply(jobs[j], running.pop(j), -1)
            used_gpus -= jobs[j].gpus
        else:
            queue.append(j)
        snapshot = ClusterSnapshot(base.pool, base.keys, tuple(nodes))
        kept: list[tuple[frozenset[str], float | None]] = []  # the holds made in this scan, in queue order
        views: dict[frozenset[str], ClusterSnapshot] = {}
        # Within one event capacity only shrinks and holds only add machines: a shape found
        # unschedulable with some machines blocked stays so with those (and with none blocked: everywhere).
        failed: set[tuple[str, frozenset[str]]] = set()
        waiting: list[int] = []
        tried = 0
        for pos, q in enumerate(queue):
            if pos >= WINDOW:
                waiting.append(q)
                continue
            blocked = frozenset().union(*(m for m, t in kept if not may_backfill(now, limits[q], t)))
            view = views.get(blocked)
            if view is None:
                view = views[blocked] = cordoned(snapshot, blocked) if blocked else snapshot
            sig = signatures[q]
            if (sig, blocked) in failed or (sig, frozenset()) in failed:
                result = None
            else:
                calls += 1
                outcome = solve(view, jobs[q].group)
                result = outcome if isinstance(outcome, Placement) else None
                if result is None and outcome.status == "unschedulable":
                    failed.add((sig, blocked))
            if (result is None and moves is not None and tried < moves.per_event and now - jobs[q].arrival > starvation
                    and (not moves.big_only or len(jobs[q].group.tasks) >= BIG)):
                tried += 1
                tries += 1
                movable = [Candidate(str(r), holdings_of(jobs[r].group, p), False, run_start[r])
                           for r, p in running.items()
                           if now - run_start[r] <= moves.max_age and (moves.again or r not in moved)]
                budget = float("inf")
                if moves.worth is not None:
                    found = soonest_hold(view, jobs[q].group, [holder(r, p) for r, p in running.items()], solver=solve)
                    if found is not None:  # the GPUs idle now on the machines it would hold, until they are free
                        idle_now = sum(n.free.gpu for n in view.nodes if n.name in found.machines)
                        budget = moves.worth * idle_now * max(0.0, found.free_by - now)
                done = consolidate(view, jobs[q].group, movable, {str(r): jobs[r].group for r in running},
                                   now=now, max_moves=moves.max_moves, max_work_lost=budget)
                if done is not None:
                    consolidations += 1
                    for key, again in done.moves:
                        r = int(key)
                        apply(jobs[r], running[r], -1)
                        apply(jobs[r], again, 1)
                        running[r] = again
                        moved.add(r)
                        moved_jobs += 1
                        moved_gpus += jobs[r].gpus
                        if moves.resume:
                            continue
                        lost += jobs[r].gpus * (min(now, horizon) - min(run_start[r], horizon))
                        run_start[r] = now
                        ends[r] = now + jobs[r].duration
                        heapq.heappush(events, (ends[r], 0, r))
                    result = done.placement
                    failed.clear()
            if result is not None:
                apply(jobs[q], result, 1)
                snapshot = ClusterSnapshot(base.pool, base.keys, tuple(nodes))
                views.clear()
                used_gpus += jobs[q].gpus
                started[q] = run_start[q] = now
                running[q] = result
                backfilled += any(result.nodes & m for m, _t in kept)
                ends[q] = now + jobs[q].duration
                heapq.heappush(events, (ends[q], 0, q))
                continue
            waiting.append(q)
            if hold != "none" and len(kept) < max_holds and now - jobs[q].arrival > starvation:
                taken = frozenset().union(*(m for m, _t in kept))
                made = kept_for(q, cordoned(snapshot, taken) if taken else snapshot, not kept)
                if made is not None:
                    kept.append(made)
                    holds += 1
        queue = waiting
    end_time = last if not queue else horizon
    waits = [started[j] - job.arrival if j in started else max(0.0, end_time - job.arrival)
             for j, job in enumerate(jobs)]
    big = [w for w, job in zip(waits, jobs, strict=True) if len(job.group.tasks) >= BIG]
    return {
        "scenario": "trace-1k-hold", "solver": solver, "hold": hold, "starvation": starvation, "jobs": len(jobs),
        "big_gangs": len(big), "started": len(started), "never_started": len(jobs) - len(started),
        "gpu_utilisation": round(busy / (total_gpus * horizon), 4),
        "goodput": round((busy - lost) / (total_gpus * horizon), 4),
        "mean_wait": round(statistics.fmean(waits), 2),
        "big_mean_wait": round(statistics.fmean(big), 2) if big else None,
        "big_p95_wait": round(_p95(big), 2),
        "holds": holds, "backfilled_on_kept": backfilled, "solver_calls": calls, "total_gpus": total_gpus,
        **({"consolidations": consolidations, "tries": tries, "moved_jobs": moved_jobs, "moved_gpus": moved_gpus,
            "lost_points": round(100 * lost / (total_gpus * horizon), 2)} if moves is not None else {}),
    }


def summary(rows: list[dict]) -> dict:
    """Per seed and on average: the big gangs' p95 wait with ``expected-end`` against ``idle`` (the
    change in per cent, negative is lower) and the utilisation difference in points."""
    by = {(r["seed"], r["hold"]): r for r in rows if r["solver"] == "solve"}
    seeds = sorted(s for s in {r["seed"] for r in rows} if (s, "idle") in by and (s, "expected-end") in by)
    out: dict = {"summary": "hold", "load": rows[0]["load"], "seeds": seeds}
    if not seeds:
        return out
    idle = [by[s, "idle"] for s in seeds]
    ours = [by[s, "expected-end"] for s in seeds]
    for name, mine in (("idle", idle), ("expected-end", ours)):
        out[name] = {key: round(statistics.fmean(r[key] for r in mine), 4 if key == "gpu_utilisation" else 2)
                     for key in ("gpu_utilisation", "mean_wait", "big_p95_wait", "big_mean_wait")}
    out["big_p95_change_pct"] = [round(100 * (b["big_p95_wait"] / a["big_p95_wait"] - 1), 1) if a["big_p95_wait"]
                                 else None for a, b in zip(idle, ours, strict=True)]
    mean_idle, mean_ours = out["idle"]["big_p95_wait"], out["expected-end"]["big_p95_wait"]
    out["big_p95_change_pct_of_means"] = round(100 * (mean_ours / mean_idle - 1), 1) if mean_idle else None
    out["utilisation_points"] = [round(100 * (b["gpu_utilisation"] - a["gpu_utilisation"]), 1)
                                 for a, b in zip(idle, ours, strict=True)]
    out["utilisation_points_mean"] = round(100 * (out["expected-end"]["gpu_utilisation"]
                                                  - out["idle"]["gpu_utilisation"]), 1)
    return out


def against_ceiling(rows: list[dict]) -> dict:
    """Per hold, the fragmentation loss under that discipline: the ceiling's utilisation (the topology
    constraints dropped, with the same holds) less ``solve``'s, in points, per seed and on average;
    when ``solve`` moved jobs (``--consolidate``), also less its goodput (busy time less the work the
    moves threw away: the ceiling moves nothing)."""
    by = {(r["seed"], r["hold"], r["solver"]): r for r in rows}
    out: dict = {"summary": "ceiling", "load": rows[0]["load"], "max_holds": rows[0]["max_holds"]}
    for hold in dict.fromkeys(r["hold"] for r in rows):
        seeds = sorted(s for s in {r["seed"] for r in rows} if (s, hold, "solve") in by and (s, hold, "ceiling") in by)
        if not seeds:
            continue
        loss = [100 * (by[s, hold, "ceiling"]["gpu_utilisation"] - by[s, hold, "solve"]["gpu_utilisation"])
                for s in seeds]
        out[hold] = {
            "seeds": seeds,
            "solve": round(statistics.fmean(by[s, hold, "solve"]["gpu_utilisation"] for s in seeds), 4),
            "ceiling": round(statistics.fmean(by[s, hold, "ceiling"]["gpu_utilisation"] for s in seeds), 4),
            "loss_points": [round(x, 1) for x in loss],
            "loss_points_mean": round(statistics.fmean(loss), 1),
        }
        if any(by[s, hold, "solve"].get("moved_jobs") for s in seeds):  # moves: the loss on goodput too
            good = [100 * (by[s, hold, "ceiling"]["gpu_utilisation"] - by[s, hold, "solve"]["goodput"]) for s in seeds]
            out[hold]["solve_goodput"] = round(statistics.fmean(by[s, hold, "solve"]["goodput"] for s in seeds), 4)
            out[hold]["goodput_loss_points"] = [round(x, 1) for x in good]
            out[hold]["goodput_loss_points_mean"] = round(statistics.fmean(good), 1)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.simulate --hold", description=__doc__.splitlines()[0])
    parser.add_argument("--hold", default=",".join(HOLDS), help="comma-separated, of " + ", ".join(HOLDS))
    parser.add_argument("--jobs", type=int, default=600)
    parser.add_argument("--max-holds", type=int, default=1,
                        help="expected-end: hold for up to this many starving jobs at once, each on machines the "
                        "ones ahead of it do not hold (1: EASY backfill, the default; more: conservative backfill)")
    parser.add_argument("--seeds", default="7,8,9,10")
    parser.add_argument("--solvers", default="solve",
                        help="comma-separated, of solve, ceiling (the topology constraints dropped, under the same "
                        "holds: with both, a summary line gives the fragmentation loss per hold)")
    parser.add_argument("--load", type=float, default=1.0)
    parser.add_argument("--starvation", type=float, default=10.0,
                        help="the starvation guard's wait in the trace's time unit (the service's 600 s)")
    parser.add_argument("--timeout-factor", default="1,3",
                        help="LO,HI: each job's exec timeout is its duration times uniform(LO, HI) (default 1,3; "
                        "1,1: timeouts equal to the runs, how much tighter timeouts would help)")
    parser.add_argument("--consolidate", type=int, default=0, metavar="N",
                        help="solve only (the ceiling moves nothing): a starving big gang that does not fit may "
                        "move up to N running jobs, each placed again at once (bench.kit.consolidate); "
                        "0 (default): no moves")
    parser.add_argument("--move-max-age", type=float, default=float("inf"),
                        help="with --consolidate: only jobs that have run at most this long move")
    parser.add_argument("--move-any-size", action="store_true",
                        help="with --consolidate: any starving job may move others, not only big gangs")
    parser.add_argument("--move-again", action="store_true",
                        help="with --consolidate: a job moved once may move again")
    parser.add_argument("--move-worth", type=float, default=None,
                        help="with --consolidate: the work the moves throw away at most this times the GPU-time the "
                        "gang's hold by expected end would keep idle (GPUs free now on its machines until all are)")
    parser.add_argument("--move-resume", action="store_true",
                        help="with --consolidate: a moved job resumes where it was (checkpoint and restore, free "
                        "here: an upper bound), instead of restarting from the beginning")
    parser.add_argument("--move-tries", type=int, default=1,
                        help="with --consolidate: starving jobs that try to move others per event")
    args = parser.parse_args(argv)
    limits_moves = (Moves(args.consolidate, args.move_max_age, not args.move_any_size, args.move_tries,
                          args.move_again, args.move_worth, args.move_resume) if args.consolidate else None)
    lo, hi = (float(x) for x in args.timeout_factor.split(","))
    solvers = args.solvers.split(",")
    for solver in solvers:
        if solver not in ("solve", "ceiling"):
            parser.error(f"--solvers: {solver!r} is none of solve, ceiling")
    rows = []
    for seed in (int(s) for s in args.seeds.split(",")):
        base = nvl72_pool(2, 4, 7, occupancy=0.0, seed=seed)
        total = sum(n.free.gpu for n in base.nodes)
        jobs = trace(args.jobs, seed, total, args.load)
        limits = timeouts(jobs, seed, (lo, hi))
        for solver in solvers:
            for hold in args.hold.split(","):
                if hold not in HOLDS:
                    parser.error(f"--hold: {hold!r} is none of {', '.join(HOLDS)}")
                print(f"simulate --hold: seed {seed}, {solver}, {hold} ...", file=sys.stderr)
                began = time.perf_counter()
                mine = limits_moves if solver == "solve" else None
                row = simulate(hold, jobs, base, limits, args.starvation, args.max_holds, solver, mine)
                row.update({"load": args.load, "seed": seed, "timeout_factor": [lo, hi],
                            "max_holds": args.max_holds,
                            "moves": None if mine is None else {"max_moves": mine.max_moves, "max_age": mine.max_age,
                                                                "big_only": mine.big_only, "per_event": mine.per_event,
                                                                "again": mine.again, "worth": mine.worth,
                                                                "resume": mine.resume},
                            "seconds": round(time.perf_counter() - began, 1)})
                rows.append(row)
                print(json.dumps(row))
                sys.stdout.flush()
    if "solve" in solvers:
        print(json.dumps(summary(rows)))
    if {"solve", "ceiling"} <= set(solvers):
        print(json.dumps(against_ceiling(rows)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
