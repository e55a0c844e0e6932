"""The trace simulation's engine, shared by the simulation commands (``bench.simulate``,
``bench.simulate_hold``, ``bench.simulate_teams``, ``bench.fragmentation``, ``bench.rack_policies``) and
their tests: the seeded job trace (:func:`trace`), the ``ceiling`` solver without topology, and the
event loop (:func:`simulate`) that offers the queue to a solver at each arrival or completion. The
trace and the metrics are those of ``python -m bench.simulate`` (its docstring)."""

from __future__ import annotations

import heapq
import random
import statistics
import time
from dataclasses import dataclass

from bench.kit.baselines import kueue_greedy, pod_affinity
from scheduler.placement import Placement, solve
from scheduler.placement.types import (
    ClusterSnapshot,
    GangRequest,
    NodeState,
    Resources,
    TaskRequest,
    Unplaceable,
)
from topology.tree import ConstraintTree, TreeNode

WINDOW = 64


def ceiling(snapshot: ClusterSnapshot, group: GangRequest) -> Placement | Unplaceable:
    """The topology constraints dropped: a gang fits when its tasks fit on any machines with room
    (best fit, largest task first). Under the same queue discipline this is the ceiling every solver
    that honours the constraints is measured against (its utilisation less a solver's: the
    fragmentation loss)."""
    need = sum(t.resources.gpu for t in group.tasks)
    if need > sum(n.free.gpu for n in snapshot.nodes if n.schedulable):
        return Unplaceable(status="unschedulable", reason={"code": "ceiling"}, message="not enough free GPUs")
    free = {n.name: list(n.free.as_tuple()) for n in snapshot.nodes if n.schedulable and n.free.gpu > 0}
    by_gpu: dict[int, list[str]] = {}
    for name, f in free.items():
        by_gpu.setdefault(f[0], []).append(name)
    out: list[tuple[str, str]] = []
    for task in sorted(group.tasks, key=lambda t: (-t.resources.gpu, t.name)):
        r = task.resources.as_tuple()
        chosen = None
        for level in sorted(g for g in by_gpu if g >= r[0]):
            chosen = next((m for m in by_gpu[level] if all(a >= b for a, b in zip(free[m], r, strict=True))), None)
            if chosen is not None:
                by_gpu[level].remove(chosen)
                break
        if chosen is None:
            return Unplaceable(status="unschedulable", reason={"code": "ceiling"}, message="no machine has room")
        f = free[chosen]
        for i, v in enumerate(r):
            f[i] -= v
        by_gpu.setdefault(f[0], []).append(chosen)
        out.append((task.name, chosen))
    return Placement(status="placed", assignments=tuple(sorted(out)))


SOLVERS = {"solve": solve, "kueue-greedy": kueue_greedy, "pod-affinity": pod_affinity, "ceiling": ceiling}


@dataclass(frozen=True, slots=True)
class Job:
    name: str
    arrival: float
    duration: float
    group: GangRequest
    gpus: int


def _models(name: str, sizes: list[int], gpu: int, zone: bool) -> GangRequest:
    tasks: list[TaskRequest] = []
    prefix = (("zone", "wf"),) if zone else ()
    cliques = []
    for m, size in enumerate(sizes):
        members = tuple(f"m{m}-t{i:02d}" for i in range(size))
        tasks.extend(TaskRequest(t, Resources(gpu=gpu, cpu=4000 * gpu, memory=(32 << 30) * gpu)) for t in members)
        cliques.append(TreeNode("gpu-clique", f"m{m}", (*prefix, ("gpu-clique", f"m{m}")), "required", (), members))
    if zone:
        children: tuple[TreeNode, ...] = (TreeNode("zone", "wf", prefix, "required", tuple(cliques)),)
    else:
        children = tuple(cliques)
    tree = ConstraintTree(group=name, children=children, keys=("zone", "spine", "rack", "gpu-clique"))
    return GangRequest(name, tree, tuple(sorted(tasks, key=lambda t: t.name)))


def _plain(name: str, n: int, gpu: int) -> GangRequest:
    tasks = tuple(TaskRequest(f"t{i}", Resources(gpu=gpu, cpu=4000 * gpu, memory=(32 << 30) * gpu)) for i in range(n))
    return GangRequest(name, ConstraintTree(group=name, tasks=tuple(t.name for t in tasks)), tasks)


