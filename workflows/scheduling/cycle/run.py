"""One placement cycle of one pool: lock -> read -> walk -> apply -> dispatch (docs/design.md §6, §8).

One cycle per pool at a time: on PostgreSQL a transaction-scoped advisory lock keyed by the pool
(other pools proceed in parallel on other workers); on SQLite the IMMEDIATE transaction already
serialises writers. Everything the cycle decides is written in that one transaction, so a worker
killed mid-cycle leaves nothing half-done: the next cycle (the periodic tick at the latest) starts
over from the database. Dispatch is enqueued on commit only.

The three steps have one owner each: :mod:`~workflows.scheduling.cycle.read` reads the queue into
values, :mod:`~workflows.scheduling.cycle.walk` decides (no writes), and
:mod:`~workflows.scheduling.cycle.apply` writes the decision through the lifecycle. Before them,
queued gangs past their queue timeout fail and WAITING groups whose upstream completed are queued.

An idle cycle does not walk at all: when the queue's membership (a fingerprint of its group ids), the
capacity epoch and the pool's keys are what the last complete walk left, and no queued gang has
crossed the starvation threshold since, that walk's decisions still stand. A gang proven
unschedulable records the pool's capacity epoch (:class:`~scheduler.models.PoolEpoch`) of its proof;
it is not solved again until the epoch moves (capacity released, inventory or keys changed).
"""

from __future__ import annotations

import gc
import logging
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from osmo import config as osmo_config
from scheduler.choices import PoolStatus
from scheduler.fairshare.usage import team_usage_by_id
from scheduler.models import Pool
from scheduler.placement import Policy
from scheduler.reads.snapshot import pool_key_labels
from scheduler.services.reservations import pool_epochs
from workflows import jobs
from workflows.choices import TaskStatus
from workflows.lifecycle.transitions import (
    group_fail,
    waiting_groups_promote,
    workflow_status_refresh,
    workflows_status_refresh,
)
from workflows.models import PoolCycleState, TaskGroup, Workflow
from workflows.scheduling.admission import Quotas, backend_not_online_reason, not_online_record
from workflows.scheduling.cycle.apply import decision_apply
from workflows.scheduling.cycle.read import (
    DatabaseSource,
    cycle_state_of,
    pool_locked,
    queue_facts,
    queue_fingerprint,
    queue_read,
    timeout_candidates,
    waiting_groups,
)
from workflows.scheduling.cycle.state import Carried, CycleState
from workflows.scheduling.cycle.values import CycleInput, Decision
from workflows.scheduling.cycle.walk import Walk
from workflows.scheduling.locks import pool_lock_try, workflows_lock

logger = logging.getLogger("workflows.scheduling.cycle")


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


@dataclass(frozen=True, slots=True)
class CycleStart:
    """The pool as a cycle found it once it holds the pool's lock (before reading the queue)."""

    pool: Pool
    now: datetime
    capacity_epoch: int
    inventory_epoch: int
    fingerprint: list[int]  # which gangs are queued once timeouts and promotions are written


def cycle_begin(result: CycleResult, *, pool_id: int, now: datetime | None,
                on_locked: Callable[[], Any] | None = None) -> CycleStart | None:
    """Lock the pool, fail gangs past their queue timeout and queue WAITING groups whose upstream
    completed. None when there is nothing to walk (the lock is taken, the pool is gone or not ONLINE).
    Lock order, shared with every other writer of a workflow's groups and tasks (cancel, pod sync,
    backend failures): the pool's advisory lock, then the pool row (so its keys cannot change under
    the cycle), then the Workflow rows it writes, in primary-key order."""
    if not pool_lock_try(pool_id):
        result.locked = False
        return None
    if on_locked is not None:
        on_locked()
    pool = pool_locked(pool_id)
    if pool is None:
        return None
    result.pool = pool.name
    if pool.status != PoolStatus.ONLINE:
        not_online_record(pool)
        return None
    backend_down = backend_not_online_reason(pool)
    if backend_down is not None:
        not_online_record(pool, backend_down)
        return None
    now = now or timezone.now()
    # Read before the snapshot: a release committed after this read moves the epoch past it.
    capacity_epoch, inventory_epoch = pool_epochs(pool.pk)
    facts = queue_facts(pool.pk)  # what is queued and waiting: the reads below only when they may find something
    result.timed_out = _queue_timeouts_apply(pool, now) if facts.timeouts_maybe_due(now) else []
    waiting = waiting_groups(pool.pk) if facts.waiting else []
    if waiting:
        workflows_lock(g.workflow_id for g in waiting)
        result.refresh |= waiting_groups_promote(waiting)
    fingerprint = queue_fingerprint(pool.pk) if result.timed_out or waiting else facts.fingerprint
    return CycleStart(pool, now, capacity_epoch, inventory_epoch, fingerprint)


