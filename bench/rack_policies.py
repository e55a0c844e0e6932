"""Placement policies screened at rack level: ``python -m bench.rack_policies [--load L] [--seeds S,S]
[--policies best,ends,...] [--orders fifo,big,...] [--protect]``.

A fast proxy of :mod:`bench.simulate`'s trace and queue discipline (the same 600 gangs per seed;
FIFO, backfill over the first 64 queued, no starvation guard) that keeps only what the topology
constraints of the trace see: 2 zones x 4 spines x 7 racks of 18 trays of 4 GPUs. A model (one
``gpu-clique`` group) takes whole free trays of one rack; the models of a zoned gang take racks of
one zone (the zones tried tightest first, the models largest first); a plain task takes 1-2 GPUs of
the tightest tray with room. Four seeds run in about a second, against minutes with ``solve``, so
this is where ideas for the packing rule are screened before one is built into the solver; its
``best`` policy is the solver's rule (docs/design.md §5, "Packing") reduced to racks, and lands
about one utilisation point below ``solve`` at load 1.0 and within 0.3 at 1.5 (the solver is
complete, the proxy's zoned gangs are placed greedily).

Policies rank the racks with room for a model (smallest key first):

- ``best``: the fewest whole trays left, then the fewest in its spine, then in its zone;
- ``first``: the lowest rack; ``worst``: the most trays left (sanity);
- ``ends``: ``best``'s fit, then the rack whose models' latest end is closest to the model's own
  end. Ends are the **true** ends (start + duration): a clairvoyant upper bound of end alignment;
- ``ends-first``: a rack whose models end no more than 30 time units before the model's own end
  first, then ``best``'s fit (also clairvoyant);
- ``no-pockets``: a rack the model would leave 1-3 trays in (room only plain gangs and 2-tray
  models use) last, then ``best``;
- ``classes``: a rack holding only models of the model's size class (10+, 5-9, 2-4 trays) or none
  first, then ``best``.

``--protect`` (admission): while a large gang (2-4 models of 16 trays) queued ahead of it has waited,
a smaller model may not take a rack with 16 or more whole free trays. ``--orders``: the window's
order at each scan, for the proxy and its ceiling alike (``fifo``; ``big``: most GPUs first; ``small``:
fewest first; ``big-aged``: GPUs x (1 + wait / mean duration) first). The ceiling is the same loop
with the constraints dropped (a model takes whole free trays anywhere), as :mod:`bench.simulate`'s
``ceiling``; each line gives the policy's utilisation over [0, last arrival], the ceiling's and the
loss (ceiling less policy, in points), per seed and on average.
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import json
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

from bench.fragmentation import models
from bench.pools import nvl72_pool
from bench.simulate import WINDOW, Job, trace

TRAY_GPUS = 4
LARGE = 16  # trays of each model of a large gang
ALIGN_SLACK = 30.0  # ends-first: time units a rack's models may end before the model's own end


@dataclass(slots=True)
class Racks:
    """The pool at rack level: ``whole[r]`` whole free trays of rack ``r``, ``trays[r]`` each tray's free
    GPUs, ``ends[r]`` the true ends of the models on it; racks are numbered zone by zone, spine by
    spine."""

    zones: int = 2
    spines: int = 4
    racks: int = 7
    size: int = 18
    whole: list[int] = field(default_factory=list)
    trays: list[list[int]] = field(default_factory=list)
    ends: list[list[float]] = field(default_factory=list)

    def __post_init__(self) -> None:
        n = self.zones * self.spines * self.racks
        self.whole = [self.size] * n
        self.trays = [[TRAY_GPUS] * self.size for _ in range(n)]
        self.ends = [[] for _ in range(n)]

    @property
    def count(self) -> int:
        return len(self.whole)

    def spine(self, r: int) -> int:
        return r // self.racks

    def zone(self, r: int) -> int:
        return r // (self.racks * self.spines)

    def in_zone(self, z: int) -> range:
        per = self.racks * self.spines
        return range(z * per, (z + 1) * per)

    def spine_whole(self, s: int) -> int:
        return sum(self.whole[s * self.racks:(s + 1) * self.racks])

    def zone_whole(self, z: int) -> int:
        return sum(self.whole[r] for r in self.in_zone(z))


@dataclass(frozen=True, slots=True)
class Ask:
    """What a rank sees of the model being placed: its trays, now, and its true end."""

    size: int
    now: float
    end: float


Rank = Callable[[Racks, int, Ask], tuple]


def best(p: Racks, r: int, a: Ask) -> tuple:
    return (p.whole[r] - a.size, p.spine_whole(p.spine(r)), p.zone_whole(p.zone(r)), r)


def first(p: Racks, r: int, a: Ask) -> tuple:
    return (r,)


def worst(p: Racks, r: int, a: Ask) -> tuple:
    return (a.size - p.whole[r], r)


def ends(p: Racks, r: int, a: Ask) -> tuple:
    gap = abs(max(p.ends[r]) - a.end) if p.ends[r] else float("inf")
    return (p.whole[r] - a.size, gap, *best(p, r, a)[1:])


def ends_first(p: Racks, r: int, a: Ask) -> tuple:
    late = a.end - max(p.ends[r]) > ALIGN_SLACK if p.ends[r] else True
    return (late, *best(p, r, a))


def no_pockets(p: Racks, r: int, a: Ask) -> tuple:
    return (1 <= p.whole[r] - a.size <= 3, *best(p, r, a))


def _size_class(trays: int) -> int:
    return 0 if trays >= 10 else (1 if trays >= 5 else 2)


def classes(p: Racks, r: int, a: Ask, sizes: dict[int, list[int]] | None = None) -> tuple:
    held = {_size_class(s) for s in (sizes or {}).get(r, [])}
    return (bool(held) and held != {_size_class(a.size)}, *best(p, r, a))


RANKS: dict[str, Rank] = {"best": best, "first": first, "worst": worst, "ends": ends, "ends-first": ends_first,
                          "no-pockets": no_pockets, "classes": classes}
ORDERS: dict[str, Callable[[Job, float], tuple] | None] = {
    "fifo": None,
    "big": lambda job, now: (-job.gpus, job.arrival),
    "small": lambda job, now: (job.gpus, job.arrival),
    "big-aged": lambda job, now: (-job.gpus * (1 + (now - job.arrival) / 60.0), job.arrival),
}


def is_large(sizes: list[int]) -> bool:
    return len(sizes) >= 2 and all(s == LARGE for s in sizes)


def place_models(p: Racks, sizes: list[int], zoned: bool, rank: Rank, now: float, end: float, *,
                 protect: bool = False, ceiling: bool = False,
                 held: dict[int, list[int]] | None = None) -> list[tuple[int, int]] | None:
    """Racks for ``sizes`` (trays per model), taken from ``p.whole``: [(rack, trays)], or None (nothing
    taken). ``protect``: racks with ``LARGE`` or more whole free trays are not offered to models
    smaller than ``LARGE``; ``ceiling``: the constraints dropped (whole trays anywhere, the tightest
    racks first)."""
    if ceiling:
        need = sum(sizes)
        if sum(p.whole) < need:
            return None
        took = []
        for r in sorted(range(p.count), key=lambda r: (p.whole[r], r)):
            k = min(p.whole[r], need)
            if k:
                p.whole[r] -= k
                took.append((r, k))
                need -= k
            if not need:
                break
        return took
    zones: list[range] = ([p.in_zone(z) for z in sorted(range(p.zones), key=p.zone_whole)] if zoned
                          else [range(p.count)])
    for racks in zones:
        took: list[tuple[int, int]] = []
        for size in sorted(sizes, reverse=True):
            ask = Ask(size, now, end)
            room = [r for r in racks if p.whole[r] >= size and not (protect and size < LARGE and p.whole[r] >= LARGE)]
            if not room:
                break
            if rank is classes:
                r = min(room, key=lambda r: classes(p, r, ask, held))
            else:
                r = min(room, key=lambda r: rank(p, r, ask))
            p.whole[r] -= size
            took.append((r, size))
        else:
            return took
        for r, size in took:
            p.whole[r] += size
    return None


def place_plain(p: Racks, gpus: list[int]) -> list[tuple[int, int, int]] | None:
    """Each task (GPUs) on the tray with the fewest free GPUs that has room: [(rack, tray, GPUs)]."""
    took: list[tuple[int, int, int]] = []
    for g in sorted(gpus, reverse=True):
        spot = min(((f, r, t) for r, row in enumerate(p.trays) for t, f in enumerate(row) if f >= g), default=None)
        if spot is None:
            release_plain(p, took)
            return None
        _f, r, t = spot
        p.whole[r] -= p.trays[r][t] == TRAY_GPUS
        p.trays[r][t] -= g
        took.append((r, t, g))
    return took


def release_plain(p: Racks, took: list[tuple[int, int, int]]) -> None:
    for r, t, g in took:
        p.trays[r][t] += g
        p.whole[r] += p.trays[r][t] == TRAY_GPUS


def _take(p: Racks, r: int, trays: int) -> list[int]:
    """Take ``trays`` whole free trays of rack ``r`` (already counted off ``p.whole``): their numbers."""
    taken = list(itertools.islice((t for t, f in enumerate(p.trays[r]) if f == TRAY_GPUS), trays))
    for t in taken:
        p.trays[r][t] = 0
    return taken


def run(jobs: list[Job], rank: Rank = best, *, order: str = "fifo", protect: bool = False,
        ceiling: bool = False, pool: Racks | None = None) -> dict:
    """The trace through the proxy's loop: GPU utilisation over [0, last arrival] and the pool at the
    end (every job that started has ended by then: the events run out)."""
    p = pool or Racks()
    total = p.count * p.size * TRAY_GPUS
    shape = [models(job) for job in jobs]
    plain = [[t.resources.gpu for t in job.group.tasks] for job in jobs]
    zoned = [bool(job.group.tree.children) and job.group.tree.children[0].key == "zone" for job in jobs]
    sort_key = ORDERS[order]
    horizon = max(job.arrival for job in jobs)
    events = [(job.arrival, 1, j) for j, job in enumerate(jobs)]
    heapq.heapify(events)
    queue: list[int] = []
    holding: dict[int, tuple[list[tuple[int, list[int]]], list[tuple[int, int, int]]]] = {}
    sizes_on: dict[int, list[int]] = {}
    used = 0
    busy = last = 0.0
    started = 0
    while events:
        now, kind, j = heapq.heappop(events)
        end = min(now, horizon)
        if end > last:
            busy += used * (end - last)
            last = end
        if kind == 0:
            held, trays = holding.pop(j)
            for r, taken in held:
                for t in taken:
                    p.trays[r][t] = TRAY_GPUS
                p.whole[r] += len(taken)
                p.ends[r].remove(now)
                sizes_on[r].remove(len(taken))
            release_plain(p, trays)
            used -= jobs[j].gpus
        else:
            queue.append(j)
        if sort_key is not None:
            queue = sorted(queue[:WINDOW], key=lambda q: sort_key(jobs[q], now)) + queue[WINDOW:]
        waiting: list[int] = []
        for pos, q in enumerate(queue):
            if pos >= WINDOW or jobs[q].gpus > total - used:
                waiting.append(q)
                continue
            sizes = shape[q][0]
            finish = now + jobs[q].duration
            if sizes:
                guard = protect and not is_large(sizes) and any(
                    is_large(shape[a][0]) and now > jobs[a].arrival for a in queue[:pos])
                racks = place_models(p, sizes, zoned[q], rank, now, finish, protect=guard, ceiling=ceiling,
                                     held=sizes_on)
                if racks is None:
                    waiting.append(q)
                    continue
                for r, k in racks:
                    p.ends[r].append(finish)
                    sizes_on.setdefault(r, []).append(k)
                holding[q] = ([(r, _take(p, r, k)) for r, k in racks], [])
            else:
                trays = place_plain(p, plain[q])
                if trays is None:
                    waiting.append(q)
                    continue
                holding[q] = ([], trays)
            used += jobs[q].gpus
            started += 1
            heapq.heappush(events, (finish, 0, q))
        queue = waiting
    return {"gpu_utilisation": busy / (total * horizon), "started": started, "pool": p}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.rack_policies", description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=600)
    parser.add_argument("--load", type=float, default=1.0)
    parser.add_argument("--seeds", default="7,8,9,10")
    parser.add_argument("--policies", default="best", help="comma-separated, of " + ", ".join(RANKS))
    parser.add_argument("--orders", default="fifo", help="comma-separated, of " + ", ".join(ORDERS))
    parser.add_argument("--protect", action="store_true",
                        help="smaller models keep off racks with 16+ whole free trays while a large gang waits ahead")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    seeds = [int(s) for s in args.seeds.split(",")]
    traces = []
    for seed in seeds:
        base = nvl72_pool(2, 4, 7, occupancy=0.0, seed=seed)
        traces.append(trace(args.jobs, seed, sum(n.free.gpu for n in base.nodes), args.load))
    for order in args.orders.split(","):
        if order not in ORDERS:
            parser.error(f"--orders: {order!r} is none of {', '.join(ORDERS)}")
        top = [run(jobs, order=order, ceiling=True)["gpu_utilisation"] for jobs in traces]
        for name in args.policies.split(","):
            if name not in RANKS:
                parser.error(f"--policies: {name!r} is none of {', '.join(RANKS)}")
            mine = [run(jobs, RANKS[name], order=order, protect=args.protect)["gpu_utilisation"] for jobs in traces]
            loss = [100 * (c - m) for c, m in zip(top, mine, strict=True)]
            print(json.dumps({
                "load": args.load, "seeds": seeds, "policy": name, "order": order, "protect": args.protect,
                "utilisation": [round(100 * m, 1) for m in mine], "mean": round(100 * statistics.fmean(mine), 2),
                "ceiling": [round(100 * c, 1) for c in top], "ceiling_mean": round(100 * statistics.fmean(top), 2),
                "loss_points": [round(x, 1) for x in loss], "loss_points_mean": round(statistics.fmean(loss), 2),
            }))
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
