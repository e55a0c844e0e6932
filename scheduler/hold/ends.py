"""The starvation guard's hold by expected end (docs/design.md §6), pure: where a starving gang can
start soonest, judged by when the gangs holding the machines must end, and EASY backfill's rule for
the machines kept for it. No framework here; the placement cycle and ``bench.simulate --hold`` feed
it values.

A running gang's *expected end* (:func:`expected_end`) is its start (its placement, while it has
not started) plus its ``exec_timeout`` when it has one (it is stopped then at the latest: the time
is a bound); without one, it is estimated to run as long again as it has run so far (its start plus
twice its age: the older a gang, the longer it is expected to go on; the estimate is no bound).

The hold (:func:`soonest_hold`): for each candidate time ``T`` (the distinct expected ends, in order),
the snapshot with every gang that ends by ``T`` released. Feasibility is monotone in ``T`` (releasing
more gangs only adds room) and :func:`~scheduler.placement.solve` is complete, so a binary search
over the sorted ends finds the first ``T`` at which the gang fits in about ``log2(n)`` solves; the
placement found there is the one that can start soonest, and its machines are free by ``T``. The
search starts at a capacity bound (:func:`_capacity_bound`: the first ``T`` at which the domains the
gang's constraints need have its request free at all, summed per domain), which is often the answer
itself (one solve), and moves one domain index between its probes rather than building one per probe.

Backfill (:func:`may_backfill`): a gang behind the starving one may use the kept machines only when
it will have ended by ``T`` (now plus its ``exec_timeout``); a gang without a timeout may not, since
nothing bounds how long it would delay the starving gang.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from scheduler.placement import (
    ClusterSnapshot,
    DomainIndex,
    GangRequest,
    NodeState,
    Placement,
    Policy,
    Resources,
    Unplaceable,
    solve,
)
from topology.tree import TreeNode

#: A complete placement function (every gang it calls unplaceable does not fit): ``solve`` in the
#: service; the benchmarks also pass the topology-free ceiling of ``bench.simulate``.
Solver = Callable[[ClusterSnapshot, GangRequest, Policy], Placement | Unplaceable]


@dataclass(frozen=True, slots=True)
class Holder:
    """A running gang as the hold sees it: what it holds (machine, resources) and when it ends."""

    key: str
    holdings: tuple[tuple[str, Resources], ...]
    ends: float  # epoch seconds (:func:`expected_end`)
    bounded: bool  # ``ends`` is its exec_timeout (a bound), not an estimate


@dataclass(frozen=True, slots=True)
class SoonestHold:
    """Where the starving gang starts soonest: its placement there, the time ``free_by`` at which the
    gangs on those machines have ended, and those gangs (their keys)."""

    placement: Placement
    free_by: float  # epoch seconds
    waits_for: tuple[str, ...]  # the running gangs on the placement's machines that end by ``free_by``
    bounded: bool  # every one of them ends by its exec_timeout: ``free_by`` is a bound ("at the latest")

    @property
    def machines(self) -> frozenset[str]:
        return self.placement.nodes


def expected_end(started: float, now: float, exec_timeout_s: float | None) -> tuple[float, bool]:
    """When a gang started at ``started`` ends: ``(started + exec_timeout, True)`` with a timeout (a
    bound), else ``(started + 2 * (now - started), False)`` (it runs as long again as it has so far;
    an estimate). Times in seconds."""
    if exec_timeout_s is not None:
        return started + exec_timeout_s, True
    return started + 2 * max(0.0, now - started), False


class HoldsCapacity(Protocol):
    """A gang as far as giving back its capacity goes: a :class:`Holder`, or a preemption candidate."""

    @property
    def holdings(self) -> tuple[tuple[str, Resources], ...]: ...


def released(snapshot: ClusterSnapshot, gangs: Sequence[HoldsCapacity]) -> ClusterSnapshot:
    """``snapshot`` with what ``gangs`` hold given back (machines outside the snapshot ignored)."""
    extra: dict[str, list[int]] = {}
    for gang in gangs:
        for name, res in gang.holdings:
            acc = extra.setdefault(name, [0, 0, 0, 0])
            for i, v in enumerate(res.as_tuple()):
                acc[i] += v
    if not extra:
        return snapshot
    nodes = []
    for node in snapshot.nodes:
        more = extra.get(node.name)
        if more is not None:
            f = node.free
            node = NodeState(node.name, node.labels,
                             Resources(f.gpu + more[0], f.cpu + more[1], f.memory + more[2], f.storage + more[3]),
                             node.schedulable)
        nodes.append(node)
    return ClusterSnapshot(snapshot.pool, snapshot.keys, tuple(nodes))


class _Probe:
    """One :class:`~scheduler.placement.DomainIndex` of the pool moved along the search: before each
    solve the gangs ending by the candidate time are given back on it, or taken again, by the
    difference from the last probe (the index equals a fresh build on ``released(snapshot, ...)``;
    building a snapshot and an index per probe cost about as much as the solve itself)."""

    def __init__(self, index: DomainIndex, gang: GangRequest, by_end: Sequence[Holder], policy: Policy,
                 snapshot: ClusterSnapshot, solver: Solver) -> None:
        self.index, self.gang, self.by_end, self.policy, self.at = index, gang, by_end, policy, 0
        self.snapshot, self.solver = snapshot, solver

    def _held(self, first: int, last: int) -> list[tuple[str, tuple[int, int, int, int]]]:
        """What gangs ``first``..``last - 1`` hold on the pool's machines (others ignored, as
        :func:`released` does)."""
        nodes = self.index.nodes
        return [(name, res.as_tuple()) for g in self.by_end[first:last] for name, res in g.holdings if name in nodes]

    def placement(self, count: int) -> Placement | None:
        """The gang's placement with the first ``count`` gangs (by end) ended, or None. Another solver
        than ``solve`` is asked on a snapshot built for the probe."""
        if self.solver is not solve:
            outcome = self.solver(released(self.snapshot, self.by_end[:count]), self.gang, self.policy)
            return outcome if isinstance(outcome, Placement) else None
        if count > self.at:
            self.index.release(self._held(self.at, count))
        elif count < self.at:
            self.index.place(self._held(count, self.at))
        self.at = count
        outcome = solve(self.index, self.gang, self.policy)
        return outcome if isinstance(outcome, Placement) else None


Domain = tuple[str, ...]
NEVER = float("inf")


class _Capacity:
    """What the pool's domains have free now and get back as the running gangs end (in end order):
    the facts :func:`_capacity_bound` reads, from the pool's index before anything is released on it:
    each finest domain's free capacity is summed from its classes of machines, each level's domains
    rolled up from those sums."""

    def __init__(self, index: DomainIndex, by_end: Sequence[Holder]) -> None:
        self.by_end, self.index = by_end, index
        self.leaf_free: dict[Domain, list[int]] = {}
        for d, classes in enumerate(index.classes):
            for (free, _special), names in classes.items():
                acc = self.leaf_free.setdefault(index.path[d], [0, 0, 0, 0])
                for i, v in enumerate(free):
                    acc[i] += v * len(names)
        self._paths: dict[str, Domain | None] = {}
        self._up: dict[int, dict[Domain, Domain | None]] = {}
        self._reach: dict[tuple[int, tuple[int, ...]], dict[Domain, float]] = {}
        self._most: dict[int, list[list[int]]] = {}

    def path(self, name: str) -> Domain | None:
        """The machine's domain path as the index has it (None: not in the pool, or cordoned)."""
        if name not in self._paths:
            node = self.index.nodes.get(name)
            if node is None or not node.schedulable:
                self._paths[name] = None
            else:
                labels = node.labels[:len(self.index.keys)]
                cut = labels.index(None) if None in labels else len(labels)
                self._paths[name] = tuple(label for label in labels[:cut] if label is not None)
        return self._paths[name]

    def up(self, level: int) -> dict[Domain, Domain | None]:
        """Each domain path's domain at ``level`` (-1: the whole pool, ``()``; None: it has none)."""
        found = self._up.get(level)
        if found is None:
            found = self._up[level] = {path: path[:level + 1] if len(path) > level else None
                                       for path in self.leaf_free}
        return found

    def domains(self, level: int) -> set[Domain]:
        return {d for d in self.up(level).values() if d is not None}

    def _rolled(self, level: int, sums: dict[Domain, list[int]]) -> dict[Domain, list[int]]:
        out: dict[Domain, list[int]] = {}
        for path, d in self.up(level).items():
            if d is not None:
                acc = out.setdefault(d, [0, 0, 0, 0])
                for i, v in enumerate(sums.get(path, (0, 0, 0, 0))):
                    acc[i] += v
        return out

    def reach(self, level: int, need: tuple[int, ...]) -> dict[Domain, float]:
        """For each domain at ``level``, how many gangs (in end order) must end before it has ``need``
        free (0: now; :data:`NEVER`: not even when all have)."""
        known = self._reach.get((level, need))
        if known is not None:
            return dict(known)
        up = self.up(level)
        free = self._rolled(level, self.leaf_free)
        out: dict[Domain, float] = {d: 0 if _covers(acc, need) else NEVER for d, acc in free.items()}
        waiting = sum(1 for v in out.values() if v)
        for position, gang in enumerate(self.by_end):
            if not waiting:
                break
            for name, res in gang.holdings:
                path = self.path(name)
                d = None if path is None else up.get(path)
                if d is None or out[d] != NEVER:
                    continue
                acc = free[d]
                for i, v in enumerate(res.as_tuple()):
                    acc[i] += v
                if _covers(acc, need):
                    out[d], waiting = position + 1, waiting - 1
        self._reach[level, need] = out
        return dict(out)

    def most(self, level: int) -> list[list[int]]:
        """Each domain's capacity at ``level`` with every gang ended."""
        known = self._most.get(level)
        if known is None:
            total = {path: list(acc) for path, acc in self.leaf_free.items()}
            for gang in self.by_end:
                for name, res in gang.holdings:
                    path = self.path(name)
                    if path is not None:
                        acc = total.setdefault(path, [0, 0, 0, 0])
                        for i, v in enumerate(res.as_tuple()):
                            acc[i] += v
            known = self._most[level] = list(self._rolled(level, total).values())
        return known


