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
  first, then ``best``;
- ``reserved``: the first ``RESERVED`` racks of each zone are offered to models smaller than a large
  gang's last (a soft partition for large gangs), then ``best``.

``--plain``: where a plain task goes among the trays with the fewest free GPUs (``tightest``: the lowest
rack; ``fewest-whole``: the rack with the fewest whole free trays; ``partial-rack``: the rack with the
most part-used trays). ``--protect`` (admission): while a large gang (2-4 models of 16 trays) queued
ahead of it has waited, a smaller model may not take a rack with 16 or more whole free trays.
``--orders``: the window's order at each scan, for the proxy and its ceiling alike (``fifo``; ``big``:
most GPUs first; ``small``: fewest first; ``big-aged``: GPUs x (1 + wait / mean duration) first). The
ceiling is the same loop with the constraints dropped (a model takes whole free trays anywhere), as
:mod:`bench.simulate`'s ``ceiling``; each line gives the policy's utilisation over [0, last arrival],
the ceiling's and the loss (ceiling less policy, in points), per seed and on average.
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
from bench.kit.pools import nvl72_pool
from bench.kit.traces import WINDOW, Job, trace

TRAY_GPUS = 4
LARGE = 16  # trays of each model of a large gang
ALIGN_SLACK = 30.0  # ends-first: time units a rack's models may end before the model's own end


@dataclass(slots=True)
class Racks:
    """The pool at rack level: ``whole[r]`` whole free trays of rack ``r``, ``trays[r]`` each tray's free
    GPUs, ``ends[r]`` the true ends of the models on it and ``sizes[r]`` their trays; racks are numbered
    zone by zone, spine by spine."""

    zones: int = 2
    spines: int = 4
    racks: int = 7
    size: int = 18
    whole: list[int] = field(default_factory=list)
    trays: list[list[int]] = field(default_factory=list)
    ends: list[list[float]] = field(default_factory=list)
    sizes: list[list[int]] = field(default_factory=list)

    def __post_init__(self) -> None:
        n = self.zones * self.spines * self.racks
        self.whole = [self.size] * n
        self.trays = [[TRAY_GPUS] * self.size for _ in range(n)]
        self.ends = [[] for _ in range(n)]
        self.sizes = [[] for _ in range(n)]

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
    """What a rank sees of the model being placed: its trays and its true end."""

    size: int
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


def classes(p: Racks, r: int, a: Ask) -> tuple:
    held = {_size_class(s) for s in p.sizes[r]}
    return (bool(held) and held != {_size_class(a.size)}, *best(p, r, a))


RESERVED = 8  # reserved: racks per zone offered to models smaller than LARGE last


def reserved(p: Racks, r: int, a: Ask) -> tuple:
    return (r % (p.racks * p.spines) < RESERVED and a.size < LARGE, *best(p, r, a))


RANKS: dict[str, Rank] = {"best": best, "first": first, "worst": worst, "ends": ends, "ends-first": ends_first,
                          "no-pockets": no_pockets, "classes": classes, "reserved": reserved}
ORDERS: dict[str, Callable[[Job, float], tuple] | None] = {
    "fifo": None,
    "big": lambda job, now: (-job.gpus, job.arrival),
    "small": lambda job, now: (job.gpus, job.arrival),
    "big-aged": lambda job, now: (-job.gpus * (1 + (now - job.arrival) / 60.0), job.arrival),
}


def is_large(sizes: list[int]) -> bool:
    return len(sizes) >= 2 and all(s == LARGE for s in sizes)


def place_models(p: Racks, sizes: list[int], zoned: bool, rank: Rank, end: float, *,
                 protect: bool = False, ceiling: bool = False) -> list[tuple[int, int]] | None:
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
            ask = Ask(size, end)
            room = [r for r in racks if p.whole[r] >= size and not (protect and size < LARGE and p.whole[r] >= LARGE)]
            if not room:
                break
            r = min(room, key=lambda r: rank(p, r, ask))
            p.whole[r] -= size
            took.append((r, size))
        else:
            return took
        for r, size in took:
            p.whole[r] += size
    return None


