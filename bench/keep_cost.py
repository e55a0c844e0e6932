"""What gangs waiting with keeps cost a placement cycle: ``python -m bench.keep_cost [--pools N]
[--gangs 1,10,50,200] [--states high-wait,normal-wait,normal-window] [--min-runtime 600] [--low 10]``.

Pool: :func:`bench.kit.preemption_instances.crowded_pool` (the 20,736-tray NVL72 pool, 5,000 running LOW
gangs of 1-3 trays started up to two hours ago, NORMAL work between them, about 3 % of the trays
idle), given to the real :class:`workflows.scheduling.cycle.Walk` through an in-memory
:class:`~workflows.scheduling.cycle.values.GangSource` (no database: what one walk decides and costs).
Each running LOW gang becomes preemptible a minimum runtime after its start.

Queue: ``K`` gangs of the shapes of ``LARGE_PREEMPTORS`` (a whole rack, 4 or 8 cliques of 16 trays in
a zone, 1,400 trays anywhere), in turn, none of which fits the pool now, then ``--low`` LOW gangs of
two trays in one clique. The ``K`` gangs are in one of the states of docs/design.md §9 with the pool's
minimum runtime on (``--min-runtime``, seconds):
- ``high-wait`` / ``normal-wait``: HIGH / NORMAL gangs that first did not fit 10 s ago: each waits the
  minimum runtime before evicting, keeping its placement without LOW work from LOW gangs;
- ``normal-window``: NORMAL gangs that first did not fit a minimum runtime ago: each evicts only LOW
  gangs that have run at most twice the minimum runtime, finds none enough, and keeps its placement
  from LOW gangs for as long as it waits.

Per ``K`` and state, in the same run: ``keep`` is the walk as the service runs it; ``unshared`` the
same walk without the waiting gangs' shortcuts (``KeepsUnshared``: each solves its placement without
LOW work and its protected-LOW check afresh, and a search narrowed by the eviction window runs without
its one-solve check that the window's LOW work is enough: the walk before them); ``baseline`` the same
queue with preemption off (the gangs' verdicts alone: what they cost a cycle without preemption).
Reported: seconds (wall and this process's CPU, the least of ``--repeat`` walks), what the walk
decided (keeping gangs, evictions, placements, solves), whether ``keep`` and ``unshared`` decided the
same, CPU ratios and the CPU per waiting gang beyond the baseline.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "osmo.settings.local")
os.environ.setdefault("DEBUG", "False")
django.setup()

from bench.kit.preemption_instances import LARGE_PREEMPTORS, crowded_pool, gang, nvl72_snapshot  # noqa: E402
from scheduler.hold import Holder  # noqa: E402
from scheduler.placement import ClusterSnapshot, GangRequest, Placement, Policy, solve  # noqa: E402
from scheduler.placement.signature import gang_signature  # noqa: E402
from scheduler.preemption import Candidate  # noqa: E402
from workflows.scheduling.cycle import CycleInput, GangRow, QueuedGang, RunningGang, Walk  # noqa: E402
from workflows.scheduling.cycle.values import Decision, GangSource  # noqa: E402
from workflows.scheduling.cycle.walk import Sharing  # noqa: E402
from workflows.scheduling.requests import task_requests_to_json  # noqa: E402
from workflows.spec import tree_to_json  # noqa: E402

NOW = 1_000_000.0  # the crowded pool's clock (epoch seconds)
RANKS = {"high-wait": 0, "normal-wait": 1, "normal-window": 1}


class CrowdedSource:
    """The crowded pool and a queue's rows as a :class:`~workflows.scheduling.cycle.values.GangSource`."""

    def __init__(self, snapshot: ClusterSnapshot, idle: ClusterSnapshot, candidates: list[Candidate],
                 rows: Mapping[int, GangRow], min_runtime: float) -> None:
        self._snapshot, self._idle, self.rows = snapshot, idle, rows
        self.node_ids = {node.name: i for i, node in enumerate(snapshot.nodes)}
        self.running = [RunningGang(100_000 + i, 200_000 + i, None, c, preemptible_at=c.started + min_runtime)
                        for i, c in enumerate(candidates)]

    def gang_rows(self, pks: Sequence[int]) -> Mapping[int, GangRow]:
        return {pk: self.rows[pk] for pk in pks}

    def pool_keys(self, workflow_id: int) -> list[list[str]]:
        return [[key, key] for key in self._snapshot.keys]

    def snapshot(self) -> tuple[ClusterSnapshot, dict[str, int]]:
        return self._snapshot, dict(self.node_ids)

    def idle_snapshot(self) -> ClusterSnapshot:
        return self._idle

    def platforms(self) -> dict:
        return {}

    def running_low(self) -> list[RunningGang]:
        return list(self.running)

    def holders(self, now: float) -> list[Holder]:
        return []


def _row(request: GangRequest) -> GangRow:
    return GangRow(tree_to_json(request.tree), task_requests_to_json(request))


def queue(snapshot: ClusterSnapshot, k: int, state: str, low: int, min_runtime: float
          ) -> tuple[list[QueuedGang], dict[int, GangRow], dict[int, float]]:
    """``k`` waiting gangs in ``state`` (the large shapes that do not fit, in turn), then ``low`` LOW
    gangs; their rows, and when each waiting gang first did not fit."""
    shapes = [make() for make in LARGE_PREEMPTORS.values()]
    shapes = [request for request in shapes if not isinstance(solve(snapshot, request), Placement)]
    rank = RANKS[state]
    since = NOW - (10.0 if state.endswith("wait") else min_runtime + 10.0)
    gangs, rows, blocked = [], {}, {}
    for pk in range(1, k + low + 1):
        request = shapes[(pk - 1) % len(shapes)] if pk <= k else gang("lo", 1, 2)
        g_rank = rank if pk <= k else 2
        rows[pk] = _row(request)
        gangs.append(QueuedGang(
            pk=pk, workflow_id=1000 + pk, name=request.name, rank=g_rank, order=[g_rank, "2026-11-27T00:00", pk, 0],
            scheduling_since=datetime.fromtimestamp(NOW - 1800, UTC), proof_epoch=None,
            signature=gang_signature(request), reason_code="", reason_digest="", idle_fit=None, idle_fit_epoch=None,
            keys_version=1, workflow_label=f"w{pk}"))
        if pk <= k:
            blocked[pk] = since
    return gangs, rows, blocked


