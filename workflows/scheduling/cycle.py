"""The placement cycle of one pool: lock -> snapshot -> walk the queue -> persist -> dispatch
(docs/design.md §6, docs/design.md §8).

One cycle per pool at a time: on PostgreSQL a transaction-scoped advisory lock keyed by the pool
(other pools proceed in parallel on other workers); on SQLite the IMMEDIATE transaction already
serialises writers. Everything the cycle decides is written in that one transaction, so a worker
killed mid-cycle leaves nothing half-done: the next cycle (the periodic tick at the latest) starts
over from the database. Dispatch is enqueued on commit only.

Order: priority (HIGH, NORMAL, LOW), then submission time, then group position. Backfill: a later
group that fits may go ahead of one that does not. Starvation guard: once the first group that does
not fit has waited longer than ``OSMO_STARVATION_SECONDS`` and would fit the idle pool, no group of
equal or lower priority is backfilled behind it, so capacity freed by finishing work accumulates
until the big gang fits.

What a cycle costs (docs/design.md §8): what changed, not what is queued.
- The pool is aggregated once per cycle into a :class:`~scheduler.placement.DomainIndex`, updated in
  place as gangs are placed (capacity only shrinks within a cycle).
- A gang proven unschedulable records the pool's capacity epoch (:class:`~scheduler.models.PoolEpoch`)
  of its proof; it is not solved again until the epoch moves (capacity released, inventory or keys
  changed). Priority order and the starvation guard still see it, with its recorded verdict.
- Gangs with equal signatures (:mod:`scheduler.placement.signature`) share a verdict within a cycle:
  once one is proven unschedulable (or undecided), the ones behind it are not solved again.
- A cycle that runs out of ``OSMO_CYCLE_BUDGET_SECONDS`` stores a cursor; the next cycle solves
  from there to the end of the queue, then from the top up to the cursor, so every queued gang is
  tried within ``ceil(solve time of the queue / budget) + 1`` cycles.
- An idle cycle does not walk at all: when the queue's membership (a fingerprint of its group ids),
  the capacity epoch and the pool's keys are what the last complete walk left, and no queued gang
  has crossed the starvation threshold since, that walk's decisions still stand.
- Queries per cycle do not grow with the queue: one light read of the queue, gang data fetched in
  batches only for gangs that must be solved, verdicts written in bulk per distinct reason; only
  placed gangs add queries. Only rows the cycle writes are locked.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import transaction
from django.db.models import Case, Count, F, IntegerField, Max, QuerySet, Sum, Value, When
from django.utils import timezone

from osmo.bulk import bulk_insert, bulk_set
from osmo.compiled import CompiledQuery
from scheduler import jobs
from scheduler.choices import PoolStatus
from scheduler.dispatch.naming import pod_name_for
from scheduler.models import Pool, Reservation
from scheduler.placement import DomainIndex, GroupRequest, Placement, Policy, ReasonCode, Unplaceable, solve
from scheduler.placement.signature import gang_signature
from scheduler.results import reason_digest, report_to_json, result_to_json
from scheduler.services.reservations import pool_epochs, pool_epochs_bump
from scheduler.snapshot import pool_key_labels, snapshot_empty, snapshot_load_with_ids
from workflows.choices import PRIORITY_RANK, TaskStatus
from workflows.lifecycle.transitions import (
    group_fail,
    waiting_groups_promote,
    workflow_status_refresh,
    workflows_status_refresh,
)
from workflows.models import StatusTransition, Task, TaskGroup, Workflow
from workflows.scheduling.admission import LOW_RANK, Quotas, not_online_record
from workflows.scheduling.locks import pool_lock_try, workflows_lock
from workflows.scheduling.preemption import Preemptions, Vec, fits_on, takes
from workflows.scheduling.requests import group_request_from_db, group_request_from_row, task_requests_to_json

logger = logging.getLogger(__name__)

_clock = time.monotonic  # the cycle's budget clock (a test drives it)
#: How many queued gangs' constraint trees and task requests are read per query while walking.
FETCH_BATCH = 500
BEHIND_STARVING = {
    "status": "waiting",
    "code": ReasonCode.BEHIND_STARVING_GROUP.value,
    "message": ("waiting: an older gang that does not fit yet goes first (the machines kept for it are not "
                "available to this one)"),
}


@dataclass(frozen=True, slots=True)
class CycleOptions:
    """``incremental=False`` runs the algorithm this one replaced (a fresh pool aggregation for every
    gang, every gang solved every cycle, no shared verdicts, no cursor): the baseline of
    ``bench.cycle``, which compares both on the same queue."""

    incremental: bool = True


@dataclass
class CycleResult:
    pool: str = ""
    locked: bool = True
    budget_exhausted: bool = False
    placed: list[int] = field(default_factory=list)
    unschedulable: list[int] = field(default_factory=list)
    undecided: list[int] = field(default_factory=list)
    timed_out: list[int] = field(default_factory=list)
    refresh: set[int] = field(default_factory=set)  # workflows whose status must be recomputed
    solved: int = 0  # solver calls on the queue's gangs
    preempted: int = 0  # running LOW gangs evicted for gangs placed by this cycle
    proven: int = 0  # gangs skipped: proven unschedulable at the current capacity epoch
    shared: int = 0  # gangs given the verdict of an identical gang in this cycle
    resumed: bool = False  # started from the previous cycle's cursor
    idle: bool = False  # nothing changed since the last complete walk: nothing to do


@dataclass(slots=True)
class _Queued:
    """A queued gang as the walk sees it (one light row; tree and requests are fetched on demand)."""

    pk: int
    workflow_id: int
    name: str
    rank: int
    order: list[Any]  # the queue order key, JSON-able (the cursor stores one)
    scheduling_since: datetime | None
    proof_epoch: int | None
    signature: str
    reason_code: str
    reason_digest: str
    idle_fit: bool | None
    idle_fit_epoch: int | None
    keys_version: int
    team_id: int | None = None
    preemptions: int = 0
    workflow_label: str = ""  # the workflow's id as users see it


def _priority_rank() -> Case:
    return Case(
        *[When(workflow__priority=name, then=Value(rank)) for name, rank in PRIORITY_RANK.items()],
        default=Value(9),
        output_field=IntegerField(),
    )


def _queued(pool_id: int) -> QuerySet[TaskGroup]:
    """The pool's queued (SCHEDULING) gangs."""
    return TaskGroup.objects.filter(workflow__pool=pool_id, status=TaskStatus.SCHEDULING)


