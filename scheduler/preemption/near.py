"""Victims sought near where the preemptor would go without LOW work (docs/design.md §9).

The cycle packs HIGH and NORMAL work as if LOW work were not there. When that placement is not free,
the LOW work in its way is what to evict: sought on the whole pool at once, the cheapest victims put
the preemptor wherever LOW work is cheapest to evict, which spreads protected work over domains that
would stay whole without LOW work, and a big protected gang then finds them fragmented.

:func:`victims_choose_near` searches the machines of that placement first, then the domains that hold
them, finest key first, and the whole pool last; the first region with a victim set is taken, unless
the whole pool's choice reclaims borrowed work and evicts less work within its team's quota: the
reclaim rule comes before packing (fewer GPUs alone do not move the preemptor away). Each search is
:func:`~scheduler.preemption.search.victims_choose`, so completeness holds: the whole pool is
searched whenever no region has a set. The regions share one solve budget, the whole pool has its
own; each search after the first looks only below the GPUs within quota that could still be taken
(its ``ceiling``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import replace

from scheduler.placement import ClusterSnapshot, GangRequest, Policy
from scheduler.preemption.feasibility import Budget, BudgetSpent
from scheduler.preemption.search import DEFAULT_MAX_SOLVES, victims_choose
from scheduler.preemption.types import Candidate, VictimChoice


def regions_around(snapshot: ClusterSnapshot, machines: frozenset[str]) -> list[frozenset[str]]:
    """``machines``, then every machine of the domains holding them, finest key first (each region
    once; the coarsest is the machines' top-level domains, not the whole pool)."""
    labels = {node.name: node.labels for node in snapshot.nodes}
    paths = {labels[name] for name in machines if name in labels}
    regions = [machines]
    for level in range(len(snapshot.keys) - 1, -1, -1):
        prefixes = {path[:level + 1] for path in paths}
        region = frozenset(node.name for node in snapshot.nodes if node.labels[:level + 1] in prefixes)
        if region != regions[-1]:
            regions.append(region)
    return regions


def restricted(snapshot: ClusterSnapshot, machines: frozenset[str]) -> ClusterSnapshot:
    """``snapshot`` with every machine outside ``machines`` unschedulable."""
    return replace(snapshot, nodes=tuple(node if node.name in machines else replace(node, schedulable=False)
                                         for node in snapshot.nodes))


def within(snapshot: ClusterSnapshot, machines: frozenset[str]) -> ClusterSnapshot:
    """``snapshot`` with only the machines of ``machines``: to the victim search the same pool as
    :func:`restricted`'s (the others are in no placement and release nothing usable), smaller."""
    return replace(snapshot, nodes=tuple(node for node in snapshot.nodes if node.name in machines))


def cordoned(snapshot: ClusterSnapshot, machines: frozenset[str]) -> ClusterSnapshot:
    """``snapshot`` with the machines of ``machines`` unschedulable (kept for a starving gang)."""
    return replace(snapshot, nodes=tuple(replace(node, schedulable=False) if node.name in machines else node
                                         for node in snapshot.nodes))


def within_quota_gpu(candidates: Mapping[str, Candidate], victims: Sequence[str]) -> int:
    """GPUs the victims hold that are LOW work within its team's quota (not borrowing)."""
    return sum(candidates[key].gpu for key in victims if not candidates[key].borrowing)


def reclaims_instead(candidates: Mapping[str, Candidate], other: Sequence[str], victims: Sequence[str]) -> bool:
    """Whether ``other`` evicts borrowed work and less work within its quota than ``victims``."""
    borrowed = any(candidates[key].borrowing for key in other)
    return borrowed and within_quota_gpu(candidates, other) < within_quota_gpu(candidates, victims)


def within_quota_at_least(snapshot: ClusterSnapshot, preemptor: GangRequest, candidates: Sequence[Candidate],
                          machines: frozenset[str]) -> int:
    """A lower bound on the GPUs within quota any victim set placing the preemptor on ``machines``
    evicts: the GPUs it needs beyond what is free there and what borrowing gangs hold there."""
    free = sum(max(0, node.free.gpu) for node in snapshot.nodes if node.schedulable and node.name in machines)
    borrowed = sum(res.gpu for c in candidates if c.borrowing for name, res in c.holdings if name in machines)
    return sum(task.resources.gpu for task in preemptor.tasks) - free - borrowed


def victims_choose_near(
    snapshot: ClusterSnapshot,
    preemptor: GangRequest,
    candidates: Sequence[Candidate],
    near: frozenset[str] | None,
    policy: Policy = Policy(),
    *,
    max_solves: int = DEFAULT_MAX_SOLVES,
    max_seconds: float | None = None,
    now: float | None = None,
) -> tuple[VictimChoice | None, frozenset[str] | None]:
    """The victim set (see the module docstring) and the machines of the region it was found in
    (None: the whole pool). ``near``: the machines of the preemptor's placement without LOW work, or
    None to search the whole pool only. The regions' searches share ``max_solves`` questions (once
    they are spent no further region is tried) and the whole pool's search has as many of its own;
    ``max_seconds`` bounds them all together: once it has passed, no further region is tried and the
    whole pool's search runs its first (all-evicted) solve only, so completeness holds. ``now``: as for
    :func:`~scheduler.preemption.search.victims_choose` (the work each candidate would lose)."""
    by_key = {candidate.key: candidate for candidate in candidates}
    deadline = None if max_seconds is None else time.monotonic() + max_seconds
    regions = Budget(max_solves, deadline)  # shared by every region; the whole pool has its own

    def search(view: ClusterSnapshot, budget: Budget, ceiling: int | None = None,
               among: Sequence[Candidate] = candidates) -> VictimChoice | None:
        return victims_choose(view, preemptor, among, policy, now=now, budget=budget, ceiling=ceiling)

    anywhere: VictimChoice | None = None
    searched = False
    for machines in regions_around(snapshot, near) if near else []:
        if not regions.can_solve() or (deadline is not None and time.monotonic() >= deadline):
            break  # the regions' solves or the time are spent: the whole pool answers
        if (anywhere is not None and any(by_key[key].borrowing for key in anywhere.victims)
                and within_quota_at_least(snapshot, preemptor, candidates, machines)
                > within_quota_gpu(by_key, anywhere.victims)):
            continue  # any set of this region evicts more work within its quota: the whole pool's wins
        # Once the whole pool's set reclaims borrowed work, a set of a region counts only if it evicts
        # no more work within its quota than that one.
        ceiling = (within_quota_gpu(by_key, anywhere.victims)
                   if anywhere is not None and any(by_key[key].borrowing for key in anywhere.victims) else None)
        try:
            # Only the candidates holding something there can be chosen there (the search would drop
            # the others itself, each after looking at all its holdings).
            there = [c for c in candidates if any(name in machines for name, _res in c.holdings)]
            choice = search(within(snapshot, machines), regions, ceiling, there)
        except BudgetSpent:
            break  # the regions' solves are spent before this one's first
        if choice is None:
            continue
        if not within_quota_gpu(by_key, choice.victims) or not any(c.borrowing for c in candidates):
            return choice, machines  # nothing to reclaim instead
        if not searched:
            # Only a set evicting less work within its quota can reclaim instead of this one.
            own = within_quota_gpu(by_key, choice.victims) - 1
            anywhere, searched = search(snapshot, Budget(max_solves, deadline), own), True
        if anywhere is None or not reclaims_instead(by_key, anywhere.victims, choice.victims):
            return choice, machines
    return (anywhere if searched else search(snapshot, Budget(max_solves, deadline))), None
