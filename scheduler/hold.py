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
placement found there is the one that can start soonest, and its machines are free by ``T``.

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
    GangRequest,
    NodeState,
    Placement,
    Policy,
    Resources,
    Unplaceable,
    solve,
)

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


def _placement_by(snapshot: ClusterSnapshot, gang: GangRequest, by_end: Sequence[Holder], count: int,
                  policy: Policy, solver: Solver) -> Placement | None:
    outcome = solver(released(snapshot, by_end[:count]), gang, policy)
    return outcome if isinstance(outcome, Placement) else None


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
    lo, hi = 0, len(times) - 1
    found: Placement | None = None
    found_at = -1
    while lo <= hi:
        mid = (lo + hi) // 2
        placement = _placement_by(snapshot, gang, by_end, bisect.bisect_right(ends, times[mid]), policy, solver)
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