# The cycle's reads of its pool, compiled once per process (osmo.compiled): every cycle runs them.
_POOL_LOCKED = CompiledQuery(
    lambda pool_id: Pool.objects.select_for_update(no_key=True).filter(pk=pool_id).order_by("pk")[:1], pool_id=int)
_WAITING = CompiledQuery(
    lambda pool_id: TaskGroup.objects.filter(workflow__pool=pool_id, status=TaskStatus.WAITING), pool_id=int)
_FINGERPRINT = CompiledQuery(
    lambda pool_id: _queued(pool_id)
    .values("status").annotate(n=Count("pk"), s=Sum("pk"), q=Sum(F("pk") * F("pk")), m=Max("pk"))
    .values_list("n", "s", "q", "m").order_by(),
    pool_id=int)
_QUEUE = CompiledQuery(
    lambda pool_id: _queued(pool_id)
    .annotate(rank=_priority_rank(), submitted_at=F("workflow__submitted_at"),
              keys_version=F("workflow__pool_keys_version"))
    .order_by("rank", "workflow__submitted_at", "workflow_id", "position")
    .values_list("pk", "workflow_id", "name", "rank", "submitted_at", "position", "scheduling_since",
                 "proof_epoch", "signature", "reason_code", "reason_digest", "idle_fit", "idle_fit_epoch",
                 "keys_version", "workflow__team_id", "preemptions", "workflow__workflow_id"),
    pool_id=int)
_TIMEOUT_CANDIDATES = CompiledQuery(
    lambda pool_id: _queued(pool_id).filter(workflow__queue_timeout_s__isnull=False, scheduling_since__isnull=False)
    .values_list("pk", "workflow_id", "scheduling_since", "workflow__queue_timeout_s")
    .order_by("pk"),
    pool_id=int)
# What placing gangs reads of them (list parameters: PostgreSQL reads them as one array).
_STILL_QUEUED = CompiledQuery(
    lambda ids: TaskGroup.objects.filter(pk__in=ids, status=TaskStatus.SCHEDULING).values_list("pk", flat=True),
    ids=list)
_PLACED_TASKS = CompiledQuery(
    lambda ids: Task.objects.filter(group_id__in=ids).order_by("group_id", "position")
    .only("pk", "group_id", "name", "status", "gpu", "cpu_millis", "memory_bytes", "storage_bytes"),
    ids=list)


def placement_cycle_run(
    *, pool_id: int, now: datetime | None = None, policy: Policy | None = None, on_locked: Any = None,
    options: CycleOptions | None = None,
) -> CycleResult:
    """Run one placement cycle for the pool. Returns what it did (``locked=False``: another cycle ran).

    Lock order, shared with every other writer of a workflow's groups and tasks (cancel, pod sync,
    backend failures): the pool's advisory lock, then the pool row (so its keys cannot change under
    the cycle), then the Workflow rows it writes, in primary-key order; what it writes is guarded by
    the row's status (a gang cancelled meanwhile is not placed).
    """
    options = options or CycleOptions()
    result = CycleResult()
    with transaction.atomic():
        if not pool_lock_try(pool_id):
            result.locked = False
            return result
        if on_locked is not None:
            on_locked()
        pool = _POOL_LOCKED.first(pool_id=pool_id)
        if pool is None:
            return result
        result.pool = pool.name
        if pool.status != PoolStatus.ONLINE:
            not_online_record(pool)
            return result
        now = now or timezone.now()
        # Read before the snapshot: a release committed after this read moves the epoch past it.
        capacity_epoch, inventory_epoch = pool_epochs(pool.pk)
        result.timed_out = _queue_timeouts_apply(pool, now)
        waiting: list[TaskGroup] = _WAITING.all(pool_id=pool.pk)
        if waiting:
            workflows_lock(g.workflow_id for g in waiting)
            result.refresh |= waiting_groups_promote(waiting)
        state = pool.cycle_state or {}
        seen = {"fingerprint": _queue_fingerprint(pool), "epoch": capacity_epoch, "keys_version": pool.keys_version}
        wake = state.get("wake_at")
        if (options.incremental and not state.get("cursor") and {k: state.get(k) for k in seen} == seen
                and (wake is None or now < datetime.fromisoformat(wake))):
            result.idle = True
        else:
            queue = _queue_read(pool)
            proofs = state.get("proofs") if state.get("proofs_epoch") == capacity_epoch else None
            policy = policy or Policy(max_seconds=settings.OSMO_SOLVE_MAX_SECONDS)
            walk = _Walk(pool, queue, now, policy, options, capacity_epoch, inventory_epoch, result,
                         proofs=dict(proofs or {}))
            if queue:
                walk.run()
            if options.incremental:
                # What this walk leaves queued (rows committed by others meanwhile make the next
                # fingerprint differ, which only costs that cycle a walk). An undecided gang is retried
                # by the next cycle: no idle skip after one, nor after a verdict that is no proof.
                gone = set(result.placed) | walk.failed
                state = {"cursor": walk.cursor, "fingerprint": _fingerprint(g.pk for g in queue if g.pk not in gone),
                         "epoch": None if result.undecided or walk.retry else capacity_epoch,
                         "keys_version": pool.keys_version,
                         "wake_at": walk.wake_at, "proofs": walk.proofs, "proofs_epoch": capacity_epoch}
                Pool.objects.filter(pk=pool.pk).update(cycle_state=state)
        if result.refresh:
            workflows_status_refresh(workflows_lock(result.refresh).values())
        jobs.groups_dispatch_request(result.placed)
    if result.placed or result.unschedulable or result.timed_out or result.undecided:
        logger.info(
            "placement.cycle",
            extra={"pool": result.pool, "placed": len(result.placed), "unschedulable": len(result.unschedulable),
                   "undecided": len(result.undecided), "solved": result.solved, "proven": result.proven,
                   "shared": result.shared, "preempted": result.preempted},
        )
    return result