def cycle_input_read(start: CycleStart, carried: Carried | None = None,
                     ) -> tuple[CycleInput, DatabaseSource, Quotas | None]:
    """The read step: the queue and the pool's facts as a value, the source of what is read on demand,
    and the teams' quotas. ``carried``: what the previous cycle left that still stands
    (:meth:`~workflows.scheduling.cycle.state.CycleState.carried`; None: nothing). A resumed walk orders
    the queue by the fair-share usage the stopped walk saw, so a team's place does not move under the
    cursor (a gang moved before it would wait for the next full walk; one moved after it would be
    walked twice)."""
    carried = carried or Carried(None, None, {}, {})
    cursor = carried.cursor
    pool = start.pool
    key_labels = pool_key_labels(pool)
    frozen: dict[int | None, float] | None = None
    if pool.fairshare_half_life > 0:
        frozen = carried.usage if carried.usage is not None else team_usage_by_id(pool, now=start.now)
    queue = queue_read(pool, start.now, usage=frozen)
    if cursor and queue and len(cursor) != len(queue[0].order):
        cursor = None  # fair share turned on or off since: the key's shape changed (walk from the start)
    knobs = osmo_config.scheduler()
    cycle = CycleInput(
        pool_id=pool.pk, pool_name=pool.name, keys_version=pool.keys_version, key_labels=tuple(key_labels),
        now=start.now, capacity_epoch=start.capacity_epoch, inventory_epoch=start.inventory_epoch,
        queue=tuple(queue), cursor=cursor, usage=frozen, proofs=carried.proofs,
        starvation=timedelta(seconds=pool.starvation_wait_seconds()), max_holds=knobs.starvation_max_holds,
        budget_seconds=knobs.cycle_budget_seconds, preemption=knobs.preemption_enabled,
        min_runtime=float(pool.min_runtime),
        blocked_since=carried.blocked_since,
    )
    return cycle, DatabaseSource(pool, key_labels), Quotas.load(pool)


def cycle_apply(result: CycleResult, start: CycleStart, decision: Decision) -> dict[int, Workflow]:
    """The apply step, and what the cycle reports of it. Returns the workflow rows it locked, by id."""
    result.placed, refresh, locked = decision_apply(decision, pool_id=start.pool.pk,
                                                    inventory_epoch=start.inventory_epoch)
    result.refresh |= refresh
    result.preempted = len(decision.evictions)
    result.unschedulable, result.undecided = list(decision.unschedulable), list(decision.undecided)
    result.solved, result.proven, result.shared = decision.solved, decision.proven, decision.shared
    result.resumed, result.budget_exhausted = decision.resumed, decision.budget_exhausted
    return locked


def cycle_end(result: CycleResult, locked: Mapping[int, Workflow] | None = None) -> None:
    """Recompute the workflows the cycle moved and ask for the placed gangs' pods (on commit).
    ``locked``: workflow rows the apply step locked (and wrote nothing to), by id; the others are
    locked and read here."""
    if result.refresh:
        workflows = {pk: row for pk, row in (locked or {}).items() if pk in result.refresh}
        workflows.update(workflows_lock(result.refresh - workflows.keys()))
        workflows_status_refresh(workflows.values())
    jobs.groups_dispatch_request(result.placed)


def placement_cycle_run(
    *, pool_id: int, now: datetime | None = None, policy: Policy | None = None,
    on_locked: Callable[[], Any] | None = None,
) -> CycleResult:
    """Run one placement cycle for the pool. Returns what it did (``locked=False``: another cycle ran).
    What it writes is guarded by the row's status (a gang cancelled meanwhile is not placed)."""
    result = CycleResult()
    locked: dict[int, Workflow] = {}
    with collector_paused(), transaction.atomic():
        start = cycle_begin(result, pool_id=pool_id, now=now, on_locked=on_locked)
        if start is None:
            return result
        pool = start.pool
        carried = CycleState.from_json(cycle_state_of(pool)).carried(
            fingerprint=start.fingerprint, capacity_epoch=start.capacity_epoch, keys_version=pool.keys_version,
            now=start.now)
        if carried is None:
            result.idle = True
        else:
            cycle, source, quotas = cycle_input_read(start, carried)
            decision = Walk(cycle, source, policy or Policy(max_seconds=osmo_config.scheduler().solve_max_seconds),
                            quotas=quotas).decide()
            locked = cycle_apply(result, start, decision)
            after = CycleState.after(cycle, decision, gone=set(result.placed) | {g.pk for g in decision.failed})
            _cycle_state_store(pool.pk, after)
        cycle_end(result, locked)
    if result.placed or result.unschedulable or result.timed_out or result.undecided:
        logger.info(
            "placement.cycle",
            extra={"pool": result.pool, "placed": len(result.placed), "unschedulable": len(result.unschedulable),
                   "undecided": len(result.undecided), "solved": result.solved, "proven": result.proven,
                   "shared": result.shared, "preempted": result.preempted},
        )
    return result


def _cycle_state_store(pool_id: int, state: CycleState) -> None:
    """Write what the cycle hands to the next: one upsert, whether the pool's row exists or not."""
    PoolCycleState.objects.bulk_create([PoolCycleState(pool_id=pool_id, state=state.to_json())],
                                       update_conflicts=True, unique_fields=["pool"], update_fields=["state"])


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for one cycle (docs/design.md §8, "what a cycle allocates").
    A cycle keeps tens of thousands of new containers alive until it ends (the queue's rows, the domain
    index, the walk's memo): their count sets off full collections, each of which traverses every
    object the process holds (~0.1 s apiece in a worker holding a pool of 20,736 machines). What the
    cycle leaves behind is collected after it, on the collector's next turn. The collector is turned
    back on only if it was on (a cycle run while it is off, by a caller or another thread's cycle,
    leaves it as it found it)."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def _queue_timeouts_apply(pool: Pool, now: datetime) -> list[int]:
    """Groups queued longer than their workflow's queue_timeout fail with FAILED_QUEUE_TIMEOUT
    (one query to find them; only the expired ones are locked and written)."""
    expired = [c for c in timeout_candidates(pool.pk)
               if now - c.scheduling_since > timedelta(seconds=c.queue_timeout_s)]
    if not expired:
        return []
    workflows = workflows_lock(c.workflow_id for c in expired)
    done = []
    for group in TaskGroup.objects.filter(pk__in=[c.pk for c in expired], status=TaskStatus.SCHEDULING
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