PlainRank = Callable[[Racks, int, int, int], tuple]
PLAIN: dict[str, PlainRank] = {  # a plain task's tray (free GPUs f, rack r, tray t): smallest key first
    "tightest": lambda p, f, r, t: (f, r, t),
    "fewest-whole": lambda p, f, r, t: (f, p.whole[r] if f == TRAY_GPUS else 0, r, t),
    "partial-rack": lambda p, f, r, t: (f, -sum(0 < x < TRAY_GPUS for x in p.trays[r]) if f == TRAY_GPUS else 0,
                                        p.whole[r] if f == TRAY_GPUS else 0, r, t),
}


def place_plain(p: Racks, gpus: list[int], rule: PlainRank = PLAIN["tightest"]) -> list[tuple[int, int, int]] | None:
    """Each task (GPUs) on the tray with room that ``rule`` ranks first (by default the one with the fewest
    free GPUs, then the lowest rack): [(rack, tray, GPUs)]."""
    took: list[tuple[int, int, int]] = []
    for g in sorted(gpus, reverse=True):
        spot = min(((f, r, t) for r, row in enumerate(p.trays) for t, f in enumerate(row) if f >= g),
                   key=lambda c: rule(p, *c), default=None)
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


@dataclass(frozen=True, slots=True)
class Repack:
    """Moving running models (``--repack``): when a large gang that has waited at least ``wait`` does
    not fit, every running model may be placed again (:func:`repack`) if the gang then fits; one try
    per event. A moved gang goes on where it was (``mode`` ``resume``: checkpoint and restore for free,
    an upper bound), from its last checkpoint (``checkpoint``: every ``every`` time units since it
    started) or from the beginning (``restart``). ``for_any``: any waiting gang with models (not only
    a large one) may have them moved, and every such gang of the window gets its try in each scan:
    the most a mover honouring the zones could do."""

    mode: str = "resume"
    wait: float = 10.0
    every: float = 10.0
    for_any: bool = False


Unit = tuple[int, list[tuple[int, int | None]], bool]  # (job, [(trays, current rack)], zoned)


def repack(p: Racks, units: list[Unit], sticky: bool = True) -> dict[int, list[int]] | None:
    """A rack for every model of ``units`` (the waiting gang first, its current racks None) as if
    every model of them were lifted: each unit's models largest first, a zoned unit in one zone (its
    own zone first when ``sticky``, then the tightest); a model stays on its rack when ``sticky`` and
    there is room, the waiting gang takes the racks it displaces least from, every other the tightest.
    {job: [rack per model]}, or None when some unit does not fit (first fit decreasing by unit: a
    heuristic, None is no proof)."""
    caps = list(p.whole)
    for _job, ms, _zoned in units:
        for size, old in ms:
            if old is not None:
                caps[old] += size
    out: dict[int, list[int]] = {}
    for job, ms, zoned in units:
        olds = [o for _s, o in ms if o is not None]
        home = p.zone(olds[0]) if sticky and olds else None
        zones = ([list(p.in_zone(z)) for z in sorted(range(p.zones), key=lambda z: (
            z != home, sum(caps[r] for r in p.in_zone(z))))] if zoned else [list(range(p.count))])
        for racks in zones:
            took: list[tuple[int, int, int]] = []
            for i in sorted(range(len(ms)), key=lambda i: -ms[i][0]):
                size, old = ms[i]
                room = [r for r in racks if caps[r] >= size]
                if not room:
                    break
                if sticky and old is not None and old in room:
                    r = old
                elif not olds:
                    r = min(room, key=lambda r: (max(0, size - p.whole[r]), caps[r] - size, r))
                else:
                    r = min(room, key=lambda r: (caps[r] - size, r))
                caps[r] -= size
                took.append((i, r, size))
            else:
                out[job] = [r for _i, r, _s in sorted(took)]
                break
            for _i, r, size in took:
                caps[r] += size
        else:
            return None
    return out