def _fingerprint(pks: Iterable[int]) -> list[int]:
    """:func:`_queue_fingerprint` of a known set of group ids."""
    ids = list(pks)
    return [len(ids), sum(ids), sum(i * i for i in ids), max(ids, default=0)]


def _queue_fingerprint(pool: Pool) -> list[int]:
    """Which gangs are queued, in one aggregate query: count, sum, sum of squares and maximum of
    their ids (equal fingerprints mean an unchanged queue for any change that adds or removes gangs
    short of a contrived collision of all four)."""
    row = _FINGERPRINT.first(pool_id=pool.pk) or (0, 0, 0, 0)
    return [int(value or 0) for value in row]


def _queue_read(pool: Pool) -> list[_Queued]:
    """The pool's SCHEDULING gangs in queue order: one query of small columns."""
    rows = _QUEUE.all(pool_id=pool.pk)
    return [
        _Queued(pk, workflow_id, name, rank, [rank, submitted.isoformat(), workflow_id, position], since, proof,
                signature, code, digest, idle_fit, idle_epoch, keys_version, team_id, preemptions, label)
        for (pk, workflow_id, name, rank, submitted, position, since, proof, signature, code, digest, idle_fit,
             idle_epoch, keys_version, team_id, preemptions, label) in rows
    ]


