"""What the walk does about LOW work for a HIGH or NORMAL gang (docs/design.md §9): packs it as if LOW
work were not there, evicts LOW gangs to place it, and, with the pool's minimum runtime, has it wait
before evicting, keeps its placement from LOW gangs while it waits, and says when protected LOW work
becomes preemptible.

:class:`LowWork` decides and remembers; the walk applies. Its methods return the placement the walk
takes (on its index, against the gang's quota), and what it keeps per gang (when it waits until,
which machines are kept) the walk reads into the gang's reason, its proof and the cycle's wake-up. It
holds no reference to the walk: the index, the gang's request and the holds are handed to it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from scheduler.hold.holds import Holds
from scheduler.placement import DomainIndex, GangRequest, Placement, Policy, Unplaceable, solve
from scheduler.preemption import eviction_window
from workflows.scheduling.admission import LOW_RANK, NORMAL_RANK
from workflows.scheduling.cycle.preemption.candidates import Preemptions, Vec, fits_on, takes
from workflows.scheduling.cycle.reasons import Reason
from workflows.scheduling.cycle.values import QueuedGang

#: How the walk solves a gang on an index: the solver itself in the service.
Solver = Callable[[DomainIndex, GangRequest, Policy], Placement | Unplaceable]

class LowWork:
    """One walk's dealings with LOW work on behalf of protected (HIGH and NORMAL) gangs.

    ``preemptions`` is None when the pool does not preempt: then nothing here places or keeps, and
    ``blocked_since`` is carried through as it came. ``shared``: a waiting gang takes the solves of an
    identical gang before it on the view without LOW work while that view is unchanged (the walk's
    :class:`~workflows.scheduling.cycle.walk.Sharing`). ``solver``: how the walk solves a gang."""

    def __init__(self, preemptions: Preemptions | None, holds: Holds, policy: Policy, *, now: float,
                 min_runtime: float, blocked_since: Mapping[int, float], shared: bool,
                 solver: Solver = solve) -> None:
        self.preemptions, self.holds, self.policy = preemptions, holds, policy
        self.now, self.min_runtime = now, min_runtime
        self.shared, self.solver = shared, solver
        # With a minimum runtime: when each HIGH/NORMAL gang first did not fit within its quota (carried
        # between cycles).
        self.blocked_since = dict(blocked_since)
        # Gangs that would preempt but for the pool's minimum runtime: (when, domains in the way).
        self.runtime_waits: dict[int, tuple[float, list[str]]] = {}
        # Gangs that wait before evicting: (when they evict, the machines kept).
        self.evict_waits: dict[int, tuple[float, str]] = {}
        # Gangs that found no victims and keep their placement without LOW work from LOW gangs while
        # they wait: (the machines kept, NORMAL's eviction window in seconds or None).
        self.keeps: dict[int, tuple[str, float | None]] = {}
        self.there: dict[int, frozenset[str]] = {}  # pk -> its machines on the view without LOW work
        # Solves on the view without LOW work, per request, while that view is unchanged (its change count)
        self._solves: dict[GangRequest, Placement | Unplaceable] = {}
        self._solves_at: tuple[DomainIndex, int] | None = None
        self.solved = 0

    @property
    def evicted(self) -> dict[int, tuple[int, str]]:
        """Gangs evicted in this walk: group id -> (workflow id, preemptor)."""
        return self.preemptions.evicted if self.preemptions is not None else {}

    # -- packing as if LOW work were not there --------------------------------------------------------

    def place_absent(self, g: QueuedGang, request: GangRequest, index: DomainIndex) -> Placement | None:
        """A HIGH or NORMAL gang while LOW gangs run: its placement on the view without LOW work, when
        that is free on the real ``index`` too (docs/design.md §9: protected work packed as if LOW work
        were not there); the walk takes it. A gang that does not fit that view cannot be helped by
        preemption in this cycle."""
        if g.rank >= LOW_RANK or self.preemptions is None:
            return None
        outcome = self._absent_solve(request, index)
        if outcome is None:
            return None
        if isinstance(outcome, Placement):
            if fits_on(index, takes(request, outcome)):
                return outcome
            self.there[g.pk] = outcome.nodes
        elif outcome.status == "unschedulable":
            self.preemptions.hopeless_mark(self.holds.memo_key(g.signature))
        return None

    def protected_placed(self, g: QueuedGang, assignments: list[tuple[str, Vec]]) -> None:
        """A gang was placed on the walk's index: protected work takes its place on the view without
        LOW work too."""
        if g.rank < LOW_RANK and self.preemptions is not None:
            self.preemptions.protected_placed(assignments)

    def gang_placed(self, pk: int) -> None:
        self.blocked_since.pop(pk, None)

    def forget_absent(self) -> None:
        """The walk's index was rebuilt (a solver error): the view without LOW work is built anew."""
        if self.preemptions is not None:
            self.preemptions.forget_absent()

    def _absent_solve(self, request: GangRequest, index: DomainIndex) -> Placement | Unplaceable | None:
        """Solve on the view without LOW work (None: no LOW gang runs)."""
        assert self.preemptions is not None
        if self.preemptions.absent is None and self.holds.active:  # built on the whole pool, kept machines free
            with self.holds.unbound():
                self.preemptions.absent_view(index)
        absent = self.preemptions.absent_view(index)
        if absent is None:
            return None
        if self.shared:
            if self._solves_at is None or self._solves_at[0] is not absent or self._solves_at[1] != absent.changes:
                self._solves, self._solves_at = {}, (absent, absent.changes)
            known = self._solves.get(request)
            if known is not None:
                return known
        self.solved += 1
        outcome = self.solver(absent, request, self.policy)
        if self.shared:
            self._solves[request] = outcome
        return outcome

    def _absent_region(self, g: QueuedGang, request: GangRequest, index: DomainIndex) -> frozenset[str] | None:
        """The machines of the gang's placement on the view without LOW work, where its victims are
        sought first: kept from :meth:`place_absent`, or solved now for a gang that took an identical
        gang's verdict instead of being solved."""
        if g.pk in self.there:
            return self.there.pop(g.pk)
        outcome = self._absent_solve(request, index)
        return outcome.nodes if isinstance(outcome, Placement) else None

    # -- evicting ---------------------------------------------------------------------------------------

    def preempt(self, g: QueuedGang, request_of: Callable[[], GangRequest], index: DomainIndex
                ) -> tuple[GangRequest, Placement] | None:
        """A HIGH or NORMAL gang (within its quota: checked before) placed by evicting LOW gangs
        (:mod:`workflows.scheduling.cycle.preemption.candidates`; the victims' capacity is released on ``index``): its
        request and placement, for the walk to take, or None. ``request_of`` reads the request only
        when a search is worth it."""
        if self.preemptions is None:
            return None
        signature = self.holds.memo_key(g.signature)
        kept = self.holds.kept()
        if self.min_runtime > 0:  # it does not fit within its quota: since when (carried on)
            self.blocked_since.setdefault(g.pk, self.now)
        there: frozenset[str] | None = None
        window = eviction_window(g.rank == NORMAL_RANK, self.min_runtime)
        if self.preemptions.worth_trying(signature):  # before reading the gang's request: no query
            request = request_of()
            there = self._absent_region(g, request, index)
            if there is not None and self._wait_first(g, there):
                return None
            placement = self.preemptions.try_place(index, request, signature, g.workflow_label, kept,
                                                   there=there, window=window)
            if placement is not None:
                return request, placement
        if self.preemptions.protected:  # LOW gangs within the pool's minimum runtime: when may it?
            wait = self.preemptions.wait_for(index, request_of(), kept)
            if wait is not None:
                self.runtime_waits[g.pk] = wait
        if there is not None and self.min_runtime > 0:
            self._keep(g, there, window)
        return None

    def _wait_first(self, g: QueuedGang, there: frozenset[str]) -> bool:
        """With a minimum runtime, a HIGH or NORMAL gang that starts only by evicting LOW work (it fits
        the pool without LOW work on ``there``) first waits until it has waited the minimum runtime
        since it first did not fit within its quota (docs/design.md §9): the machines of ``there`` are
        kept from the LOW gangs behind it meanwhile (EASY backfill: but those that end by then), so that
        what frees there stays free for it and LOW work that would be evicted does not start there.
        True while it waits (nothing is evicted)."""
        since = self.blocked_since.get(g.pk)
        if since is None:
            return False
        until = since + self.min_runtime
        if self.now >= until:
            return False
        self.evict_waits[g.pk] = (until, self.holds.keep_from_low(g.order, there, until))
        return True

    def _keep(self, g: QueuedGang, there: frozenset[str], window: float | None) -> None:
        """With a minimum runtime, a HIGH or NORMAL gang that found no victims (NORMAL work evicts only
        LOW gangs within its ``window``) keeps its placement without LOW work, ``there``, from the LOW
        gangs behind it for as long as it waits (docs/design.md §9, the eviction window): what frees
        there stays free for it, and no LOW work starts there only to be evicted. No time: no LOW gang
        backfills it."""
        self.keeps[g.pk] = (self.holds.keep_from_low(g.order, there, None), window)

    # -- what the walk reads back ----------------------------------------------------------------------

    def explain(self, pk: int, reason: Reason) -> Reason:
        """The gang's reason with what it waits for here: LOW work's minimum runtime, its own wait
        before evicting, the machines it keeps."""
        waiting_runtime = self.runtime_waits.get(pk)
        if waiting_runtime is not None:
            reason = reason.preemptible_at(*waiting_runtime)
        evict_wait = self.evict_waits.get(pk)
        if evict_wait is not None:
            reason = reason.evicts_at(*evict_wait)
        keep = self.keeps.get(pk)
        if keep is not None:
            reason = reason.keeps(*keep)
        return reason

    def defers_proof(self, pk: int) -> bool:
        """A verdict on the gang proves nothing: LOW gangs become preemptible later, or it waits to
        evict or keeps machines (it is solved again when the first LOW gang does: the wake-up)."""
        return self.preemptions is not None and (
            bool(self.preemptions.protected) or pk in self.evict_waits or pk in self.keeps)

    def wake_until(self) -> float | None:
        """The first time something here changes without an event: a LOW gang's minimum runtime ends,
        or a gang's wait before evicting does."""
        until = self.preemptions.protected_until() if self.preemptions is not None else None
        if self.evict_waits:
            first = min(at for at, _where in self.evict_waits.values())
            until = first if until is None else min(until, first)
        return until