def _covers(free: Sequence[int], need: Sequence[int]) -> bool:
    return all(f >= n for f, n in zip(free, need, strict=True))


def _capacity_bound(capacity: _Capacity, gang: GangRequest) -> int | None:
    """How many of ``by_end`` (in end order) must have ended, at least, before ``gang`` can fit, by
    capacity alone (a necessary condition, never more than the true count). None: not even with every
    gang ended. Cheap beside a solve, it is where the search starts, and often the answer.

    Each required constraint node (and the pool, for the whole gang) needs a domain of its key with
    the request of its tasks free, summed over the domain's machines. When ``k`` required children
    of a node (or of the tree's root) constrain one finer key, and no domain of that key could ever
    hold two of them (its capacity is below twice the smallest child's request in some resource),
    they need ``k`` distinct such domains inside the node's domain, each with that smallest request
    free: the node's domain is ready no earlier than its ``k``-th subdomain is (the pattern of a job
    of several NVL72 cliques in one zone)."""
    requests = {task.name: task.resources.as_tuple() for task in gang.tasks}
    levels = {key: i for i, key in enumerate(capacity.index.keys)}

    def total(names: Sequence[str]) -> tuple[int, ...]:
        return tuple(sum(requests[name][i] for name in names if name in requests) for i in range(4))

    def ready(level: int, need: tuple[int, ...], children: Sequence[TreeNode]) -> float:
        """When some domain at ``level`` can first hold a node of request ``need`` with these children."""
        when = capacity.reach(level, need) if any(need) else dict.fromkeys(capacity.domains(level), 0.0)
        by_level: dict[int, list[tuple[int, ...]]] = {}
        for child in children:
            if child.required and levels.get(child.key, -1) > level:
                by_level.setdefault(levels[child.key], []).append(total(child.all_tasks()))
        for sub, needs in by_level.items():
            least = tuple(min(n[i] for n in needs) for i in range(4))
            shared = any(all(c >= 2 * n for c, n in zip(most, least, strict=True))
                         for most in capacity.most(sub))
            if len(needs) < 2 or shared or not any(least):
                continue  # one child, or two may share a domain: no more than the capacity above
            inside: dict[Domain, list[float]] = {}
            for d, at in capacity.reach(sub, least).items():
                inside.setdefault(d[:level + 1], []).append(at)
            for d in when:
                ats = sorted(inside.get(d, []))
                when[d] = max(when[d], ats[len(needs) - 1] if len(ats) >= len(needs) else NEVER)
        return min(when.values(), default=NEVER)

    bound = ready(-1, total(list(requests)), gang.tree.children)
    for constraint in gang.tree.nodes():
        if constraint.required and constraint.key in levels:
            bound = max(bound, ready(levels[constraint.key], total(constraint.all_tasks()), constraint.children))
    return None if bound == NEVER else int(bound)