def _take(p: Racks, r: int, trays: int) -> list[int]:
    """Take ``trays`` whole free trays of rack ``r`` (already counted off ``p.whole``): their numbers."""
    taken = list(itertools.islice((t for t, f in enumerate(p.trays[r]) if f == TRAY_GPUS), trays))
    for t in taken:
        p.trays[r][t] = 0
    return taken


def run(jobs: list[Job], rank: Rank = best, *, order: str = "fifo", protect: bool = False,
        ceiling: bool = False, pool: Racks | None = None, moves: Repack | None = None,
        plain_rule: str = "tightest") -> dict:
    """The trace through the proxy's loop: GPU utilisation over [0, last arrival] (busy GPU time, a
    moved gang's re-run included), goodput (less the work moves threw away), and the pool at the end
    (every job that started has ended by then: the events run out)."""
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
    used = 0
    busy = last = lost = 0.0
    started = repacks = moved = 0
    run_start: dict[int, float] = {}
    ends: dict[int, float] = {}

    def lift(j: int) -> None:
        for r, taken in holding[j][0]:
            for t in taken:
                p.trays[r][t] = TRAY_GPUS
            p.whole[r] += len(taken)
            p.ends[r].remove(ends[j])
            p.sizes[r].remove(len(taken))

    def put(j: int, racks: list[tuple[int, int]], plain_trays: list[tuple[int, int, int]]) -> None:
        for r, k in racks:
            p.ends[r].append(ends[j])
            p.sizes[r].append(k)
        holding[j] = ([(r, _take(p, r, k)) for r, k in racks], plain_trays)

    def move(q: int, now: float) -> list[tuple[int, int]] | None:
        """Place the waiting gang ``q`` by moving running models (``moves``), or None (nothing moved)."""
        nonlocal repacks, moved, lost
        assert moves is not None
        running = sorted((r for r in holding if holding[r][0]), key=lambda r: (-max(
            len(t) for _x, t in holding[r][0]), r))
        units: list[Unit] = [(q, [(s, None) for s in shape[q][0]], zoned[q])]
        units += [(r, [(len(t), x) for x, t in holding[r][0]], zoned[r]) for r in running]
        plan = repack(p, units) or repack(p, units, sticky=False)
        if plan is None:
            return None
        repacks += 1
        movers = [r for r in running if plan[r] != [x for x, _t in holding[r][0]]]
        for r in movers:
            lift(r)
        for r in movers:
            sizes = [len(t) for _x, t in holding[r][0]]
            for x, k in zip(plan[r], sizes, strict=True):
                p.whole[x] -= k
            ran = now - run_start[r]
            kept = ran if moves.mode == "resume" else (ran - ran % moves.every if moves.mode == "checkpoint" else 0.0)
            if kept < ran:  # work since the checkpoint is lost and redone: a new end, the old end's event skipped
                lost += jobs[r].gpus * (min(now, horizon) - min(run_start[r] + kept, horizon))
                run_start[r] = now - kept
                ends[r] = run_start[r] + jobs[r].duration
                heapq.heappush(events, (ends[r], 0, r))
            put(r, list(zip(plan[r], sizes, strict=True)), holding[r][1])
            moved += 1
        racks = list(zip(plan[q], shape[q][0], strict=True))
        for x, k in racks:
            p.whole[x] -= k
        return racks

    while events:
        now, kind, j = heapq.heappop(events)
        end = min(now, horizon)
        if end > last:
            busy += used * (end - last)
            last = end
        if kind == 0:
            if ends.get(j) != now:
                continue  # the end of a run a move replaced
            lift(j)
            release_plain(p, holding.pop(j)[1])
            used -= jobs[j].gpus
        else:
            queue.append(j)
        if sort_key is not None:
            queue = sorted(queue[:WINDOW], key=lambda q: sort_key(jobs[q], now)) + queue[WINDOW:]
        waiting: list[int] = []
        tried = False
        for pos, q in enumerate(queue):
            if pos >= WINDOW or jobs[q].gpus > total - used:
                waiting.append(q)
                continue
            sizes = shape[q][0]
            finish = now + jobs[q].duration
            if sizes:
                guard = protect and not is_large(sizes) and any(
                    is_large(shape[a][0]) and now > jobs[a].arrival for a in queue[:pos])
                racks = place_models(p, sizes, zoned[q], rank, finish, protect=guard, ceiling=ceiling)
                if (racks is None and moves is not None and (moves.for_any or (not tried and is_large(sizes)))
                        and now - jobs[q].arrival >= moves.wait):
                    tried = True
                    racks = move(q, now)
                if racks is None:
                    waiting.append(q)
                    continue
                ends[q] = finish
                put(q, racks, [])
            else:
                trays = place_plain(p, plain[q], PLAIN[plain_rule])
                if trays is None:
                    waiting.append(q)
                    continue
                ends[q] = finish
                holding[q] = ([], trays)
            used += jobs[q].gpus
            started += 1
            run_start[q] = now
            heapq.heappush(events, (finish, 0, q))
        queue = waiting
    return {"gpu_utilisation": busy / (total * horizon), "goodput": (busy - lost) / (total * horizon),
            "started": started, "repacks": repacks, "moved": moved, "pool": p}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.rack_policies", description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=600)
    parser.add_argument("--load", type=float, default=1.0)
    parser.add_argument("--seeds", default="7,8,9,10")
    parser.add_argument("--policies", default="best", help="comma-separated, of " + ", ".join(RANKS))
    parser.add_argument("--orders", default="fifo", help="comma-separated, of " + ", ".join(ORDERS))
    parser.add_argument("--protect", action="store_true",
                        help="smaller models keep off racks with 16+ whole free trays while a large gang waits ahead")
    parser.add_argument("--plain", choices=tuple(PLAIN), default="tightest",
                        help="a plain task's tray among those with the fewest free GPUs: the lowest rack (tightest), "
                        "the rack with the fewest whole trays, or the rack with the most part-used trays")
    parser.add_argument("--repack", choices=("resume", "checkpoint", "restart"), default=None,
                        help="a large gang that waited --repack-wait and does not fit may have every running model "
                        "placed again if it then fits; moved gangs resume (free), go on from their last checkpoint, "
                        "or restart")
    parser.add_argument("--repack-wait", type=float, default=10.0)
    parser.add_argument("--repack-for", choices=("large", "any"), default="large",
                        help="any: every waiting gang with models may have running models moved, each scan")
    parser.add_argument("--checkpoint-every", type=float, default=10.0)
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    moves = (Repack(args.repack, args.repack_wait, args.checkpoint_every, args.repack_for == "any")
             if args.repack else None)
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
            rows = [run(jobs, RANKS[name], order=order, protect=args.protect, moves=moves, plain_rule=args.plain)
                    for jobs in traces]
            mine = [row["gpu_utilisation"] for row in rows]
            good = [row["goodput"] for row in rows]
            loss = [100 * (c - m) for c, m in zip(top, mine, strict=True)]
            extra = {} if moves is None else {
                "repack": {"mode": moves.mode, "wait": moves.wait, "every": moves.every, "for_any": moves.for_any},
                "goodput": [round(100 * g, 1) for g in good], "goodput_mean": round(100 * statistics.fmean(good), 2),
                "goodput_loss_points_mean": round(statistics.fmean(100 * (c - g) for c, g in zip(top, good,
                                                                                                   strict=True)), 2),
                "repacks": [row["repacks"] for row in rows], "moved": [row["moved"] for row in rows]}
            print(json.dumps({
                "load": args.load, "seeds": seeds, "policy": name, "order": order, "protect": args.protect,
                "plain": args.plain,
                "utilisation": [round(100 * m, 1) for m in mine], "mean": round(100 * statistics.fmean(mine), 2),
                "ceiling": [round(100 * c, 1) for c in top], "ceiling_mean": round(100 * statistics.fmean(top), 2),
                "loss_points": [round(x, 1) for x in loss], "loss_points_mean": round(statistics.fmean(loss), 2),
                **extra,
            }))
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
