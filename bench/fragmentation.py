"""Where the fragmentation loss of ``bench.simulate`` goes: ``python -m bench.fragmentation [--jobs N]
[--load L] [--seeds S,S] [--solver solve]``.

The trace, pool and queue discipline of :mod:`bench.simulate` (FIFO, backfill over the first 64, no
reservations); the event loop is the same as :func:`bench.kit.traces.simulate`, with counters added.
Per seed, one JSON line:

- ``idle_points``: the idle GPU-time over [0, last arrival] in utilisation points, by what the queue
  looked like: ``empty``; ``gpu_count`` (every job in the window needs more GPUs than are free:
  the ceiling would wait too); ``topology:<kind>`` (some job of the window fits by its GPU count but
  the solver cannot place it, named by the first such job's kind: ``plain``, ``one`` model, ``two``
  models, ``large`` = 2-4 models of 16 trays). A blocked large gang is split further by whether
  moving the running gangs would make room (``repackable``: first-fit decreasing of every running
  model and the gang's own onto the racks, zone constraints dropped) or not.
- ``blocked``: at the events where a large gang is blocked, the mean number of racks with at least
  16 whole free trays and the mean free trays stranded in racks with 1-3 free (room only plain gangs
  and 2-tray models can use).
- ``mean_wait_by_kind``.
- ``rack_ceiling``: the utilisation of a policy that keeps every model on one rack but may move the
  running gangs at every admission (the same first-fit decreasing test, zone constraints dropped):
  about what a packing without migration could reach at best; with the topology-free ``ceiling`` of
  :mod:`bench.simulate` it splits the loss into the part of the constraints and the part of history.
"""

from __future__ import annotations

import argparse
import heapq
import json
import statistics
import sys
from collections import defaultdict

from bench.kit.pools import nvl72_pool
from bench.kit.traces import SOLVERS, WINDOW, Job, occupy, trace
from scheduler.placement import Placement
from scheduler.placement.types import ClusterSnapshot

TRAY_GPUS = 4


def kind(job: Job) -> str:
    top = job.group.tree.children
    if not top:
        return "plain"
    if top[0].key == "gpu-clique":
        return "one"
    return "large" if all(len(c.tasks) == 16 for c in top[0].children) else "two"


def models(job: Job) -> tuple[list[int], int]:
    """(trays per model, GPUs of plain tasks) of a job of the trace."""
    top = job.group.tree.children
    if not top:
        return [], job.gpus
    if top[0].key == "gpu-clique":
        return [len(top[0].tasks)], 0
    return [len(c.tasks) for c in top[0].children], 0


def repacks(sizes: list[int], plain_gpus: int, racks: int, trays: int) -> bool:
    """First-fit decreasing (tightest rack) of every model onto ``racks`` empty racks of ``trays``, plain
    GPUs into what is left. A heuristic: True is a packing, False is not a proof."""
    room = [trays] * racks
    for size in sorted(sizes, reverse=True):
        best = -1
        for i in range(racks):
            if room[i] >= size and (best < 0 or room[i] < room[best]):
                best = i
        if best < 0:
            return False
        room[best] -= size
    return sum(room) * TRAY_GPUS >= plain_gpus


