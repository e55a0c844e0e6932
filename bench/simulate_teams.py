"""Two teams, three priorities, quotas, borrowing and preemption: ``python -m bench.simulate --teams
[--jobs N] [--seeds S,S,...] [--load L] [--grace G]`` (or ``python -m bench.simulate_teams``).

The job mix and pool of :mod:`bench.simulate` (the 1,008-tray NVL72 pool, gangs of 1 to 64 trays with
gpu-clique and zone constraints), each job given a team (``a`` with probability ``--skew``, default
0.75, else ``b``: one busy team, one that leaves part of its share idle) and a priority (HIGH 20%,
NORMAL 40%, LOW 40%). Each team's quota is half the pool's GPUs; HIGH and NORMAL work counts against
it (docs/design.md §9). Offered load ``--load`` (default 1.5 of the pool: more than fits, so that
borrowing and preemption matter). Time unit: the mean job duration is 60.

Policies, all with the same queue as the placement cycle (priority, then arrival; at each event the
queue is scanned in order, at most 64 solver calls, backfill without reservations; a job its team's
quota holds back is skipped without a solve; and the starvation guard: a job that does not fit after
queueing ``--starvation`` (default 10, the service's 600 s if the unit is a minute) keeps the machines
of its placement on the idle pool from the jobs of its priority and below behind it, which are placed
elsewhere or wait):
- ``no-low``: the LOW jobs removed from the trace (the reference wait for HIGH and NORMAL work);
- ``no-quota``: no quotas at all, nothing preempted (the utilisation packing alone allows: the ceiling
  for what borrowing can recover);
- ``no-borrow``: LOW work counts against its team's quota too, nothing is preempted;
- ``borrow``: LOW work may use any idle GPU, nothing is preempted;
- ``borrow+greedy``: borrowing; a HIGH/NORMAL job within its quota that does not fit evicts running
  LOW jobs, the largest first, until it fits (a re-implementation of the greedy victim choice);
- ``borrow+search``: the service: borrowing; victims chosen by
  :func:`scheduler.preemption.victims_choose`; HIGH and NORMAL work packed as if LOW work were not
  there (solved on the pool with every LOW job released first, that placement taken when it is free;
  docs/design.md §9); when it is not free, and the job does not fit the pool as it is, the victims are
  sought near that placement first, as the service does
  (:func:`scheduler.preemption.victims_choose_near`: its machines, then the domains around them,
  then the whole pool; borrowed work reclaimed first). Victims sought on the whole pool at once put
  the preemptor wherever LOW work is cheapest to evict, which spreads HIGH/NORMAL work over racks
  that no-low would leave empty, and the big gangs of the other team then find no free racks;
- ``borrow+search-around``: the same, HIGH and NORMAL work packed around LOW work (the solve on the
  real pool only; what the service did before).
An evicted LOW job goes back to the queue at its original place and restarts from the beginning; its
preemptor holds the machines at once and starts after ``--grace`` (the pods' termination grace period).
``borrow+greedy`` packs around LOW work, as the schedulers it stands for do.

Reported per policy: per priority the mean and p95 wait (jobs never started count until the end);
for HIGH and NORMAL also the *in-quota* wait (``*_in_quota_*``): the time queued while the team's
quota had room for the job, plus the grace period when it preempted (time its own team's quota held
it back is the same with or without LOW work, so this is what LOW work and preemption can change);
GPU utilisation over [0, last arrival] (``gpu_utilisation``, evicted work included), the share of
that spent on work later evicted (``lost_share``) and that work itself (``lost_gpu_time``, GPU x time
unit; ``--fairshare H``: within a priority the team with fewer decayed GPU-time units, half-life H,
goes first, :mod:`scheduler.fairshare`; ``team_a_mean_wait``, ``team_b_mean_wait`` and their ratio
``team_b_over_a_wait`` per team; ``shortest_evicted_run``: how long the youngest victim had run;
``--min-runtime M``: a LOW job that has run less than M is no candidate, the pool's ``min_runtime``,
and (``--wait-first on``, the service) a HIGH/NORMAL job evicts only once it has waited M since it
first did not fit within its quota, its placement without LOW work kept from LOW jobs meanwhile
(docs/design.md §9; ``waited_before_evicting``: jobs that so waited, ``placed_without_evicting``:
jobs that once did not fit within their quota and started without evicting); and (``--window on``,
the service) a NORMAL job then evicts only LOW jobs that have run at most 2 M, and a job that finds
no victims keeps that placement from LOW jobs while it waits (docs/design.md §9, the eviction
window; ``longest_run_evicted_by_normal``: how long the oldest victim of a NORMAL job had run);
``--objective gpus``: the victim search without the work lost, as before it weighed it),
the utilisation by work not evicted
(``goodput``), evictions, GPUs evicted, and ``unneeded``: victim sets with a victim whose eviction
was not needed (the preemptor fits without it on the machines the victims were sought on), checked
by solving.
"""