def trace(jobs: int, seed: int, total_gpus: int, load: float = 0.9) -> list[Job]:
    rng = random.Random(seed)
    out: list[Job] = []
    mean_duration = 60.0
    draft: list[tuple[GangRequest, int, float]] = []
    for j in range(jobs):
        name = f"job{j:04d}"
        x = rng.random()
        if x < 0.30:
            n, gpu = rng.randint(1, 4), rng.choice((1, 2))
            group = _plain(name, n, gpu)
        elif x < 0.65:
            group = _models(name, [rng.randint(2, 16)], 4, zone=False)
        elif x < 0.90:
            group = _models(name, [rng.randint(4, 8), rng.randint(4, 8)], 4, zone=True)
        else:
            group = _models(name, [16] * rng.randint(2, 4), 4, zone=True)
        gpus = sum(t.resources.gpu for t in group.tasks)
        draft.append((group, gpus, rng.expovariate(1 / mean_duration)))
    mean_work = statistics.fmean(g * d for _grp, g, d in draft)
    rate = load * total_gpus / mean_work  # arrivals per time unit for the target offered load
    now = 0.0
    for j, (group, gpus, duration) in enumerate(draft):
        now += rng.expovariate(rate)
        out.append(Job(f"job{j:04d}", now, duration, group, gpus))
    return out


def occupy(nodes: list[NodeState], index: dict[str, int], group: GangRequest, placement: Placement,
           sign: int) -> None:
    """Take (``sign`` 1) or give back (-1) what ``group``'s tasks hold under ``placement`` on
    ``nodes`` (``index``: machine name -> position), in place: every trace simulation's bookkeeping."""
    reqs = {t.name: t.resources for t in group.tasks}
    for task, machine in placement.assignments:
        i = index[machine]
        n, r = nodes[i], reqs[task]
        f = n.free
        free = Resources(f.gpu - sign * r.gpu, f.cpu - sign * r.cpu, f.memory - sign * r.memory,
                         f.storage - sign * r.storage)
        nodes[i] = NodeState(n.name, n.labels, free, n.schedulable)


def simulate(solver: str, jobs: list[Job], base: ClusterSnapshot) -> dict:
    fn = SOLVERS[solver]
    nodes = list(base.nodes)
    index = {n.name: i for i, n in enumerate(nodes)}
    total_gpus = sum(n.free.gpu for n in nodes)
    events: list[tuple[float, int, int]] = [(job.arrival, 1, j) for j, job in enumerate(jobs)]  # (time, kind, job)
    heapq.heapify(events)
    queue: list[int] = []
    started: dict[int, float] = {}
    running: dict[int, Placement] = {}
    used_gpus = 0
    busy_area = 0.0
    last_time = 0.0
    horizon = max(job.arrival for job in jobs)
    calls: list[float] = []

    def apply(job: Job, placement: Placement, sign: int) -> None:
        occupy(nodes, index, job.group, placement, sign)

    while events:
        now, kind, j = heapq.heappop(events)
        span_end = min(now, horizon)
        if span_end > last_time:
            busy_area += used_gpus * (span_end - last_time)
            last_time = span_end
        if kind == 0:
            apply(jobs[j], running.pop(j), -1)
            used_gpus -= jobs[j].gpus
        else:
            queue.append(j)
        snapshot = ClusterSnapshot(base.pool, base.keys, tuple(nodes))
        waiting: list[int] = []
        for pos, q in enumerate(queue):
            if pos >= WINDOW:
                waiting.append(q)
                continue
            start = time.perf_counter()
            result = fn(snapshot, jobs[q].group)
            calls.append((time.perf_counter() - start) * 1000)
            if isinstance(result, Placement):
                apply(jobs[q], result, 1)
                snapshot = ClusterSnapshot(base.pool, base.keys, tuple(nodes))
                used_gpus += jobs[q].gpus
                started[q] = now
                running[q] = result
                heapq.heappush(events, (now + jobs[q].duration, 0, q))
            else:
                waiting.append(q)
        queue = waiting
    end = last_time if not queue else horizon
    waits = [started[j] - job.arrival if j in started else max(0.0, end - job.arrival) for j, job in enumerate(jobs)]
    return {
        "scenario": "trace-1k",
        "solver": solver,
        "nodes": len(nodes),
        "tasks": sum(len(job.group.tasks) for job in jobs),
        "runs": len(calls),
        "p50_ms": round(statistics.median(calls), 3),
        "p95_ms": round(sorted(calls)[int(0.95 * (len(calls) - 1))], 3),
        "status": "done",
        "jobs": len(jobs),
        "started": len(started),
        "never_started": len(jobs) - len(started),
        "gpu_utilisation": round(busy_area / (total_gpus * horizon), 4),
        "mean_wait": round(statistics.fmean(waits), 2),
        "total_gpus": total_gpus,
    }
