"""Preemption inside the placement cycle (docs/design.md §9).

When a HIGH or NORMAL gang within its team's quota is proven unschedulable, the cycle asks the pure
victim search (:func:`scheduler.preemption.victims_choose`) for running LOW gangs to evict, whole, so
that it fits. The candidates are the pool's running LOW gangs none of whose tasks has finished (a
gang with a finished member is nearly done, and restarting it would run finished work again), read
once per cycle when first needed. A LOW gang *borrows* when its team's HIGH and NORMAL use (as it
stands at each search: gangs placed earlier in the cycle count) plus its LOW gangs started up to it
exceed the team's quota in the pool; borrowed work is reclaimed first.

Decisions are made in memory on the cycle's domain index (the victims' capacity is released there and
the preemptor placed at once; no database here: the candidates come from the cycle's read step); the
cycle's apply step writes them in the cycle's transaction: the victims go back to SCHEDULING
(:func:`workflows.lifecycle.placing.gangs_preempt`), their pods are deleted with the pool's grace period
(``Pool.preemption_grace``, else ``OSMO_PREEMPTION_GRACE_SECONDS``) once committed, and the preemptor is
placed like any other gang.
Releasing the victims' capacity before their pods are gone is safe for the reason given in
:mod:`workflows.scheduling.pods`: Kubernetes does not start the preemptor's pinned pods on GPUs that
terminating pods still hold.

Protected work is packed as if LOW work were not there (:meth:`Preemptions.absent_view`): a HIGH or
NORMAL gang is first solved on a second index, the cycle's with every candidate's holdings released;
when that placement is free on the real index as well, it is taken. Packed around LOW work instead,
protected gangs fill the gaps it leaves and fragment the domains, so that a big protected gang may
find no victim set once LOW work is evicted, where it would have fitted had LOW work never run. When
that placement is not free and the gang does not fit the real index, the victims are sought on that
placement's machines first (the LOW work in its way), then in the domains around them, finest key
first, then on the whole pool (:func:`scheduler.preemption.victims_choose_near`: borrowed work is
reclaimed first whatever the packing; fewer GPUs alone do not move the gang away).

The search weighs the work each candidate would lose, its GPUs times how long it has run up to the
cycle's ``now`` (after the reclaim rule: docs/design.md §9).

A pool's minimum runtime (``Pool.min_runtime``) keeps a LOW gang that has run less than it out of the
candidates (:attr:`Preemptions.protected`) until it has: it is neither evicted nor released on the
view without LOW work. When a gang finds no victims while such gangs run, :meth:`Preemptions.wait_for`
says when the protected gangs in its way become preemptible (the walk puts it in the gang's waiting
reason, proves nothing, and wakes the pool then). With a minimum runtime the walk also has a gang
wait that long before it evicts, its placement without LOW work kept from LOW gangs meanwhile
(docs/design.md §9, waiting before evicting); NORMAL work then evicts only LOW gangs that have run at
most twice the minimum runtime (``try_place``'s ``window``), and a gang that finds no victims keeps
that placement from LOW gangs for as long as it waits (both decided by
:class:`workflows.scheduling.cycle.preemption.low_work.LowWork`).

The search is bounded by ``OSMO_PREEMPTION_MAX_SOLVES`` questions (shared by the regions, as many
again for the whole pool) and ``OSMO_PREEMPTION_MAX_SECONDS``; a signature for which evicting every
candidate is not enough is not searched again in the same cycle (candidates only shrink within it).
A search narrowed by the eviction window first asks that with one solve on the cycle's index
(:meth:`Preemptions._too_few`), and :meth:`Preemptions.wait_for` keeps its view while the index is
unchanged (docs/design.md §9, what waiting gangs cost a cycle).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from osmo import config as osmo_config
from scheduler.placement import DomainIndex, GangRequest, Placement, Policy, Unplaceable, solve
from scheduler.preemption import Candidate, cordoned, victims_choose_near, within_window
from workflows.scheduling.admission import Quotas

if TYPE_CHECKING:
    from workflows.scheduling.cycle.values import RunningGang

logger = logging.getLogger(__name__)

Vec = tuple[int, int, int, int]

def takes(request: GangRequest, placement: Placement) -> list[tuple[str, Vec]]:
    """What the placement takes from each machine, per task: (machine, resources)."""
    requests = {t.name: t.resources.as_tuple() for t in request.tasks}
    return [(node, requests[task]) for task, node in placement.assignments]


def fits_on(index: DomainIndex, assignments: list[tuple[str, Vec]]) -> bool:
    """Whether every machine of ``assignments`` has what they take from it free on ``index`` (a
    placement found on another view of the same machines is then valid here too: constraints depend
    only on labels, which both views share)."""
    need: dict[str, Vec] = {}
    for node, req in assignments:
        have = need.get(node, (0, 0, 0, 0))
        need[node] = (have[0] + req[0], have[1] + req[1], have[2] + req[2], have[3] + req[3])
    nodes = index.nodes
    for node, req in need.items():
        free = nodes[node].free
        if free.gpu < req[0] or free.cpu < req[1] or free.memory < req[2] or free.storage < req[3]:
            return False
    return True


def holdings_of(running: RunningGang) -> list[tuple[str, Vec]]:
    """What a running gang holds, per machine entry: (machine, resources)."""
    return [(node, res.as_tuple()) for node, res in running.candidate.holdings]


@dataclass
class Preemptions:
    """The pool's preemption candidates and the evictions this cycle decided."""

    pool_name: str
    quotas: Quotas | None
    policy: Policy
    load: Callable[[], list[RunningGang]]  # the candidates, read when first needed
    running: dict[str, RunningGang] | None = None
    hopeless: set[str] = field(default_factory=set)  # signatures not placeable even with every candidate gone
    evicted: dict[int, tuple[int, str]] = field(default_factory=dict)  # victim group -> (its workflow, preemptor)
    absent: DomainIndex | None = None  # the cycle's index with every candidate's holdings released
    now: float = 0.0  # the cycle's time (epoch seconds): gangs preemptible only after it are protected
    protected: list[RunningGang] = field(default_factory=list)  # running LOW gangs within the minimum runtime
    # :meth:`wait_for`'s view (the index it was built from, that index's change count, the machines kept
    # out, the view) and its answers per request on that view; ``share`` False solves each afresh.
    share: bool = True
    released: tuple[DomainIndex, int, frozenset[str], DomainIndex] | None = None
    waits: dict[GangRequest, tuple[float, list[str]] | None] = field(default_factory=dict)

    def candidates(self) -> dict[str, Candidate]:
        """The running LOW gangs as victim candidates, in start order, each marked whether it borrows:
        per team, its HIGH and NORMAL use as it stands now (gangs this cycle placed included), then its
        LOW gangs in start order; a LOW gang borrows once that total exceeds the team's quota."""
        assert self.running is not None
        used = dict(self.quotas.used) if self.quotas else {}
        out: dict[str, Candidate] = {}
        for key, running in self.running.items():
            borrowing = False
            if self.quotas is not None and running.team_id in self.quotas.quota:
                used[running.team_id] = used.get(running.team_id, 0) + running.candidate.gpu
                borrowing = used[running.team_id] > self.quotas.quota[running.team_id][1]
            out[key] = replace(running.candidate, borrowing=borrowing)
        return out

    def worth_trying(self, signature: str) -> bool:
        """Whether a search may help: running LOW gangs exist and evicting all of them was not already
        shown to be too little for this signature in this cycle (the first call reads the candidates)."""
        if signature and signature in self.hopeless:
            return False
        if self.running is None:
            self.running = {}
            for running in self.load():
                if running.preemptible_at > self.now:
                    self.protected.append(running)
                else:
                    self.running[str(running.group_id)] = running
        return bool(self.running)

    def absent_view(self, index: DomainIndex) -> DomainIndex | None:
        """The pool as protected work would see it without LOW work: ``index`` with every candidate's
        holdings released, built when first asked for and kept up to date by :meth:`protected_placed`
        (None when no LOW gang runs). Its free capacity is at least the real index's on every machine,
        so a gang that does not fit it has no victim set (candidates only shrink within a cycle)."""
        if not self.worth_trying(""):
            return None
        if self.absent is None:
            assert self.running is not None
            self.absent = DomainIndex(index.snapshot(self.pool_name))
            for running in self.running.values():
                self.absent.release(holdings_of(running))
        return self.absent

    def protected_placed(self, assignments: list[tuple[str, Vec]]) -> None:
        """A HIGH or NORMAL gang took ``assignments`` on the real index: the same on the view without
        LOW work (LOW gangs placed in the cycle stay off it)."""
        if self.absent is not None:
            self.absent.place(assignments)

    def forget_absent(self) -> None:
        """Drop the view without LOW work (a solver error may have left it half-way); rebuilt on demand."""
        self.absent = None

    def try_place(self, index: DomainIndex, request: GangRequest, signature: str, preemptor: str,
                  kept: frozenset[str] = frozenset(), there: frozenset[str] | None = None,
                  window: float | None = None) -> Placement | None:
        """Evict running LOW gangs so that the gang fits, in memory: their capacity goes back to
        ``index`` and the gang's placement is taken off it. None (nothing evicted) when evicting every
        candidate would not be enough or there is none.

        The placement is the victim search's: valid once exactly the victims are gone (its contract),
        which is the index's state after their release. Machines in ``kept`` (kept for a starving gang)
        are out of the search: neither used nor worth evicting from. ``there``: the machines of the
        gang's placement on the view without LOW work; the victims are sought there first, then in
        the domains around them, then on the whole pool
        (:func:`scheduler.preemption.victims_choose_near`). ``window``: only candidates that have run
        at most that many seconds are evicted (NORMAL work with a minimum runtime,
        :func:`scheduler.preemption.eviction_window`); a search so narrowed that finds nothing proves
        nothing for the signature's other gangs (it is remembered apart)."""
        key = signature if window is None or not signature else f"{signature}|window"
        if not self.worth_trying(signature) or not self.worth_trying(key):
            return None
        assert self.running is not None
        candidates = within_window(list(self.candidates().values()), self.now, window)
        if window is not None and not kept and self.share and self._too_few(index, request, candidates):
            self.hopeless_mark(key)
            return None
        snapshot = cordoned(index.snapshot(self.pool_name), kept)
        choice, _region = victims_choose_near(snapshot, request, candidates, there,
                                              self.policy, max_solves=osmo_config.scheduler().preemption_max_solves,
                                              max_seconds=osmo_config.scheduler().preemption_max_seconds, now=self.now)
        if choice is None:
            self.hopeless_mark(key)
            return None
        victims = [self.running.pop(key) for key in choice.victims]
        for victim in victims:
            index.release(holdings_of(victim))
            self.evicted[victim.group_id] = (victim.workflow_id, preemptor)
        placement = choice.placement
        assignments = takes(request, placement)
        index.place(assignments)
        self.protected_placed(assignments)
        logger.info("preemption.chosen", extra={
            "pool": self.pool_name, "preemptor": preemptor, "victims": [v.group_id for v in victims],
            "gpu_evicted": choice.gpu_evicted, "solves": choice.explored,
        })
        return placement

    def _too_few(self, index: DomainIndex, request: GangRequest, candidates: list[Candidate]) -> bool:
        """Whether the gang is proven not to fit ``index`` even with every one of ``candidates``
        evicted: then no region of the pool holds it either, and the search would find nothing. One
        solve on ``index`` with their holdings released and taken back (it is left as it was, its
        change count too), instead of the search's set-up per region: a NORMAL gang's search narrowed
        by the eviction window mostly ends so (docs/design.md §9, what waiting gangs cost a cycle)."""
        freed = [(node, res.as_tuple()) for candidate in candidates for node, res in candidate.holdings]
        changes = index.changes
        index.release(freed)
        try:
            outcome = solve(index, request, self.policy)
        finally:
            index.place(freed)
            index.changes = changes
        return isinstance(outcome, Unplaceable) and outcome.status == "unschedulable"

    def hopeless_mark(self, signature: str) -> None:
        """Evicting every candidate is not enough for ``signature`` (it does not fit the view without
        LOW work): no search for it in this cycle."""
        if signature:
            self.hopeless.add(signature)

    def wait_for(self, index: DomainIndex, request: GangRequest, kept: frozenset[str] = frozenset()
                 ) -> tuple[float, list[str]] | None:
        """When the gang could preempt its way in, were it not for the minimum runtime: it is solved
        on ``index`` (machines in ``kept`` out) with every candidate's and every protected gang's
        holdings released; the protected gangs on that placement's machines are those in its way. The
        latest of their preemptible times, and the finest domains (labels of the pool's last key)
        they hold there. None: no protected gang runs, it does not fit even then, or none is in the way."""
        if not self.protected:
            return None
        view = self._all_released(index, kept)
        if self.share and request in self.waits:
            return self.waits[request]
        outcome = solve(view, request, self.policy)
        said: tuple[float, list[str]] | None = None
        if isinstance(outcome, Placement):
            used = outcome.nodes
            nodes = index.nodes
            blockers = [r for r in self.protected if any(node in used for node, _res in r.candidate.holdings)]
            if blockers:
                where = sorted({next((label for label in reversed(nodes[node].labels) if label), node)
                                for r in blockers for node, _res in r.candidate.holdings if node in used})
                said = max(r.preemptible_at for r in blockers), where
        if self.share:
            self.waits[request] = said
        return said

    def _all_released(self, index: DomainIndex, kept: frozenset[str]) -> DomainIndex:
        """``index`` with the machines of ``kept`` out and every candidate's and protected gang's
        holdings released: :meth:`wait_for`'s view, built again only once ``index`` has changed (a
        gang placed or LOW gangs evicted: the candidates change only with it) or other machines are
        kept. Gangs that wait in one walk with the pool unchanged between them (docs/design.md §9, the
        eviction window) share it and, per request, its answer."""
        known = self.released
        if self.share and known is not None and known[0] is index and known[1] == index.changes and known[2] == kept:
            return known[3]
        view = DomainIndex(cordoned(index.snapshot(self.pool_name), kept))
        for running in [*(self.running or {}).values(), *self.protected]:
            view.release(holdings_of(running))
        self.released, self.waits = (index, index.changes, kept, view), {}
        return view

    def protected_until(self) -> float | None:
        """The earliest time a protected gang becomes preemptible (None: none is protected)."""
        return min((r.preemptible_at for r in self.protected), default=None)

    def workflow_ids(self) -> set[int]:
        return {workflow_id for workflow_id, _by in self.evicted.values()}