from __future__ import annotations

import argparse
import heapq
import json
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bench.kit.pools import nvl72_pool
from bench.kit.preemption_instances import greedy, released
from bench.kit.traces import WINDOW, Job, occupy, trace
from scheduler.fairshare import usage_by_team
from scheduler.placement import Placement, solve
from scheduler.placement.types import ClusterSnapshot, GangRequest
from scheduler.preemption import (
    Candidate,
    cordoned,
    eviction_window,
    restricted,
    victims_choose,
    victims_choose_near,
    within_window,
)

PRIORITIES = ("HIGH", "NORMAL", "LOW")
POLICIES = ("no-low", "no-quota", "no-borrow", "borrow", "borrow+greedy", "borrow+search", "borrow+search-around")
Chooser = Callable[[ClusterSnapshot, GangRequest, Sequence[Candidate], float | None], Sequence[str] | None]


@dataclass(frozen=True, slots=True)
class TeamJob:
    job: Job
    team: str
    priority: str


def team_trace(jobs: int, seed: int, total_gpus: int, load: float, skew: float = 0.75) -> list[TeamJob]:
    rng = random.Random(seed * 7919 + 1)
    out = []
    for job in trace(jobs, seed, total_gpus, load):
        x = rng.random()
        priority = "HIGH" if x < 0.2 else "NORMAL" if x < 0.6 else "LOW"
        out.append(TeamJob(job, "a" if rng.random() < skew else "b", priority))
    return out


def _search(snapshot: ClusterSnapshot, group: GangRequest, candidates: Sequence[Candidate],
            now: float | None) -> Sequence[str] | None:
    choice = victims_choose(snapshot, group, candidates, max_solves=64, now=now)
    return None if choice is None else choice.victims


def _greedy(snapshot: ClusterSnapshot, group: GangRequest, candidates: Sequence[Candidate],
            now: float | None) -> Sequence[str] | None:
    choice = greedy(snapshot, group, candidates)
    return None if choice is None else [c.key for c in choice.victims]


def fits_on(snapshot: ClusterSnapshot, group: GangRequest, placement: Placement) -> bool:
    """Whether every machine the placement uses has what it takes free in ``snapshot``."""
    reqs = {t.name: t.resources for t in group.tasks}
    need: dict[str, list[int]] = {}
    for task, machine in placement.assignments:
        acc = need.setdefault(machine, [0, 0, 0, 0])
        for r, v in enumerate(reqs[task].as_tuple()):
            acc[r] += v
    free = {n.name: n.free.as_tuple() for n in snapshot.nodes if n.name in need}
    return all(all(f >= v for f, v in zip(free[m], acc, strict=True)) for m, acc in need.items())


