"""The walk: a pool's queue (:class:`~workflows.scheduling.cycle.values.CycleInput`) to a frozen
:class:`~workflows.scheduling.cycle.values.Decision` (docs/design.md §6, §8, §9). No writes and no
database of its own: what it reads on demand comes through a
:class:`~workflows.scheduling.cycle.values.GangSource`, so a test drives it with values built by hand.

Order: priority (HIGH, NORMAL, LOW), then (with the pool's fair share on, docs/design.md §9) the
team's place by recent usage, then submission time, then group position: the ``order`` key the read
step builds. Backfill: a later
gang that fits may go ahead of one that does not. Starvation guard: once a gang that does
not fit has waited longer than the starvation threshold and would fit the idle pool, machines are
kept for it (a *hold*): those of the placement where it can start soonest, judged by when the gangs
holding them must end (:mod:`scheduler.hold`), else (the first hold only) those of its placement on
the idle pool. Gangs of equal or lower priority behind it are placed only elsewhere, so capacity
freed there accumulates until it fits, but for those that will have ended by the time the kept
machines are free (EASY backfill). Up to ``CycleInput.max_holds`` starving gangs hold machines at
once, each on machines no earlier hold keeps (conservative backfill); a gang is decided with the
machines of every hold ahead of it that it may not backfill taken out. With the pool's minimum
runtime, a HIGH or NORMAL gang that would evict LOW work first waits that long since it first did not
fit within its quota, and keeps its placement without LOW work from LOW gangs meanwhile (a hold that
binds LOW gangs only: docs/design.md §9, waiting before evicting); then NORMAL work evicts only LOW
gangs that have run at most twice the minimum runtime, and a gang that finds no victims keeps that
placement from LOW gangs for as long as it waits (the eviction window). What a protected gang does
about LOW work is decided by :class:`~workflows.scheduling.cycle.preemption.low_work.LowWork`; the walk applies it.

What a walk costs is what changed, not what is queued:
- the pool is aggregated once into a :class:`~scheduler.placement.DomainIndex`, updated in place as
  gangs are placed (capacity only shrinks within a cycle);
- a gang proven unschedulable at the current capacity epoch is not solved again (its verdict
  stands), and gangs with equal signatures share one verdict within the walk;
- out of its time budget, the walk stops and records a cursor; the next one starts there;
- gangs waiting with the pool's minimum runtime (no proof: decided every walk) share, while the pool
  is unchanged, an identical gang's solves on the views without LOW work (docs/design.md §9, what
  waiting gangs cost a cycle).

What the walk remembers while it decides is one :class:`WalkMemo`, what it decided one
:class:`WalkOut`, what it remembers about LOW work its :class:`LowWork`. What identical gangs share is
:class:`Sharing`, and how a gang is solved a ``Solver``: a walk given others (the benchmarks'
baseline, ``bench/kit/cycle_baseline.py``) decides the same."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded

from scheduler.hold import Holder, may_backfill
from scheduler.hold.holds import Hold, Holds
from scheduler.placement import DomainIndex, GangRequest, Placement, Policy, Unplaceable, solve
from scheduler.results import result_to_json
from workflows.scheduling.admission import LOW_RANK, Quotas
from workflows.scheduling.cycle.preemption.candidates import Preemptions, takes
from workflows.scheduling.cycle.preemption.low_work import LowWork, Solver
from workflows.scheduling.cycle.reasons import BEHIND_STARVING, Reason, behind_hold, behind_keep, keys_changed_reason
from workflows.scheduling.cycle.values import (
    CycleInput,
    Decision,
    Eviction,
    GangRow,
    GangSource,
    Placed,
    QueuedGang,
    Verdict,
)
from workflows.scheduling.pod.platform_nodes import platform_note, request_on_platforms, with_platform_note
from workflows.scheduling.requests import gang_request_from_row

logger = logging.getLogger(__name__)

_clock = time.monotonic  # the walk's budget clock (a test drives it)
#: How many queued gangs' constraint trees and task requests are read per query while walking.
FETCH_BATCH = 500


@dataclass(slots=True)
class WalkMemo:
    """What one walk remembers while it decides: rows and requests read, verdicts shared between
    identical gangs, idle-pool fits, and the proofs it carries from the previous cycle and makes."""

    rows: dict[int, GangRow] = field(default_factory=dict)  # group id -> its row, once fetched
    requests: dict[int, GangRequest] = field(default_factory=dict)
    verdicts: dict[str, tuple[Reason, str]] = field(default_factory=dict)  # memo key -> (reason, status)
    idle_fits: dict[str, bool] = field(default_factory=dict)  # signature -> fits the idle pool
    # Signatures proven unschedulable at this capacity epoch (by an earlier walk: ``prior``, or this
    # one too: ``proofs``): a gang of one is skipped even when its own row does not record the proof.
    prior_proofs: dict[str, int] = field(default_factory=dict)
    proofs: dict[str, int] = field(default_factory=dict)
    behind_starving: Reason = field(default_factory=lambda: Reason(dict(BEHIND_STARVING)))
    # (which hold, has an exec_timeout) -> the reason of a gang kept off that hold
    behind_hold: dict[tuple[int, bool | None], Reason] = field(default_factory=dict)


@dataclass(slots=True)
class WalkOut:
    """What one walk decided so far (frozen into a :class:`Decision` at the end)."""

    placed: list[Placed] = field(default_factory=list)
    verdicts: dict[int, tuple[Reason, int | None]] = field(default_factory=dict)  # pk -> (reason, proof)
    proofs_only: dict[int, int | None] = field(default_factory=dict)  # pk -> proof, reason unchanged
    idle_writes: dict[int, bool] = field(default_factory=dict)
    failed: list[QueuedGang] = field(default_factory=list)
    unschedulable: list[int] = field(default_factory=list)
    undecided: list[int] = field(default_factory=list)
    solved: int = 0
    proven: int = 0
    shared: int = 0
    # LOW work this walk placed: a resumed walk may place it before protected gangs, and it is no
    # eviction candidate until committed, so a protected gang found unschedulable after it is no
    # proof; ``retry``: such a verdict was made, and the next cycle walks again.
    low_placed: bool = False
    retry: bool = False


@dataclass(frozen=True, slots=True)
class Sharing:
    """What identical gangs (equal signatures) share within one walk: a verdict and an idle-pool fit
    (``verdicts``); while the pool is unchanged in between, the solves of a waiting gang on the view
    without LOW work and on the view with every LOW gang released (``waits``, docs/design.md §9: each
    waiting gang would otherwise pay them every cycle). Both on in the service; a walk with one off
    decides the same, at the cost the sharing saves (the benchmarks measure it)."""

    verdicts: bool = True
    waits: bool = True


def _reason_unchanged(g: QueuedGang, reason: Reason) -> bool:
    """The gang carries this reason already (it is not rewritten)."""
    return bool(g.reason_digest) and g.reason_digest == reason.digest()


class Walk:
    """One walk over a pool's queue: :meth:`decide` returns what it decided."""

    def __init__(self, cycle: CycleInput, source: GangSource, policy: Policy, *, quotas: Quotas | None = None,
                 sharing: Sharing = Sharing(), solver: Solver | None = None) -> None:
        self.cycle, self.source, self.policy = cycle, source, policy
        self.sharing, self.solver = sharing, solver or solve  # (the solver itself, unless told otherwise)
        self.memo = WalkMemo(prior_proofs=dict(cycle.proofs), proofs=dict(cycle.proofs))
        # The starvation guard's holds; while a gang is decided, the free capacity of those it may not
        # use is taken off the index.
        self.holds = Holds(lambda: self.index, cycle.pool_name)
        self._holders: list[Holder] | None = None  # the pool's placed gangs and their expected ends
        self.quotas = Quotas(quotas.pool, quotas.quota, dict(quotas.used)) if quotas is not None else None
        now = cycle.now.timestamp()
        preemptions = (Preemptions(cycle.pool_name, self.quotas, policy, load=source.running_low, now=now,
                                   share=sharing.waits)
                       if cycle.preemption else None)
        # What protected gangs do about LOW work: packing without it, evicting, waiting before evicting.
        queued = {g.pk for g in cycle.queue}
        self.low = LowWork(preemptions, self.holds, policy, now=now, min_runtime=cycle.min_runtime,
                           blocked_since={pk: at for pk, at in cycle.blocked_since.items() if pk in queued},
                           shared=sharing.waits, solver=self.solver)
        self._index: DomainIndex | None = None
        self._idle: DomainIndex | None = None
        self.node_ids: dict[str, int] = {}
        self.out = WalkOut()  # what it decided, frozen by :meth:`decide`

    # -- lazily built state ---------------------------------------------------------------------------

    @property
    def index(self) -> DomainIndex:
        if self._index is None:
            snapshot, self.node_ids = self.source.snapshot()
            self._index = DomainIndex(snapshot)
        return self._index

    def idle_index(self) -> DomainIndex:
        if self._idle is None:
            self._idle = DomainIndex(self.source.idle_snapshot())
        return self._idle

    def _fetch(self, upcoming: list[QueuedGang]) -> None:
        """Read constraint trees and task requests of up to FETCH_BATCH upcoming gangs that may need
        solving (not proven at this epoch, no verdict shared in this walk yet) at once."""
        first, rest = upcoming[0], upcoming[1:]
        rows = self.memo.rows
        maybe = [g for g in rest if g.pk not in rows and g.proof_epoch != self.cycle.capacity_epoch
                 and not (g.signature and g.signature in self.memo.verdicts)]
        wanted = [g.pk for g in [first, *maybe] if g.pk not in rows][:FETCH_BATCH]
        if wanted:
            rows.update(self.source.gang_rows(wanted))

    def request(self, g: QueuedGang, upcoming: list[QueuedGang]) -> GangRequest:
        request = self.memo.requests.get(g.pk)
        if request is None:
            if g.pk not in self.memo.rows:
                self._fetch([g, *upcoming])
            row = self.memo.rows[g.pk]
            request = self.memo.requests[g.pk] = request_on_platforms(
                gang_request_from_row(g.name, row.constraint_tree, row.task_requests), self.source.platforms())
        return request

    # -- the walk -----------------------------------------------------------------------------------

    def decide(self) -> Decision:
        """Walk the queue once (see the module docstring) and return what was decided."""
        cycle = self.cycle
        queue = list(cycle.queue)
        start = 0
        cursor = cycle.cursor if queue else None
        if cursor:
            start = next((i for i, g in enumerate(queue) if g.order >= cursor), 0)
        walk = queue[start:] + queue[:start]
        starvation, now = cycle.starvation, cycle.now
        # (in a resumed walk the prefix's starving gang comes last: it is not held by its own hold)
        starving = self._starving_before(queue[:start])
        if starving is not None:
            self._hold_for(starving, [])
        deadline = _clock() + cycle.budget_seconds
        new_cursor: list[Any] | None = None
        budget_exhausted = False
        crossings = [g.scheduling_since + starvation for g in queue
                     if g.scheduling_since is not None and g.scheduling_since + starvation > now]
        wake_at = min(crossings).isoformat() if crossings else None
        for position, g in enumerate(walk):
            if _clock() > deadline:
                # Commit what was decided and let the next cycle carry on from here, rather than run
                # into the task's time limit and roll everything back: big queues must not livelock.
                budget_exhausted = True
                new_cursor = g.order
                break
            self._step(g, walk[position + 1:position + FETCH_BATCH])
        self.holds.bind(())
        until = self.low.wake_until()
        if until is not None:  # a LOW gang's minimum runtime or a wait before evicting ends: walked again then
            at = datetime.fromtimestamp(until, tz=now.tzinfo or UTC)
            wake_at = min(datetime.fromisoformat(wake_at), at).isoformat() if wake_at else at.isoformat()
        return self._decision(new_cursor, wake_at, resumed=start > 0, budget_exhausted=budget_exhausted)

    def _step(self, g: QueuedGang, upcoming: list[QueuedGang]) -> None:
        """Decide one gang: turned away before solving (:meth:`_admitted`), proven, placed (on the index, or by
        evicting LOW work), or given a verdict."""
        admitted = self._admitted(g, upcoming)
        if admitted is None:
            return
        held, blocking = admitted
        cycle = self.cycle
        waited = cycle.now - (g.scheduling_since or cycle.now)
        # A new hold: fewer than the most there may be, for a gang behind every hold so far.
        starving = self.holds.starving()
        check_idle = (waited > cycle.starvation and len(starving) < cycle.max_holds
                      and (not starving or g.order > starving[-1].order))
        idle_known = g.idle_fit is not None and g.idle_fit_epoch == cycle.inventory_epoch
        # A signature proven by an earlier cycle at this epoch covers a gang that already carries its
        # reason (each was rewritten when that proof was made); a gang new since then is solved or
        # given the shared verdict below, which records its reason.
        proven = g.proof_epoch == cycle.capacity_epoch or (
            bool(g.signature) and bool(g.reason_digest)
            and self.memo.prior_proofs.get(g.signature) == cycle.capacity_epoch
        )
        # A starving gang is solved again even when proven: its reason names the machines held for it.
        starves = check_idle and idle_known and bool(g.idle_fit)
        if proven and (idle_known or not check_idle) and not starves:
            self.out.proven += 1
            self.out.unschedulable.append(g.pk)
            if check_idle and g.idle_fit:
                self._hold_for(g, upcoming)
            return
        verdict = self._decide(g, upcoming)
        if verdict is None:  # placed, or failed by a solver error
            return
        reason, status = verdict
        # (a proven starving gang, solved again only for its reason, tried preemption when it was proven)
        retried = starves and proven
        if status == "unschedulable" and g.rank < LOW_RANK and not retried and self._preempt(g, upcoming):
            return
        reason = self.low.explain(g.pk, reason)
        hold: Hold | None = None
        if check_idle:
            if self._fits_idle(g, upcoming, idle_known):
                hold = self._hold_for(g, upcoming)
                if hold is not None and hold.free_by is not None:
                    reason = reason.holding(hold.where, hold.free_by, hold.bounded)
            elif not held:
                reason = reason.never_idle()
        if held and hold is None:  # it may fit once the starving gangs are placed: solved again next cycle
            self._behind_starving(g, blocking)
            return
        # (a verdict with holds' machines taken out is no proof on the pool)
        proof = cycle.capacity_epoch if status == "unschedulable" and not blocking else None
        if proof is not None and g.rank < LOW_RANK and self.out.low_placed:
            proof, self.out.retry = None, True
        if proof is not None and g.rank < LOW_RANK and self.low.defers_proof(g.pk):
            proof = None  # LOW gangs become preemptible later: solved again when the first does (wake_at)
        self._record(g, reason, proof)
        (self.out.unschedulable if status == "unschedulable" else self.out.undecided).append(g.pk)

    def _admitted(self, g: QueuedGang, upcoming: list[QueuedGang]) -> tuple[bool, tuple[int, ...]] | None:
        """The checks before a gang is solved: None when they decide it (its tree no longer
        means the same under the pool's keys, it waits behind a starving gang with no machines to keep,
        or it is over its team's quota); else whether holds ahead bind it, and those it may not
        backfill (their machines are taken off the index while it is decided)."""
        cycle, holds = self.cycle, self.holds
        if g.keys_version != cycle.keys_version:
            changed = keys_changed_reason(self._tree(g, upcoming), self.source.pool_keys(g.workflow_id),
                                          cycle.pool_name, list(cycle.key_labels))
            if changed is not None:
                self._record(g, Reason(changed), None)
                self.out.unschedulable.append(g.pk)
                return None
        ahead = holds.binding(g.order, low=g.rank >= LOW_RANK)
        held = bool(ahead)
        if held and holds[ahead[0]].machines is None:  # no machines to keep for the starving gang: hold everything
            self._behind_starving(g)
            return None
        # EASY backfill: a gang that will have ended by the time a hold's machines are free may use them
        now = cycle.now.timestamp()
        blocking = tuple(i for i in ahead if not may_backfill(now, g.exec_timeout_s, holds[i].free_by))
        holds.bind(blocking)
        if self.quotas and g.rank < LOW_RANK and g.team_id in self.quotas.quota:
            over = self.quotas.over(g, self.request(g, upcoming))
            if over is not None:
                self._record(g, Reason(over), cycle.capacity_epoch, shared=False)
                self.out.unschedulable.append(g.pk)
                return None
        return held, blocking

    def _starving_before(self, prefix: list[QueuedGang]) -> QueuedGang | None:
        """The starvation guard over the part of the queue a resumed walk does not walk first: the
        first gang there that did not fit last time, has waited long enough and fits the idle pool."""
        cycle = self.cycle
        for g in prefix:
            waited = cycle.now - (g.scheduling_since or cycle.now)
            if g.proof_epoch is not None and waited > cycle.starvation:
                return g if g.idle_fit and g.idle_fit_epoch == cycle.inventory_epoch else None
        return None

    # -- the starvation guard's hold -----------------------------------------------------------------

    def _hold_for(self, g: QueuedGang, upcoming: list[QueuedGang]) -> Hold | None:
        """Keep machines for a starving gang: those of the placement where it can start soonest as the
        gangs holding the pool end (:func:`scheduler.hold.soonest_hold`) on the machines no earlier
        hold keeps, else, for the first hold only, those of its placement on the idle pool. Gangs of
        its priority and below behind it are then placed only elsewhere, so that the work on those
        machines drains and nothing of its rank or below takes their place (but gangs that end by the
        time they are free), while the rest of the pool keeps being backfilled (docs/design.md §6).
        The first hold's machines are None (hold every such gang) if it has no such placement; a later
        gang without a soonest placement gets no hold (None)."""
        request = self.request(g, upcoming)
        evicted = self.low.evicted  # they have given their machines back on the index already
        if self._holders is None:  # read once per walk (two queries), for every hold
            self._holders = self.source.holders(self.cycle.now.timestamp())
        holders = [h for h in self._holders if int(h.key) not in evicted]
        return self.holds.seek(g.order, request, holders, self.policy, self.idle_index)

    def _behind_starving(self, g: QueuedGang, blocking: tuple[int, ...] = ()) -> None:
        """The reason of a gang behind starving gangs: kept off the machines of the first hold in
        ``blocking`` that has a time (it ends too late), else waiting behind them."""
        reason = self.memo.behind_starving
        timed_holds = [i for i in blocking if self.holds[i].free_by is not None and self.holds[i].machines]
        kept = [i for i in blocking if self.holds[i].low_only and self.holds[i].free_by is None]
        if kept and not timed_holds:  # kept for a gang that waits for them to free (the eviction window)
            reason = self.memo.behind_hold.get((kept[0], None)) or self.memo.behind_hold.setdefault(
                (kept[0], None), behind_keep(self.holds[kept[0]].where, None, False))
        elif timed_holds:
            i = timed_holds[0]
            hold, timed = self.holds[i], g.exec_timeout_s is not None
            assert hold.free_by is not None
            said = behind_keep if hold.low_only else behind_hold
            reason = self.memo.behind_hold.get((i, timed)) or self.memo.behind_hold.setdefault(
                (i, timed), said(hold.where, hold.free_by, timed))
        if not (g.reason_code == BEHIND_STARVING["code"] and _reason_unchanged(g, reason)):
            self._record(g, reason, None)
        self.out.unschedulable.append(g.pk)

    # -- deciding one gang ----------------------------------------------------------------------------

    def _decide(self, g: QueuedGang, upcoming: list[QueuedGang]) -> tuple[Reason, str] | None:
        """Solve the gang (or take the verdict of an identical one); None when it was placed."""
        key = self.holds.memo_key(g.signature)
        shared = self.memo.verdicts.get(key) if key and self.sharing.verdicts else None
        if shared is not None:
            self.out.shared += 1
            return shared
        request = self.request(g, upcoming)
        index = self.index
        try:
            absent = self.low.place_absent(g, request, index)
            if absent is not None:
                self._take(g, request, absent)
                return None
            outcome = self.solver(index, request, self.policy)
        except SoftTimeLimitExceeded:
            raise
        except Exception:  # a solver bug on one gang must not block the pool's whole queue
            logger.exception("placement.solver_error", extra={"pool": self.cycle.pool_name, "group": g.pk})
            self._index = DomainIndex(index.snapshot(self.cycle.pool_name))  # the search may have left it half-way
            self.low.forget_absent()
            self.out.failed.append(g)
            return None
        self.out.solved += 1
        if isinstance(outcome, Placement):
            self._take(g, request, outcome)
            return None
        assert isinstance(outcome, Unplaceable)
        note = platform_note(request, self.source.platforms())
        verdict = (Reason(with_platform_note(result_to_json(outcome), note)), outcome.status)
        if key:
            self.memo.verdicts[key] = verdict
        return verdict

    def _take(self, g: QueuedGang, request: GangRequest, placement: Placement) -> None:
        """Place the gang on the walk's index (and, protected work, on the view without LOW work)."""
        assignments = takes(request, placement)
        self.index.place(assignments)
        self.low.protected_placed(g, assignments)
        self._placed(g, request, placement)

    def _placed(self, g: QueuedGang, request: GangRequest, placement: Placement) -> None:
        """A gang placed on the index (by :meth:`_take`, or by a preemption): counted against its
        team's quota and kept to be written."""
        if self.quotas:
            self.quotas.add(g, request)
        self.low.gang_placed(g.pk)
        self.out.placed.append(Placed(g, placement))
        self.out.low_placed |= g.rank >= LOW_RANK

    def _preempt(self, g: QueuedGang, upcoming: list[QueuedGang]) -> bool:
        """Place a HIGH or NORMAL gang by evicting LOW gangs (:meth:`LowWork.preempt`). True when it was
        placed."""
        placed = self.low.preempt(g, lambda: self.request(g, upcoming), self.index)
        if placed is None:
            return False
        if self.holds.active:  # victims' machines among the kept ones: hold back what they freed there too
            self.holds.refresh()
        self._placed(g, *placed)
        return True

    def _fits_idle(self, g: QueuedGang, upcoming: list[QueuedGang], known: bool) -> bool:
        """Whether the gang fits the pool once everything of ours finished (stored on the gang per
        inventory epoch, shared between identical gangs within the walk)."""
        fits = (bool(g.idle_fit) if known else self.memo.idle_fits.get(g.signature)
                if g.signature and self.sharing.verdicts else None)
        if fits is not None and known:
            return fits
        if fits is None:
            fits = isinstance(solve(self.idle_index(), self.request(g, upcoming), self.policy), Placement)
            if g.signature:
                self.memo.idle_fits[g.signature] = fits
        self.out.idle_writes[g.pk] = fits
        return fits

    def _tree(self, g: QueuedGang, upcoming: list[QueuedGang]) -> dict[str, Any]:
        if g.pk not in self.memo.rows:
            self._fetch([g, *upcoming])
        return self.memo.rows[g.pk].constraint_tree

    def _record(self, g: QueuedGang, reason: Reason, proof: int | None, *, shared: bool = True) -> None:
        # Reasons are a few KB of JSON and thousands of gangs share a handful: a gang whose reason did
        # not change is not rewritten; its proof is recorded per signature in the pool's cycle state.
        # A verdict of this gang alone (its team's quota) is never shared with its signature.
        shared = shared and bool(g.signature)
        if proof is not None and shared:
            self.memo.proofs[g.signature] = proof
        if _reason_unchanged(g, reason):
            if proof != g.proof_epoch and not (proof is not None and shared):
                self.out.proofs_only[g.pk] = proof
            return
        self.out.verdicts[g.pk] = (reason, proof)

    # -- the decision -----------------------------------------------------------------------------------

    def _decision(self, cursor: list[Any] | None, wake_at: str | None, *, resumed: bool,
                  budget_exhausted: bool) -> Decision:
        # One write per distinct verdict: gangs that share one share its reason (grouped by content, so
        # equal reasons made by separate solves are still written together).
        by_reason: dict[tuple[str, int | None, str], tuple[Reason, list[int]]] = {}
        for pk, (reason, proof) in self.out.verdicts.items():
            by_reason.setdefault((reason.digest(), proof, reason.code), (reason, []))[1].append(pk)
        by_proof: dict[int | None, list[int]] = {}
        for pk, proof in self.out.proofs_only.items():
            by_proof.setdefault(proof, []).append(pk)
        evicted = self.low.evicted
        return Decision(
            placements=tuple(self.out.placed),
            node_ids=dict(self.node_ids) if self.out.placed else {},
            verdicts=tuple(Verdict(tuple(pks), reason.body, proof, code, digest)
                           for (digest, proof, code), (reason, pks) in by_reason.items()),
            proofs_only=tuple((proof, tuple(pks)) for proof, pks in by_proof.items()),
            idle_fits=tuple((fits, pks) for fits in (True, False)
                            if (pks := tuple(pk for pk, value in self.out.idle_writes.items() if value is fits))),
            evictions=tuple(Eviction(group_id, workflow_id, preemptor)
                            for group_id, (workflow_id, preemptor) in evicted.items()),
            failed=tuple(self.out.failed),
            unschedulable=tuple(self.out.unschedulable),
            undecided=tuple(self.out.undecided),
            cursor=cursor,
            proofs=dict(self.memo.proofs),
            wake_at=wake_at,
            blocked_since=dict(self.low.blocked_since),
            retry=self.out.retry,
            solved=self.out.solved + self.low.solved,
            proven=self.out.proven,
            shared=self.out.shared,
            resumed=resumed,
            budget_exhausted=budget_exhausted,
        )