def soonest_hold(snapshot: ClusterSnapshot, gang: GangRequest, running: Sequence[Holder],
                 policy: Policy | None = None, solver: Solver = solve) -> SoonestHold | None:
    """The placement where ``gang`` can start soonest on ``snapshot`` (the pool now) as the
    ``running`` gangs end, and by when its machines are free (see the module docstring). None when it
    does not fit even with every running gang ended. A gang that fits now is given the first end.
    ``solver`` must be complete for the binary search to be exact (``solve`` is)."""
    policy = policy or Policy()
    by_end = sorted(running, key=lambda g: (g.ends, g.key))
    ends = [g.ends for g in by_end]
    times = sorted(set(ends))
    if not times:
        return None
    # The first candidate time at which the gang fits: each time releases every gang ending by it.
    # None fits before the capacity bound; the time it gives is tried first (often the answer).
    excluded = frozenset().union(*(task.nodes_excluded for task in gang.tasks))
    index = DomainIndex(snapshot, excluded & {node.name for node in snapshot.nodes} if excluded else frozenset())
    # (the bound reads the gang's constraints: it holds for ``solve``, not for a solver ignoring them)
    bound = _capacity_bound(_Capacity(index, by_end), gang) if solver is solve else 0
    if bound is None:
        return None
    counts = [bisect.bisect_right(ends, t) for t in times]
    lo, hi = bisect.bisect_left(counts, bound), len(times) - 1
    probe = _Probe(index, gang, by_end, policy, snapshot, solver)
    found: Placement | None = probe.placement(counts[lo])
    found_at = lo if found is not None else -1
    if found is None:
        lo += 1
    else:
        hi = lo - 1
    while lo <= hi:
        mid = (lo + hi) // 2
        placement = probe.placement(counts[mid])
        if placement is not None:
            found, found_at, hi = placement, mid, mid - 1
        else:
            lo = mid + 1
    if found is None:  # not even with every running gang ended
        return None
    free_by = times[found_at]
    machines = found.nodes
    waits_for = [g for g in by_end[:bisect.bisect_right(ends, free_by)]
                 if any(name in machines for name, _res in g.holdings)]
    return SoonestHold(found, free_by, tuple(g.key for g in waits_for), all(g.bounded for g in waits_for))


def where(snapshot: ClusterSnapshot, machines: frozenset[str]) -> str:
    """The machines as people name them: the smallest topology domain holding them all, with the one
    above it ("rack r7 (gpu-clique r7-nvl), 18 machines"), or their count when no domain does."""
    labels = [node.labels for node in snapshot.nodes if node.name in machines]
    count = f"{len(labels)} machine{'' if len(labels) == 1 else 's'}"
    common = 0
    while labels and common < len(snapshot.keys) and labels[0][common] is not None and all(
            row[:common + 1] == labels[0][:common + 1] for row in labels):
        common += 1
    if common == 0:
        return count
    inner = f"{snapshot.keys[common - 1]} {labels[0][common - 1]}"
    if common == 1:
        return f"{inner}, {count}"
    return f"{snapshot.keys[common - 2]} {labels[0][common - 2]} ({inner}), {count}"


def may_backfill(now: float, exec_timeout_s: float | None, free_by: float | None) -> bool:
    """EASY backfill's rule: a gang behind the starving one may use the machines kept for it only if
    it will have ended (``now`` plus its ``exec_timeout``) by ``free_by``; never without a timeout,
    nor when the hold has no such time."""
    return exec_timeout_s is not None and free_by is not None and now + exec_timeout_s <= free_by