def simulate(policy: str, jobs: list[TeamJob], base: ClusterSnapshot, grace: float = 0.0,
             starvation: float | None = 10.0, min_runtime: float = 0.0, fairshare: float = 0.0,
             objective: str = "work", wait_first: bool = True, window: bool = True) -> dict:
    borrow = policy.startswith("borrow")
    chooser: Chooser | None = {"borrow+greedy": _greedy, "borrow+search": _search,
                               "borrow+search-around": _search}.get(policy)
    absent = policy == "borrow+search"  # protected work packed as if LOW work were not there
    active = [j for j in range(len(jobs)) if not (policy == "no-low" and jobs[j].priority == "LOW")]
    nodes = list(base.nodes)
    index = {n.name: i for i, n in enumerate(nodes)}
    total_gpus = sum(n.free.gpu for n in nodes)
    quota = total_gpus // 2 if policy != "no-quota" else total_gpus
    rank = {p: i for i, p in enumerate(PRIORITIES)}
    events: list[tuple[float, int, int, int]] = [(jobs[j].job.arrival, 1, j, 0) for j in active]  # time, kind, job, run
    heapq.heapify(events)
    queue: list[int] = []
    started: dict[int, float] = {}  # first start
    queued_since: dict[int, float] = {}  # arrival, or the last eviction
    start_of_run: dict[int, float] = {}
    run_id: dict[int, int] = {}
    running: dict[int, Placement] = {}
    use = {"a": 0, "b": 0}  # quota use: HIGH/NORMAL (and LOW too under no-borrow)
    used_gpus = 0
    busy = lost = 0.0
    last = 0.0
    horizon = max(jobs[j].job.arrival for j in active)
    evictions = gpus_evicted = unneeded = searches = 0
    search_ms: list[float] = []
    evicted_runs: list[float] = []  # how long each evicted run had run
    normal_evicted_runs: list[float] = []  # those evicted for NORMAL jobs
    runs: dict[tuple[int, int], list] = {}  # (job, run) -> [team, gpus, start, end]: fair share's usage
    # Wait before evicting (the minimum runtime on, docs/design.md §9): when each protected job first
    # found it could start only by evicting LOW work, and the times at which such waits end (events).
    must_evict_since: dict[int, float] = {}
    wakes: set[float] = set()
    waited_first: set[int] = set()  # jobs that waited before evicting
    avoided = 0  # of those, placed without evicting anything

    def apply(j: int, placement: Placement, sign: int) -> None:
        occupy(nodes, index, jobs[j].job.group, placement, sign)

    def counts(j: int) -> bool:
        return jobs[j].priority != "LOW" or not borrow

    def start(j: int, placement: Placement, now: float, evicting: bool = False) -> None:
        nonlocal used_gpus, avoided
        apply(j, placement, 1)
        used_gpus += jobs[j].job.gpus
        if counts(j):
            use[jobs[j].team] += jobs[j].job.gpus
        started.setdefault(j, now)
        start_of_run[j] = now
        run_id[j] = run_id.get(j, 0) + 1
        runs[j, run_id[j]] = [jobs[j].team, jobs[j].job.gpus, now, None]
        running[j] = placement
        if must_evict_since.pop(j, None) is not None and not evicting:
            avoided += 1
        heapq.heappush(events, (now + jobs[j].job.duration, 0, j, run_id[j]))

    def stop(j: int) -> None:
        nonlocal used_gpus
        runs[j, run_id[j]][3] = last_event
        apply(j, running.pop(j), -1)
        used_gpus -= jobs[j].job.gpus
        if counts(j):
            use[jobs[j].team] -= jobs[j].job.gpus

    def candidates(now: float) -> list[Candidate]:
        # borrowing: per team, its HIGH/NORMAL use, then its LOW jobs in start order; a LOW job that
        # has run less than ``min_runtime`` is no candidate (the pool's minimum runtime)
        low = sorted((start_of_run[j], j) for j in running if jobs[j].priority == "LOW"
                     and now - start_of_run[j] >= min_runtime)
        level = dict(use)
        out = []
        for began, j in low:
            reqs = {t.name: t.resources for t in jobs[j].job.group.tasks}
            level[jobs[j].team] += jobs[j].job.gpus
            out.append(Candidate(str(j), tuple((m, reqs[t]) for t, m in running[j].assignments),
                                 level[jobs[j].team] > quota, began))
        return out

    def needless(snapshot: ClusterSnapshot, group: GangRequest, cands: list[Candidate], chosen: set[str]) -> bool:
        by_key = {c.key: c for c in cands}
        for key in chosen:
            rest = [by_key[k] for k in chosen if k != key]
            if isinstance(solve(released(snapshot, rest), group), Placement):
                return True
        return False

    def view(kept: frozenset[str]) -> ClusterSnapshot:
        """The pool as a job sees it: the machines kept for a starving job taken out when it is held."""
        return cordoned(ClusterSnapshot(base.pool, base.keys, tuple(nodes)), kept)

    def reserve(tj: TeamJob) -> frozenset[str]:
        """The machines kept for a starving job: those of its placement on the idle pool."""
        target = solve(base, tj.job.group)
        return target.nodes if isinstance(target, Placement) else frozenset(index)

    def guard(q: int, now: float, starving: int | None) -> int | None:
        """The starvation guard: a job that did not fit after waiting ``starvation`` holds back its rank."""
        if starvation is not None and starving is None and now - queued_since[q] > starvation:
            return rank[jobs[q].priority]
        return starving

    # HIGH/NORMAL time spent queued while their team's quota had room for them (what LOW work and
    # preemption can change; time held back by the team's own quota is the same with or without LOW work)
    in_quota: dict[int, float] = {}
    last_event = 0.0
    admissible: list[int] = []
    since = 0.0
    while events:
        now, kind, j, run = heapq.heappop(events)
        last_event = now
        for q in admissible:
            in_quota[q] = in_quota.get(q, 0.0) + (now - since)
        since = now  # before any skipped event (an evicted run's end), or its interval counts twice
        end = min(now, horizon)
        if end > last:
            busy += used_gpus * (end - last)
            last = end
        if kind == 2:
            pass  # a wait before evicting ends: the queue is scanned again
        elif kind == 0:
            if j not in running or run != run_id[j]:
                continue  # the run was evicted
            stop(j)
        else:
            queue.append(j)
            queued_since[j] = now
        if fairshare > 0:  # within a priority, the team that used less recently first (scheduler.fairshare)
            usage = usage_by_team(runs.values(), now, fairshare)
            queue.sort(key=lambda q: (rank[jobs[q].priority], usage.get(jobs[q].team, 0.0), jobs[q].job.arrival))
        else:
            queue.sort(key=lambda q: (rank[jobs[q].priority], jobs[q].job.arrival))
        waiting: list[int] = []
        solves = 0  # the window bounds solver calls: a job its team's quota holds back costs none
        starving: int | None = None  # the starvation guard: the rank held back from here on
        blocked: frozenset[str] = frozenset()
        kept_from_low: set[str] = set()  # the machines of protected jobs waiting before they evict
        for q in queue:
            tj = jobs[q]
            if solves >= WINDOW or (counts(q) and use[tj.team] + tj.job.gpus > quota):
                waiting.append(q)
                continue
            held = starving is not None and rank[tj.priority] >= starving
            solves += 1
            kept = blocked if held else frozenset()
            if kept_from_low and tj.priority == "LOW":
                kept = kept | kept_from_low
            snapshot = view(kept)
            there: frozenset[str] | None = None  # the machines of its placement as if LOW work were absent
            if absent and tj.priority != "LOW":
                low = candidates(now)
                if low:
                    first = solve(released(snapshot, low), tj.job.group)
                    if isinstance(first, Placement):
                        if fits_on(snapshot, tj.job.group, first):
                            start(q, first, now)
                            continue
                        there = first.nodes
            result = solve(snapshot, tj.job.group)
            if isinstance(result, Placement):
                start(q, result, now)
                continue
            if wait_first and min_runtime > 0 and tj.priority != "LOW":
                blocked_at = must_evict_since.setdefault(q, now)  # it first did not fit within its quota
            if wait_first and min_runtime > 0 and there is not None:
                # It starts only by evicting LOW work: it evicts once it has waited the minimum runtime
                # within its quota; meanwhile its placement without LOW work is kept from LOW jobs
                # (what frees there stays free for it).
                if now < blocked_at + min_runtime:
                    waiting.append(q)
                    kept_from_low |= there
                    waited_first.add(q)
                    if blocked_at not in wakes:
                        wakes.add(blocked_at)
                        heapq.heappush(events, (blocked_at + min_runtime, 2, -1, 0))
                    continue
            cands = candidates(now) if chooser is not None and tj.priority != "LOW" else []
            if window:  # NORMAL work evicts only LOW work young enough (docs/design.md §9)
                cands = within_window(cands, now, eviction_window(tj.priority == "NORMAL", min_runtime))
            keep = there  # its placement without LOW work, kept from LOW jobs while it waits
            chosen: Sequence[str] | None = None
            region = snapshot
            if cands:
                assert chooser is not None
                began = time.perf_counter()
                # The service's search near where the job would go without LOW work (its placement
                # there, then the domains around it), the reclaim rule first (scheduler.preemption.near).
                clock = now if objective == "work" else None  # "gpus": the objective without work lost
                if there is not None and chooser is _search:
                    near, there = victims_choose_near(snapshot, tj.job.group, cands, there, max_solves=64,
                                                      now=clock)
                    chosen = None if near is None else near.victims
                    region = snapshot if there is None else restricted(snapshot, there)
                else:
                    there = None
                    chosen = chooser(snapshot, tj.job.group, cands, clock)
                search_ms.append((time.perf_counter() - began) * 1000)
                searches += 1
            if chosen is None:
                waiting.append(q)
                if window and wait_first and min_runtime > 0 and keep is not None:
                    kept_from_low |= keep
                if starving is None:
                    starving = guard(q, now, starving)
                    if starving is not None:
                        blocked = reserve(tj)
                continue
            chosen_set = set(chosen)
            if len(chosen_set) > 1 and needless(region, tj.job.group, cands, chosen_set):
                unneeded += 1
            for key in chosen_set:
                v = int(key)
                lost += jobs[v].job.gpus * max(0.0, min(now, horizon) - min(start_of_run[v], horizon))
                evicted_runs.append(now - start_of_run[v])
                if tj.priority == "NORMAL":
                    normal_evicted_runs.append(now - start_of_run[v])
                gpus_evicted += jobs[v].job.gpus
                evictions += 1
                stop(v)
                waiting.append(v)
                queued_since[v] = now
            placement = solve(view(kept) if there is None else restricted(view(kept), there), tj.job.group)
            assert isinstance(placement, Placement), "victims chosen but the preemptor does not fit"
            # The victims' pods get the grace period to stop: the preemptor holds its machines at
            # once but starts (and its wait ends) only when the grace period is over.
            start(q, placement, now + grace, evicting=True)
            in_quota[q] = in_quota.get(q, 0.0) + grace
        queue = waiting
        admissible = [q for q in queue if jobs[q].priority != "LOW" and use[jobs[q].team] + jobs[q].job.gpus <= quota]
    end_time = last if not queue else horizon
    row: dict = {"scenario": "teams-1k", "policy": policy, "jobs": len(active), "total_gpus": total_gpus,
                 "quota_per_team": quota}
    for priority in PRIORITIES:
        waits = sorted(started[j] - jobs[j].job.arrival if j in started else max(0.0, end_time - jobs[j].job.arrival)
                       for j in active if jobs[j].priority == priority)
        if waits:
            row[f"{priority.lower()}_mean_wait"] = round(statistics.fmean(waits), 2)
            row[f"{priority.lower()}_p95_wait"] = round(waits[int(0.95 * (len(waits) - 1))], 2)
            row[f"{priority.lower()}_never_started"] = sum(1 for j in active if jobs[j].priority == priority
                                                           and j not in started)
        if priority != "LOW" and waits:
            held = sorted(in_quota.get(j, 0.0) for j in active if jobs[j].priority == priority)
            row[f"{priority.lower()}_in_quota_mean_wait"] = round(statistics.fmean(held), 2)
            row[f"{priority.lower()}_in_quota_p95_wait"] = round(held[int(0.95 * (len(held) - 1))], 2)
    for team in ("a", "b"):
        waits = [started[j] - jobs[j].job.arrival if j in started else max(0.0, end_time - jobs[j].job.arrival)
                 for j in active if jobs[j].team == team]
        row[f"team_{team}_mean_wait"] = round(statistics.fmean(waits), 2) if waits else None
    if row["team_a_mean_wait"]:
        row["team_b_over_a_wait"] = round(row["team_b_mean_wait"] / row["team_a_mean_wait"], 3)
    # a self-check: the in-quota wait is part of the wait (jobs never started: up to the end)
    row["in_quota_beyond_wait"] = sum(
        1 for j in in_quota
        if in_quota[j] > (started[j] if j in started else max(end_time, last)) - jobs[j].job.arrival + 1e-6)
    row.update({
        "gpu_utilisation": round(busy / (total_gpus * horizon), 4),
        "lost_share": round(lost / busy, 4) if busy else 0.0,
        "lost_gpu_time": round(lost, 1),  # GPU x time unit of evicted runs (GPU-minutes if the unit is a minute)
        "shortest_evicted_run": round(min(evicted_runs), 2) if evicted_runs else None,
        "longest_run_evicted_by_normal": round(max(normal_evicted_runs), 2) if normal_evicted_runs else None,
        "goodput": round((busy - lost) / (total_gpus * horizon), 4),
        "evictions": evictions, "gpus_evicted": gpus_evicted, "waited_before_evicting": len(waited_first),
        "placed_without_evicting": avoided, "searches": searches, "unneeded": unneeded,
        "search_p50_ms": round(statistics.median(search_ms), 1) if search_ms else None,
        "search_max_ms": round(max(search_ms), 1) if search_ms else None,
    })
    return row