class _Walk:
    """One walk over a pool's queue (see the module docstring). Decisions are made in memory on one
    domain index; :meth:`run` then writes them: placements per gang, verdicts in bulk."""

    def __init__(
        self, pool: Pool, queue: list[_Queued], now: datetime, policy: Policy, options: CycleOptions,
        capacity_epoch: int, inventory_epoch: int, result: CycleResult, *, proofs: dict[str, int] | None = None,
    ) -> None:
        self.pool, self.queue, self.now, self.policy, self.options = pool, queue, now, policy, options
        self.incremental = options.incremental
        self.capacity_epoch, self.inventory_epoch = capacity_epoch, inventory_epoch
        self.result = result
        self.key_labels = pool_key_labels(pool)
        self._index: DomainIndex | None = None
        self._idle: DomainIndex | None = None
        self.node_ids: dict[str, int] = {}
        self.rows: dict[int, tuple[dict[str, Any], list[list[Any]] | None]] = {}
        self.requests: dict[int, GroupRequest] = {}
        self.memo: dict[str, tuple[dict[str, Any], str]] = {}  # signature -> (reason, status) this cycle
        self.digests: dict[int, tuple[dict[str, Any], str]] = {}  # id(reason) -> (reason, its digest)
        self.never_idle: dict[int, tuple[dict[str, Any], dict[str, Any]]] = {}  # id(reason) -> (reason, variant)
        self.idle_memo: dict[str, bool] = {}
        self.verdicts: dict[int, tuple[dict[str, Any], int | None, str]] = {}  # pk -> (reason, proof, code)
        self.proofs_only: dict[int, int | None] = {}  # pk -> proof, for gangs whose reason did not change
        self.idle_writes: dict[int, bool] = {}
        self.legacy: dict[int, tuple[str, list[list[Any]]]] = {}  # pk -> (signature, task requests) to store
        self.decided: list[tuple[_Queued, Placement, GroupRequest]] = []
        self.cursor: list[Any] | None = None  # where the walk stopped, when it ran out of time
        # Signatures proven unschedulable at this capacity epoch (by this walk or an earlier one):
        # a gang of one is skipped even when its own row does not record the proof.
        self.prior_proofs: dict[str, int] = dict(proofs or {})
        self.proofs: dict[str, int] = dict(proofs or {})
        self.quotas = Quotas.load(pool)
        self.preemptions = Preemptions(pool, self.quotas, policy) if settings.OSMO_PREEMPTION_ENABLED else None
        self.failed: set[int] = set()  # groups failed by a solver error
        self.wake_at: str | None = None  # when a queued gang next crosses the starvation threshold
        self.reserved: tuple[str, ...] | None = None  # machines kept for the starving gang
        self.blocked: list[tuple[str, Vec]] = []  # what is taken off them while a held gang is decided
        self.holding = False  # whether it is taken off now
        self.absent_there: dict[int, frozenset[str]] = {}  # pk -> its placement's machines without LOW work
        # LOW work this walk placed: a resumed walk may place it before protected gangs, and it is no
        # eviction candidate until committed, so a protected gang found unschedulable after it is no
        # proof; ``retry``: such a verdict was made, and the next cycle walks again.
        self.low_placed = False
        self.retry = False

    # -- lazily built state ---------------------------------------------------------------------------

    @property
    def index(self) -> DomainIndex:
        if self._index is None:
            snapshot, self.node_ids = snapshot_load_with_ids(self.pool, key_labels=self.key_labels)
            self._index = DomainIndex(snapshot)
        return self._index

    def idle_index(self) -> DomainIndex:
        if self._idle is None:
            self._idle = DomainIndex(snapshot_empty(self.pool, key_labels=self.key_labels))
        return self._idle

    def _fetch(self, upcoming: list[_Queued]) -> None:
        """Read constraint trees and stored requests of up to FETCH_BATCH upcoming gangs that may need
        solving (not proven at this epoch, no verdict shared in this cycle yet) in one query, and,
        for gangs stored before requests were, their task rows in one more."""
        first, rest = upcoming[0], upcoming[1:]
        maybe = [g for g in rest if g.pk not in self.rows and g.proof_epoch != self.capacity_epoch
                 and not (g.signature and g.signature in self.memo)]
        wanted = [g.pk for g in [first, *maybe] if g.pk not in self.rows][:FETCH_BATCH]
        if not wanted:
            return
        legacy: list[int] = []
        for pk, constraint_tree, task_requests in TaskGroup.objects.filter(pk__in=wanted).values_list(
            "pk", "constraint_tree", "task_requests"
        ):
            self.rows[pk] = (constraint_tree, task_requests)
            if task_requests is None:
                legacy.append(pk)
        if legacy:
            tasks: dict[int, list[Task]] = {}
            for task in Task.objects.filter(group_id__in=legacy).order_by("group_id", "position"):
                tasks.setdefault(task.group_id, []).append(task)
            names = {g.pk: g.name for g in upcoming}
            for pk in legacy:
                group = TaskGroup(pk=pk, name=names[pk], constraint_tree=self.rows[pk][0])
                request = group_request_from_db(group, tasks.get(pk, []))
                stored = task_requests_to_json(request)
                self.rows[pk] = (self.rows[pk][0], stored)
                self.legacy[pk] = (gang_signature(request), stored)

    def request(self, g: _Queued, upcoming: list[_Queued]) -> GroupRequest:
        request = self.requests.get(g.pk)
        if request is None:
            if g.pk not in self.rows:
                self._fetch([g, *upcoming])
            constraint_tree, task_requests = self.rows[g.pk]
            request = self.requests[g.pk] = group_request_from_row(g.name, constraint_tree, task_requests or [])
        return request

    def signature(self, g: _Queued, upcoming: list[_Queued]) -> str:
        if g.signature:
            return g.signature
        self.request(g, upcoming)
        return self.legacy[g.pk][0]

    # -- the walk -----------------------------------------------------------------------------------

    def run(self) -> None:
        queue, result = self.queue, self.result
        start = 0
        cursor = (self.pool.cycle_state or {}).get("cursor") if self.incremental else None
        if cursor:
            start = next((i for i, g in enumerate(queue) if g.order >= cursor), 0)
        result.resumed = start > 0
        walk = queue[start:] + queue[:start]
        starvation = timedelta(seconds=settings.OSMO_STARVATION_SECONDS)
        starving = self._starving_before(queue[:start], starvation)
        # The starving gang's place in the queue: gangs of its priority and below *behind* it are held
        # (in a resumed walk it comes last, and it is not held by its own reservation).
        starving_order: list[Any] | None = None
        if starving is not None:
            starving_order = starving.order
            self._reserve_for(starving, [])
        deadline = _clock() + settings.OSMO_CYCLE_BUDGET_SECONDS
        new_cursor: list[Any] | None = None
        crossings = [g.scheduling_since + starvation for g in queue
                     if g.scheduling_since is not None and g.scheduling_since + starvation > self.now]
        self.wake_at = min(crossings).isoformat() if crossings else None
        for position, g in enumerate(walk):
            if _clock() > deadline:
                # Commit what was decided and let the next cycle carry on from here, rather than run
                # into the task's time limit and roll everything back: big queues must not livelock.
                result.budget_exhausted = True
                new_cursor = g.order
                break
            upcoming = walk[position + 1:position + FETCH_BATCH]
            if g.keys_version != self.pool.keys_version:
                constraint_tree = self._tree(g, upcoming)
                changed = _keys_changed_reason(constraint_tree, self._pool_keys(g), self.pool, self.key_labels)
                if changed is not None:
                    self._record(g, changed, None)
                    result.unschedulable.append(g.pk)
                    continue
            held = starving_order is not None and g.order > starving_order
            if held and self.reserved is None:  # no machines to keep for the starving gang: hold everything
                self._behind_starving(g)
                continue
            self._hold(held)
            if self.quotas and g.rank < LOW_RANK and g.team_id in self.quotas.quota:
                over = self.quotas.over(g, self.request(g, upcoming))
                if over is not None:
                    self._record(g, over, self.capacity_epoch, shared=False)
                    result.unschedulable.append(g.pk)
                    continue
            waited = self.now - (g.scheduling_since or self.now)
            check_idle = starving_order is None and waited > starvation
            idle_known = g.idle_fit is not None and g.idle_fit_epoch == self.inventory_epoch
            # A signature proven by an earlier cycle at this epoch covers a gang that already carries its
            # reason (each was rewritten when that proof was made); a gang new since then is solved or
            # given the shared verdict below, which records its reason.
            proven = g.proof_epoch == self.capacity_epoch or (
                bool(g.signature) and bool(g.reason_digest)
                and self.prior_proofs.get(g.signature) == self.capacity_epoch
            )
            if self.incremental and proven and (idle_known or not check_idle):
                result.proven += 1
                result.unschedulable.append(g.pk)
                if check_idle and g.idle_fit:
                    starving_order = g.order
                    self._reserve_for(g, upcoming)
                continue
            verdict = self._decide(g, upcoming)
            if verdict is None:  # placed, or failed by a solver error
                continue
            reason, status = verdict
            if status == "unschedulable" and g.rank < LOW_RANK and self._preempt(g, upcoming):
                continue
            if held:  # it may fit once the starving gang is placed: solved again next cycle
                self._behind_starving(g)
                continue
            if check_idle:
                if self._fits_idle(g, upcoming, idle_known):
                    starving_order = g.order
                    self._reserve_for(g, upcoming)
                else:
                    reason = self._never_idle(reason)
            proof = self.capacity_epoch if status == "unschedulable" else None
            if proof is not None and g.rank < LOW_RANK and self.low_placed:
                proof, self.retry = None, True
            self._record(g, reason, proof)
            (result.unschedulable if status == "unschedulable" else result.undecided).append(g.pk)
        self._hold(False)
        self.cursor = new_cursor
        self._persist()

    def _starving_before(self, prefix: list[_Queued], starvation: timedelta) -> _Queued | None:
        """The starvation guard over the part of the queue a resumed cycle does not walk first: the
        first gang there that did not fit last time, has waited long enough and fits the idle pool."""
        for g in prefix:
            waited = self.now - (g.scheduling_since or self.now)
            if g.proof_epoch is not None and waited > starvation:
                return g if g.idle_fit and g.idle_fit_epoch == self.inventory_epoch else None
        return None

    # -- the starvation guard's reservation --------------------------------------------------------------

    def _reserve_for(self, g: _Queued, upcoming: list[_Queued]) -> None:
        """Keep machines for a starving gang: those of its placement on the idle pool. Gangs of its
        priority and below behind it are then placed only elsewhere, so that the work on those
        machines drains and nothing of its rank or below takes their place, while the rest of the pool
        keeps being backfilled (docs/design.md §6). None (hold every such gang) if it has no such
        placement."""
        outcome = solve(self.idle_index(), self.request(g, upcoming), self.policy)
        self.reserved = tuple(sorted(outcome.nodes)) if isinstance(outcome, Placement) else None

    def _hold(self, held: bool) -> None:
        """Take the reserved machines' free capacity off the index while a held gang is decided (its
        verdicts and victim searches are memoised apart: :meth:`_memo_key`), give it back otherwise."""
        if held == self.holding:
            return
        if held:
            nodes = self.index.nodes
            for name in self.reserved or ():
                f = nodes[name].free
                if f.gpu or f.cpu or f.memory or f.storage:
                    self.blocked.append((name, (f.gpu, f.cpu, f.memory, f.storage)))
            self.index.place(self.blocked)
        else:
            self.index.release(self.blocked)
            self.blocked = []
        self.holding = held

    def _memo_key(self, g: _Queued, upcoming: list[_Queued]) -> str:
        """The gang's signature, told apart while the reserved machines are held back (a verdict there
        is not one on the whole pool)."""
        signature = self.signature(g, upcoming)
        return f"{signature}|reserved" if signature and self.holding and self.reserved else signature

    def _behind_starving(self, g: _Queued) -> None:
        if g.reason_code != BEHIND_STARVING["code"] or not self.incremental:
            self._record(g, dict(BEHIND_STARVING), None)
        self.result.unschedulable.append(g.pk)

    def _decide(self, g: _Queued, upcoming: list[_Queued]) -> tuple[dict[str, Any], str] | None:
        """Solve the gang (or take the verdict of an identical one); None when it was placed."""
        result = self.result
        if self.incremental:
            shared = self.memo.get(self._memo_key(g, upcoming))
            if shared is not None:
                result.shared += 1
                return shared
        request = self.request(g, upcoming)
        index = self.index
        try:
            if self._absent_place(g, upcoming, request):
                return None
            outcome = solve(index if self.incremental else index.snapshot(self.pool.name), request, self.policy)
        except SoftTimeLimitExceeded:
            raise
        except Exception:  # a solver bug on one gang must not block the pool's whole queue
            logger.exception("placement.solver_error", extra={"pool": self.pool.name, "group": g.pk})
            self._index = DomainIndex(index.snapshot(self.pool.name))  # the search may have left it half-way
            if self.preemptions is not None:
                self.preemptions.forget_absent()
            group = TaskGroup.objects.select_related("workflow").get(pk=g.pk)
            workflows_lock([g.workflow_id])
            self.failed.add(g.pk)
            group_fail(group, TaskStatus.FAILED_SERVER_ERROR,
                       message="internal error while placing this group; the operators' logs have the details")
            result.refresh.add(g.workflow_id)
            return None
        result.solved += 1
        if isinstance(outcome, Placement):
            self._take(g, request, outcome)
            return None
        assert isinstance(outcome, Unplaceable)
        verdict = (result_to_json(outcome), outcome.status)
        if self.incremental:
            self.memo[self._memo_key(g, upcoming)] = verdict
        return verdict

    def _take(self, g: _Queued, request: GroupRequest, placement: Placement) -> None:
        """Place the gang on the cycle's index (and, protected work, on the view without LOW work)."""
        assignments = takes(request, placement)
        self.index.place(assignments)
        if g.rank < LOW_RANK and self.preemptions is not None:
            self.preemptions.protected_placed(assignments)
        self._placed(g, request, placement)

    def _placed(self, g: _Queued, request: GroupRequest, placement: Placement) -> None:
        """A gang placed on the index (by :meth:`_take`, or by a preemption): counted against its
        team's quota and kept to be written."""
        if self.quotas:
            self.quotas.add(g, request)
        self.decided.append((g, placement, request))
        self.result.placed.append(g.pk)
        self.low_placed |= g.rank >= LOW_RANK

    def _absent_place(self, g: _Queued, upcoming: list[_Queued], request: GroupRequest) -> bool:
        """A HIGH or NORMAL gang while LOW gangs run: solve it on the view without LOW work and take
        that placement when it is free on the real index too (docs/design.md §9: protected work packed
        as if LOW work were not there). A gang that does not fit that view cannot be helped by
        preemption in this cycle. True when it was placed."""
        if g.rank >= LOW_RANK or self.preemptions is None:
            return False
        outcome = self._absent_solve(request)
        if outcome is None:
            return False
        if isinstance(outcome, Placement):
            if fits_on(self.index, takes(request, outcome)):
                self._take(g, request, outcome)
                return True
            self.absent_there[g.pk] = outcome.nodes
        elif outcome.status == "unschedulable":
            self.preemptions.hopeless_mark(self._memo_key(g, upcoming))
        return False

    def _absent_solve(self, request: GroupRequest) -> Placement | Unplaceable | None:
        """Solve on the view without LOW work (None: no LOW gang runs)."""
        assert self.preemptions is not None
        if self.preemptions.absent is None and self.holding:  # built on the whole pool, kept machines free
            self._hold(False)
            self.preemptions.absent_view(self.index)
            self._hold(True)
        absent = self.preemptions.absent_view(self.index)
        if absent is None:
            return None
        self.result.solved += 1
        return solve(absent if self.incremental else absent.snapshot(self.pool.name), request, self.policy)

    def _absent_region(self, g: _Queued, request: GroupRequest) -> frozenset[str] | None:
        """The machines of the gang's placement on the view without LOW work, where its victims are
        sought first: kept from :meth:`_absent_place`, or solved now for a gang that took an identical
        gang's verdict instead of being solved."""
        if g.pk in self.absent_there:
            return self.absent_there.pop(g.pk)
        outcome = self._absent_solve(request)
        return outcome.nodes if isinstance(outcome, Placement) else None

    def _preempt(self, g: _Queued, upcoming: list[_Queued]) -> bool:
        """Place a HIGH or NORMAL gang (within its quota: checked before) by evicting LOW gangs
        (:mod:`workflows.scheduling.preemption`). True when it was placed."""
        if self.preemptions is None:
            return False
        signature = self._memo_key(g, upcoming)
        if not self.preemptions.worth_trying(signature):  # before reading the gang's request: no query
            return False
        request = self.request(g, upcoming)
        kept = frozenset(self.reserved or ()) if self.holding else frozenset()
        placement = self.preemptions.try_place(self.index, request, signature, g.workflow_label, kept,
                                               there=self._absent_region(g, request))
        if placement is None:
            return False
        if self.holding:  # victims' machines among the reserved ones: hold back what they freed there too
            self._hold(False)
            self._hold(True)
        self._placed(g, request, placement)
        return True

    def _fits_idle(self, g: _Queued, upcoming: list[_Queued], known: bool) -> bool:
        """Whether the gang fits the pool once everything of ours finished (cached on the gang per
        inventory epoch, shared between identical gangs within the cycle)."""
        if known and self.incremental:
            return bool(g.idle_fit)
        signature = self.signature(g, upcoming)
        fits = self.idle_memo.get(signature) if self.incremental else None
        if fits is None:
            fits = isinstance(solve(self.idle_index(), self.request(g, upcoming), self.policy), Placement)
            self.idle_memo[signature] = fits
        self.idle_writes[g.pk] = fits
        return fits

    def _tree(self, g: _Queued, upcoming: list[_Queued]) -> dict[str, Any]:
        if g.pk not in self.rows:
            self._fetch([g, *upcoming])
        return self.rows[g.pk][0]

    def _pool_keys(self, g: _Queued) -> list[list[str]]:
        return Workflow.objects.filter(pk=g.workflow_id).values_list("pool_keys", flat=True).get() or []

    def _record(self, g: _Queued, reason: dict[str, Any], proof: int | None, *, shared: bool = True) -> None:
        # Reasons are a few KB of JSON and thousands of gangs share a handful: a gang whose reason did
        # not change is not rewritten; its proof is recorded per signature in the pool's cycle state
        # (only a gang without a signature, stored before signatures were, needs its own row moved).
        # A verdict of this gang alone (its team's quota) is never shared with its signature.
        shared = shared and bool(g.signature)
        if proof is not None and shared:
            self.proofs[g.signature] = proof
        if self.incremental and g.reason_digest and g.reason_digest == self._digest(reason):
            if proof != g.proof_epoch and not (proof is not None and shared):
                self.proofs_only[g.pk] = proof
            return
        self.verdicts[g.pk] = (reason, proof, str(reason.get("code", ""))[:40])

    def _never_idle(self, reason: dict[str, Any]) -> dict[str, Any]:
        """The verdict, saying the gang does not fit the idle pool either: one dict per shared verdict
        (so that gangs sharing one still share its digest and its write)."""
        cached = self.never_idle.get(id(reason))
        if cached is None or cached[0] is not reason:
            variant = {**reason, "fits_empty_pool": False,
                       "message": f"{reason.get('message', '')} (it does not fit even when the pool is idle)"}
            cached = self.never_idle[id(reason)] = (reason, variant)
        return cached[1]

    def _digest(self, reason: dict[str, Any]) -> str:
        # Gangs sharing a verdict share its dict: hash it once (json.dumps of a reason is ~10 us, and
        # a release makes every queued gang's reason be compared again).
        cached = self.digests.get(id(reason))
        if cached is None or cached[0] is not reason:
            cached = self.digests[id(reason)] = (reason, reason_digest(reason))
        return cached[1]

    # -- writes -----------------------------------------------------------------------------------------

    def _persist(self) -> None:
        result = self.result
        if self.preemptions is not None and self.preemptions.evicted:
            # Every workflow this transaction writes is locked at once, in primary-key order.
            workflows_lock(self.preemptions.workflow_ids() | {g.workflow_id for g, _p, _r in self.decided})
            result.refresh |= self.preemptions.persist()
            result.preempted = len(self.preemptions.evicted)
        placed = self._placements_persist()
        result.placed = placed
        now = timezone.now()
        # One UPDATE per distinct verdict: gangs that share one share the dict (grouped by identity,
        # then by content, so equal reasons made by separate solves are still written together).
        by_identity: dict[tuple[int, int | None, str], tuple[dict[str, Any], list[int]]] = {}
        for pk, (reason, proof, code) in self.verdicts.items():
            by_identity.setdefault((id(reason), proof, code), (reason, []))[1].append(pk)
        by_reason: dict[tuple[str, int | None, str], tuple[dict[str, Any], list[int]]] = {}
        for (_identity, proof, code), (reason, pks) in by_identity.items():
            by_reason.setdefault((self._digest(reason), proof, code), (reason, []))[1].extend(pks)
        for (digest, proof, code), (reason, pks) in by_reason.items():
            TaskGroup.objects.filter(pk__in=pks, status=TaskStatus.SCHEDULING).update(
                unschedulable_reason=reason, proof_epoch=proof, reason_code=code, reason_digest=digest,
                updated_at=now,
            )
        by_proof: dict[int | None, list[int]] = {}
        for pk, proof in self.proofs_only.items():
            by_proof.setdefault(proof, []).append(pk)
        for proof, pks in by_proof.items():
            TaskGroup.objects.filter(pk__in=pks, status=TaskStatus.SCHEDULING).update(proof_epoch=proof)
        for fits in (True, False):
            pks = [pk for pk, value in self.idle_writes.items() if value is fits]
            if pks:
                TaskGroup.objects.filter(pk__in=pks).update(idle_fit=fits, idle_fit_epoch=self.inventory_epoch)
        if self.legacy:
            groups = [TaskGroup(pk=pk, signature=sig, task_requests=reqs) for pk, (sig, reqs) in self.legacy.items()]
            TaskGroup.objects.bulk_update(groups, ["signature", "task_requests"])

    def _placements_persist(self) -> list[int]:
        """Reserve capacity and move each decided gang to INITIALIZING, guarded by its status: a gang
        cancelled since the queue was read is skipped, and the pool's epoch moves on so that verdicts
        made against the capacity it would have taken are revisited."""
        if not self.decided:
            return []
        workflows = workflows_lock(g.workflow_id for g, _placement, _request in self.decided)
        now = timezone.now()  # not the cycle's start: a long cycle must not look like a stale dispatch
        # Only gangs still queued are placed (a cancel may have committed since the queue was read);
        # the workflow locks above keep them so until this transaction ends.
        still = set(_STILL_QUEUED.all(ids=[g.pk for g, _p, _r in self.decided]))
        kept = [(g, placement) for g, placement, _request in self.decided if g.pk in still]
        rows = [TaskGroup(pk=g.pk, status=TaskStatus.INITIALIZING, unschedulable_reason=None,
                          placement_report=report_to_json(placement), placed_at=now, dispatch_requested_at=now,
                          updated_at=now, proof_epoch=None, reason_code="", reason_digest="") for g, placement in kept]
        bulk_set(TaskGroup, rows, ["status", "unschedulable_reason", "placement_report", "placed_at",
                                   "dispatch_requested_at", "updated_at", "proof_epoch", "reason_code",
                                   "reason_digest"])
        if len(kept) < len(self.decided):
            pool_epochs_bump([self.pool.pk])
        if not kept:
            return []
        tasks_of: dict[int, list[Task]] = {}
        for task in _PLACED_TASKS.all(ids=[g.pk for g, _p in kept]):
            tasks_of.setdefault(task.group_id, []).append(task)
        tasks: list[Task] = []
        reservations: list[Reservation] = []
        transitions: list[StatusTransition] = []
        for g, placement in kept:
            workflow_id = workflows[g.workflow_id].workflow_id
            transitions.append(StatusTransition(workflow_id=g.workflow_id, group_id=g.pk,
                                                from_status=TaskStatus.SCHEDULING,
                                                to_status=TaskStatus.INITIALIZING, message="placed"))
            assignments = placement.tasks
            for task in tasks_of.get(g.pk, []):
                node_name = assignments[task.name]
                task.node_id = self.node_ids[node_name]
                task.node_name = node_name  # kept when the node is deleted
                task.pod_name = pod_name_for(workflow_id, task.name, g.preemptions)
                previous = task.status
                task.status = TaskStatus.INITIALIZING
                task.updated_at = now
                tasks.append(task)
                reservations.append(Reservation(task=task, node_id=task.node_id, node_name=node_name, pool=self.pool,
                                                gpu=task.gpu,
                                                cpu_millis=task.cpu_millis, memory_bytes=task.memory_bytes,
                                                storage_bytes=task.storage_bytes))
                transitions.append(StatusTransition(workflow_id=g.workflow_id, group_id=g.pk, task=task,
                                                    from_status=previous, to_status=TaskStatus.INITIALIZING,
                                                    message=f"placed on {node_name}"))
        bulk_set(Task, tasks, ["node", "node_name", "pod_name", "status", "updated_at"])
        bulk_insert(Reservation, reservations)
        bulk_insert(StatusTransition, transitions)
        self.result.refresh |= {g.workflow_id for g, _p in kept}
        return [g.pk for g, _p in kept]