class KeepsUnshared(Walk):
    """The walk without the waiting gangs' shortcuts (``Sharing.waits`` off, handed to its ``LowWork``):
    each waiting gang solves its views afresh and every narrowed search runs whole, as before them."""

    def __init__(self, cycle: CycleInput, source: GangSource, policy: Policy) -> None:
        super().__init__(cycle, source, policy, sharing=Sharing(waits=False))


def walk(walker: type[Walk], cycle: CycleInput, source: CrowdedSource, repeat: int = 1
         ) -> tuple[Decision, Walk, float, float]:
    """One walk's decision and the least wall and CPU seconds of ``repeat`` walks."""
    best, cpu_best = float("inf"), float("inf")
    for _ in range(repeat):
        gc.collect()
        began, cpu_began = time.perf_counter(), time.process_time()
        w = walker(cycle, source, Policy())
        decision = w.decide()
        best, cpu_best = min(best, time.perf_counter() - began), min(cpu_best, time.process_time() - cpu_began)
    return decision, w, best, cpu_best


def _said(decision: Decision) -> list:
    """What a decision says, comparably: placements, evictions, verdicts (ids, reason, proof)."""
    return [sorted((p.gang.pk, sorted(p.placement.assignments)) for p in decision.placements),
            sorted((e.group_id, e.preemptor) for e in decision.evictions),
            sorted((v.group_ids, v.digest, v.proof) for v in decision.verdicts),
            decision.unschedulable, decision.wake_at, sorted(decision.blocked_since.items())]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pools", type=int, default=1, help="crowded pool seeds 1..N")
    parser.add_argument("--gangs", default="1,10,50,200", help="comma-separated K: gangs waiting with keeps")
    parser.add_argument("--states", default="high-wait,normal-wait,normal-window", help="comma-separated states")
    parser.add_argument("--min-runtime", type=float, default=600.0, help="the pool's minimum runtime, seconds")
    parser.add_argument("--low", type=int, default=10, help="LOW gangs queued behind the waiting ones")
    parser.add_argument("--repeat", type=int, default=1, help="walks per variant (the least time is reported)")
    parser.add_argument("--no-unshared", action="store_true", help="skip the walk without the memo")
    parser.add_argument("--json", action="store_true", help="one JSON object per line (the default output)")
    args = parser.parse_args(argv)
    ks = [int(k) for k in args.gangs.split(",")]
    idle = nvl72_snapshot()
    for seed in range(1, args.pools + 1):
        print(f"pool {seed}: building the crowded pool", file=sys.stderr)
        snapshot, candidates = crowded_pool(seed, now=NOW)
        for state in args.states.split(","):
            for k in ks:
                gangs, rows, blocked = queue(snapshot, k, state, args.low, args.min_runtime)
                source = CrowdedSource(snapshot, idle, candidates, rows, args.min_runtime)
                cycle = CycleInput(
                    pool_id=1, pool_name="nvl72", keys_version=1,
                    key_labels=tuple((key, key) for key in snapshot.keys), now=datetime.fromtimestamp(NOW, UTC),
                    capacity_epoch=1, inventory_epoch=1, queue=tuple(gangs), starvation=timedelta(days=30),
                    preemption=True, min_runtime=args.min_runtime, blocked_since=blocked)
                base, _w, base_s, base_cpu = walk(Walk, replace(cycle, preemption=False), source, args.repeat)
                kept, w, kept_s, kept_cpu = walk(Walk, cycle, source, args.repeat)
                row = {"bench": "keep-cost", "pool": seed, "state": state, "gangs": k, "low": args.low,
                       "min_runtime": args.min_runtime,
                       "keeping": len(w.low.keeps) + len(w.low.evict_waits), "evict_waits": len(w.low.evict_waits),
                       "evictions": len(kept.evictions), "placed": len(kept.placements), "solved": kept.solved,
                       "keep_seconds": round(kept_s, 3), "keep_cpu_seconds": round(kept_cpu, 3),
                       "baseline_seconds": round(base_s, 3), "baseline_cpu_seconds": round(base_cpu, 3),
                       "baseline_solved": base.solved,
                       "vs_baseline": round(kept_cpu / max(base_cpu, 1e-9), 2),
                       "per_gang_cpu_seconds": round((kept_cpu - base_cpu) / max(k, 1), 4)}
                if not args.no_unshared:
                    unshared, _w, un_s, un_cpu = walk(KeepsUnshared, cycle, source, args.repeat)
                    row.update({"unshared_seconds": round(un_s, 3), "unshared_cpu_seconds": round(un_cpu, 3),
                                "unshared_solved": unshared.solved,
                                "same_decision": _said(unshared) == _said(kept),
                                "unshared_vs_baseline": round(un_cpu / max(base_cpu, 1e-9), 2),
                                "unshared_per_gang_cpu_seconds": round((un_cpu - base_cpu) / max(k, 1), 4),
                                "keep_vs_unshared": round(kept_cpu / max(un_cpu, 1e-9), 3)})
                print(json.dumps(row))
                sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