def summary(rows: list[dict], grace: float) -> dict:
    """Per seed and on average: what borrowing adds to utilisation over ``no-borrow`` (each borrowing
    policy), and whether HIGH and NORMAL in-quota waits under each preemption policy stay within
    ``no-low``'s plus the grace period (mean and p95)."""
    by = {(r["seed"], r["policy"]): r for r in rows}
    seeds = sorted({r["seed"] for r in rows})
    out: dict = {"summary": "teams", "seeds": seeds, "grace": grace}
    for policy in ("no-quota", "borrow", "borrow+greedy", "borrow+search", "borrow+search-around"):
        gains = [by[s, policy]["gpu_utilisation"] - by[s, "no-borrow"]["gpu_utilisation"]
                 for s in seeds if (s, policy) in by and (s, "no-borrow") in by]
        if gains:
            out[f"{policy}_points_over_no_borrow"] = [round(100 * g, 1) for g in gains]
            out[f"{policy}_points_over_no_borrow_mean"] = round(100 * statistics.fmean(gains), 1)
    for policy in ("borrow+greedy", "borrow+search", "borrow+search-around"):
        within = []
        for s in seeds:
            if (s, policy) not in by or (s, "no-low") not in by:
                continue
            row, ref = by[s, policy], by[s, "no-low"]
            within += [row[f"{p}_in_quota_{m}_wait"] <= ref[f"{p}_in_quota_{m}_wait"] + grace + 1e-9
                       for p in ("high", "normal") for m in ("mean", "p95")]
        if within:
            out[f"{policy}_in_quota_waits_within_no_low_plus_grace"] = f"{sum(within)}/{len(within)}"
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.simulate --teams", description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=600)
    parser.add_argument("--seeds", default="7,8,9,10",
                        help="comma-separated trace seeds (default: the four of docs/benchmarks.md)")
    parser.add_argument("--load", type=float, default=1.5)
    parser.add_argument("--skew", type=float, default=0.75, help="share of the jobs that are team a's")
    parser.add_argument("--grace", type=float, default=0.5,
                        help="eviction grace period in the trace's time unit (mean job 60: 0.5 is 30 s of an hour)")
    parser.add_argument("--starvation", type=float, default=10.0,
                        help="the starvation guard's wait in the trace's time unit (the service's 600 s); 0: off")
    parser.add_argument("--min-runtime", type=float, default=0.0,
                        help="the pool's minimum runtime in the trace's time unit: a LOW job that has run less "
                        "is no preemption candidate (0: off)")
    parser.add_argument("--fairshare", type=float, default=0.0,
                        help="fair share's half-life in the trace's time unit: within a priority, the team that "
                        "used fewer decayed GPU-time units goes first (0: off, arrival order)")
    parser.add_argument("--objective", choices=("work", "gpus"), default="work",
                        help="the victim search's objective: work lost weighed (the service) or, as before "
                        "it was, GPUs alone")
    parser.add_argument("--wait-first", choices=("on", "off"), default="on",
                        help="with a minimum runtime: a HIGH/NORMAL job that starts only by evicting LOW work "
                        "first waits up to the minimum runtime, its machines kept from LOW work (the service); "
                        "off: it evicts at once")
    parser.add_argument("--window", choices=("on", "off"), default="on",
                        help="with a minimum runtime M and --wait-first on: NORMAL jobs evict only LOW jobs that "
                        "have run at most 2 M, and a job that finds no victims keeps its placement without LOW "
                        "work from LOW jobs while it waits (the service); off: the rule before it")
    parser.add_argument("--policies", default=",".join(POLICIES))
    args = parser.parse_args(argv)
    rows = []
    for seed in (int(s) for s in args.seeds.split(",")):
        base = nvl72_pool(2, 4, 7, occupancy=0.0, seed=seed)
        total = sum(n.free.gpu for n in base.nodes)
        jobs = team_trace(args.jobs, seed, total, args.load, args.skew)
        for policy in args.policies.split(","):
            print(f"simulate --teams: seed {seed}, {policy} ...", file=sys.stderr)
            began = time.perf_counter()
            row = simulate(policy, jobs, base, args.grace, args.starvation or None, args.min_runtime,
                           args.fairshare, args.objective, args.wait_first == "on", args.window == "on")
            row.update({"load": args.load, "skew": args.skew, "seed": seed, "grace": args.grace,
                        "starvation": args.starvation, "min_runtime": args.min_runtime,
                        "fairshare": args.fairshare, "objective": args.objective,
                        "wait_first": args.wait_first == "on", "window": args.window == "on",
                        "seconds": round(time.perf_counter() - began, 1)})
            rows.append(row)
            print(json.dumps(row))
            sys.stdout.flush()
    print(json.dumps(summary(rows, args.grace)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