def _keys_changed_reason(
    constraint_tree: dict[str, Any], pool_keys: list[list[str]], pool: Pool, key_labels: list[tuple[str, str]]
) -> dict[str, Any] | None:
    """A queued group whose tree uses a key that was removed, relabelled, or keys whose order changed
    since submission is not placed under the new semantics: it waits with this reason."""
    keys = [key for key, _label in key_labels]
    position = {key: index for index, key in enumerate(keys)}
    label_now = dict(key_labels)
    label_then = {key: label for key, label in pool_keys or []}
    missing: set[str] = set()
    relabelled: set[str] = set()
    reordered = False

    def walk(node: dict[str, Any], parent_index: int) -> None:
        nonlocal reordered
        key = node["key"]
        if key not in position:
            missing.add(key)
        else:
            if position[key] <= parent_index:
                reordered = True
            if key in label_then and label_then[key] != label_now[key]:
                relabelled.add(key)
        for child in node.get("children", []):
            walk(child, position.get(key, parent_index))

    for child in (constraint_tree or {}).get("children", []):
        walk(child, -1)
    if not (missing or relabelled or reordered):
        return None
    what = []
    if missing:
        what.append(f"removed key(s) {', '.join(sorted(missing))}")
    if relabelled:
        what.append(f"key(s) {', '.join(sorted(relabelled))} now read another node label")
    if reordered:
        what.append("a changed key order")
    return {
        "status": "unschedulable",
        "code": ReasonCode.POOL_KEYS_CHANGED.value,
        "missing_keys": sorted(missing),
        "relabelled_keys": sorted(relabelled),
        "reordered": reordered,
        "pool_keys": keys,
        "message": f"pool {pool.name} topology keys changed since submission ({'; '.join(what)}); this group's "
        "constraint tree no longer means the same thing. Cancel and resubmit it.",
    }




def _queue_timeouts_apply(pool: Pool, now: datetime) -> list[int]:
    """Groups queued longer than their workflow's queue_timeout fail with FAILED_QUEUE_TIMEOUT
    (one query to find them; only the expired ones are locked and written)."""
    candidates = _TIMEOUT_CANDIDATES.all(pool_id=pool.pk)
    expired = [(pk, wf) for pk, wf, since, limit in candidates
               if since is not None and limit is not None and now - since > timedelta(seconds=limit)]
    if not expired:
        return []
    workflows = workflows_lock(wf for _pk, wf in expired)
    done = []
    for group in TaskGroup.objects.filter(pk__in=[pk for pk, _wf in expired], status=TaskStatus.SCHEDULING
                                          ).order_by("pk"):
        group.workflow = workflows[group.workflow_id]
        reason = (group.unschedulable_reason or {}).get("message", "")
        message = f"queued longer than queue_timeout ({group.workflow.queue_timeout_s}s)"
        if reason:
            message = f"{message}; last reason: {reason}"
        group_fail(group, TaskStatus.FAILED_QUEUE_TIMEOUT, message=message)
        workflow_status_refresh(group.workflow)
        done.append(group.pk)
    return done