def run(solver: str, jobs: list[Job], base: ClusterSnapshot) -> dict:
    fn = SOLVERS[solver]
    nodes = list(base.nodes)
    index = {n.name: i for i, n in enumerate(nodes)}
    rack_of = [str(n.labels[-1]) for n in nodes]
    racks = len(set(rack_of))
    trays = len(nodes) // racks
    total = sum(n.free.gpu for n in nodes)
    horizon = max(job.arrival for job in jobs)
    events = [(job.arrival, 1, j) for j, job in enumerate(jobs)]
    heapq.heapify(events)
    queue: list[int] = []
    started: dict[int, float] = {}
    running: dict[int, Placement] = {}
    used = 0
    last = 0.0
    state = "empty"
    idle: dict[str, float] = defaultdict(float)
    whole_racks: list[int] = []
    stranded: list[int] = []

    def apply(job: Job, placement: Placement, sign: int) -> None:
        occupy(nodes, index, job.group, placement, sign)

    while events:
        now, ev, j = heapq.heappop(events)
        end = min(now, horizon)
        if end > last:
            idle[state] += (total - used) * (end - last)
            last = end
        if ev == 0:
            apply(jobs[j], running.pop(j), -1)
            used -= jobs[j].gpus
        else:
            queue.append(j)
        snapshot = ClusterSnapshot(base.pool, base.keys, tuple(nodes))
        waiting: list[int] = []
        for pos, q in enumerate(queue):
            result = fn(snapshot, jobs[q].group) if pos < WINDOW else None
            if isinstance(result, Placement):
                apply(jobs[q], result, 1)
                snapshot = ClusterSnapshot(base.pool, base.keys, tuple(nodes))
                used += jobs[q].gpus
                started[q] = now
                running[q] = result
                heapq.heappush(events, (now + jobs[q].duration, 0, q))
            else:
                waiting.append(q)
        queue = waiting
        fitting = [q for q in queue[:WINDOW] if jobs[q].gpus <= total - used]
        if not queue:
            state = "empty"
        elif not fitting:
            state = "gpu_count"
        else:
            state = "topology:" + kind(jobs[fitting[0]])
            if kind(jobs[fitting[0]]) == "large":
                sizes, plain = models(jobs[fitting[0]])
                for r in running:
                    s, p = models(jobs[r])
                    sizes += s
                    plain += p
                state += ":repackable" if repacks(sizes, plain, racks, trays) else ":not_repackable"
                free_trays: dict[str, int] = defaultdict(int)
                for i, n in enumerate(nodes):
                    free_trays[rack_of[i]] += n.free.gpu == TRAY_GPUS
                whole_racks.append(sum(1 for v in free_trays.values() if v >= 16))
                stranded.append(sum(v for v in free_trays.values() if 1 <= v <= 3))
    waits: dict[str, list[float]] = defaultdict(list)
    for j, job in enumerate(jobs):
        waits[kind(job)].append(started.get(j, last) - job.arrival)
    area = total * horizon
    return {
        "solver": solver,
        "gpu_utilisation": round(1 - sum(idle.values()) / area, 4),
        "idle_points": {k: round(100 * v / area, 2) for k, v in sorted(idle.items())},
        "blocked": {
            "events": len(whole_racks),
            "racks_with_16_whole_trays": round(statistics.fmean(whole_racks), 2) if whole_racks else None,
            "trays_in_1_to_3_pockets": round(statistics.fmean(stranded), 1) if stranded else None,
        },
        "mean_wait_by_kind": {k: round(statistics.fmean(v), 2) for k, v in sorted(waits.items())},
    }


def rack_ceiling(jobs: list[Job], base: ClusterSnapshot) -> float:
    """Utilisation when every model keeps its rack but the running gangs may move at each admission."""
    rack_of = [str(n.labels[-1]) for n in base.nodes]
    racks = len(set(rack_of))
    trays = len(base.nodes) // racks
    total = sum(n.free.gpu for n in base.nodes)
    info = [models(job) for job in jobs]
    horizon = max(job.arrival for job in jobs)
    events = [(job.arrival, 1, j) for j, job in enumerate(jobs)]
    heapq.heapify(events)
    queue: list[int] = []
    running: set[int] = set()
    used = 0
    busy = 0.0
    last = 0.0
    while events:
        now, ev, j = heapq.heappop(events)
        end = min(now, horizon)
        if end > last:
            busy += used * (end - last)
            last = end
        if ev == 0:
            running.discard(j)
            used -= jobs[j].gpus
        else:
            queue.append(j)
        waiting: list[int] = []
        for pos, q in enumerate(queue):
            sizes = [m for r in running for m in info[r][0]] + info[q][0]
            plain = sum(info[r][1] for r in running) + info[q][1]
            if pos < WINDOW and used + jobs[q].gpus <= total and repacks(sizes, plain, racks, trays):
                running.add(q)
                used += jobs[q].gpus
                heapq.heappush(events, (now + jobs[q].duration, 0, q))
            else:
                waiting.append(q)
        queue = waiting
    return round(busy / (total * horizon), 4)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.fragmentation", description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=600)
    parser.add_argument("--load", type=float, default=1.0)
    parser.add_argument("--seeds", default="7")
    parser.add_argument("--solver", default="solve", choices=sorted(SOLVERS))
    parser.add_argument("--rack-ceiling-only", action="store_true",
                        help="only the rack ceiling (no solver runs: seconds per seed)")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    for seed in (int(s) for s in args.seeds.split(",")):
        base = nvl72_pool(2, 4, 7, occupancy=0.0, seed=seed)
        jobs = trace(args.jobs, seed, sum(n.free.gpu for n in base.nodes), args.load)
        if args.rack_ceiling_only:
            print(json.dumps({"seed": seed, "load": args.load, "rack_ceiling": rack_ceiling(jobs, base)}))
            sys.stdout.flush()
            continue
        print(f"fragmentation: seed {seed}, {args.solver} ...", file=sys.stderr)
        row = {"seed": seed, "load": args.load, **run(args.solver, jobs, base)}
        row["ceiling"] = run("ceiling", jobs, base)["gpu_utilisation"]
        row["rack_ceiling"] = rack_ceiling(jobs, base)
        print(json.dumps(row))
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
