"""The placement cycle of one pool: lock -> snapshot -> solve each pending gang -> persist -> dispatch.

One cycle per pool at a time: on PostgreSQL a transaction-scoped advisory lock keyed by the pool
(other pools proceed in parallel on other workers); on SQLite the IMMEDIATE transaction already
serialises writers. Everything the cycle decides is written in that one transaction, so a worker
killed mid-cycle leaves nothing half-done: the next cycle (the periodic tick at the latest) starts
over from the database. Dispatch is enqueued on commit only.

Order: priority (HIGH, NORMAL, LOW), then submission time, then group position. Backfill: a later
group that fits may go ahead of one that does not. Starvation guard: once the first group that does
not fit has waited longer than ``OSMO_STARVATION_SECONDS``, no group of equal or lower priority is
backfilled behind it, so capacity freed by finishing work accumulates until the big gang fits.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import transaction
from django.db.models import Case, IntegerField, Value, When
from django.utils import timezone

from scheduler import jobs
from scheduler.dispatch.naming import pod_name_for
from scheduler.models import Pool, Reservation
from scheduler.placement import ClusterSnapshot, NodeState, Placement, Policy, Resources, solve
from scheduler.results import report_to_json, result_to_json
from scheduler.snapshot import pool_key_labels, snapshot_empty, snapshot_load_with_ids
from workflows.choices import PRIORITY_RANK, TaskStatus
from workflows.lifecycle.transitions import group_fail, waiting_groups_promote, workflow_status_refresh
from workflows.models import StatusTransition, Task, TaskGroup, Workflow
from workflows.scheduling.locks import pool_lock_try, workflows_lock
from workflows.scheduling.requests import group_request_from_db

logger = logging.getLogger(__name__)


@dataclass
class CycleResult:
    pool: str = ""
    locked: bool = True
    budget_exhausted: bool = False
    placed: list[int] = field(default_factory=list)
    unschedulable: list[int] = field(default_factory=list)
    timed_out: list[int] = field(default_factory=list)
    refresh: set[int] = field(default_factory=set)  # workflows whose status must be recomputed


def _priority_rank():
    return Case(
        *[When(workflow__priority=name, then=Value(rank)) for name, rank in PRIORITY_RANK.items()],
        default=Value(9),
        output_field=IntegerField(),
    )


def placement_cycle_run(
    *, pool_id: int, now: datetime | None = None, policy: Policy | None = None, on_locked=None
) -> CycleResult:
    """Run one placement cycle for the pool. Returns what it did (``locked=False``: another cycle ran).

    Lock order, shared with every other writer of a workflow's groups and tasks (cancel, pod sync,
    backend failures): the pool's advisory lock, then the pool row (so its keys cannot change under
    the cycle), then the affected Workflow rows in primary-key order; groups are re-read after that,
    so nothing decided here rests on a row another writer changed meanwhile.
    """
    result = CycleResult()
    with transaction.atomic():
        if not pool_lock_try(pool_id):
            result.locked = False
            return result
        if on_locked is not None:
            on_locked()
        pool = Pool.objects.select_for_update(no_key=True).filter(pk=pool_id).first()
        if pool is None:
            return result
        result.pool = pool.name
        now = now or timezone.now()
        queued = TaskGroup.objects.filter(
            workflow__pool=pool, status__in=[TaskStatus.SCHEDULING, TaskStatus.WAITING]
        )
        workflows = workflows_lock(queued.values_list("workflow_id", flat=True))
        result.timed_out = _queue_timeouts_apply(pool, now, workflows)
        result.refresh |= waiting_groups_promote(
            TaskGroup.objects.filter(workflow__pool=pool, status=TaskStatus.WAITING).select_related("workflow")
        )
        groups = list(
            TaskGroup.objects.filter(workflow__pool=pool, status=TaskStatus.SCHEDULING, workflow__in=list(workflows))
            .annotate(rank=_priority_rank())
            .order_by("rank", "workflow__submitted_at", "workflow_id", "position")
        )
        for group in groups:
            group.workflow = workflows[group.workflow_id]  # the locked instance, refreshed once below
        if groups:
            _place_groups(pool, groups, now, policy or Policy(), result)
        for workflow_id in sorted({g.workflow_id for g in groups if g.pk in result.placed} | result.refresh):
            workflow_status_refresh(workflows[workflow_id])
        for group_id in result.placed:
            jobs.group_dispatch_request(group_id)
    if result.placed or result.unschedulable or result.timed_out:
        logger.info(
            "placement.cycle",
            extra={"pool": result.pool, "placed": len(result.placed), "unschedulable": len(result.unschedulable)},
        )
    return result


def _place_groups(pool: Pool, groups: list[TaskGroup], now: datetime, policy: Policy, result: CycleResult) -> None:
    key_labels = pool_key_labels(pool)
    snapshot, node_ids = snapshot_load_with_ids(pool, key_labels=key_labels)
    state: dict[str, NodeState] = {node.name: node for node in snapshot.nodes}
    tasks_by_group: dict[int, list[Task]] = {}
    for task in Task.objects.filter(group__in=groups).order_by("group_id", "position"):
        tasks_by_group.setdefault(task.group_id, []).append(task)

    starving_rank: int | None = None
    starvation = timedelta(seconds=settings.OSMO_STARVATION_SECONDS)
    deadline = time.monotonic() + settings.OSMO_CYCLE_BUDGET_SECONDS
    empty_pool: ClusterSnapshot | None = None
    current = snapshot
    dirty = False
    for group in groups:
        if time.monotonic() > deadline:
            # Commit what was decided and let a fresh cycle carry on, rather than run into the
            # task's time limit and roll everything back: big queues must not livelock.
            result.budget_exhausted = True
            break
        if dirty:
            current = ClusterSnapshot(pool=snapshot.pool, keys=snapshot.keys, nodes=tuple(state.values()))
            dirty = False
        workflow: Workflow = group.workflow
        changed = _keys_changed_reason(group, workflow, pool, key_labels)
        if changed is not None:
            _reason_record(group, changed)
            result.unschedulable.append(group.pk)
            continue
        if starving_rank is not None and group.rank >= starving_rank:
            _reason_record(
                group,
                {
                    "status": "waiting",
                    "code": "behind_starving_group",
                    "message": "waiting: an older gang that does not fit yet goes first",
                },
            )
            result.unschedulable.append(group.pk)
            continue
        tasks = tasks_by_group.get(group.pk, [])
        request = group_request_from_db(group, tasks)
        try:
            outcome = solve(current, request, policy)
        except SoftTimeLimitExceeded:
            raise
        except Exception:  # a solver bug on one gang must not block the pool's whole queue
            logger.exception("placement.solver_error", extra={"pool": pool.name, "group": group.pk})
            group_fail(group, TaskStatus.FAILED_SERVER_ERROR,
                       message="internal error while placing this group; the operators' logs have the details")
            result.refresh.add(workflow.pk)
            continue
        if isinstance(outcome, Placement):
            if _placement_persist(group, tasks, outcome, node_ids, pool):
                assignments = outcome.tasks
                for task in tasks:
                    node = state[assignments[task.name]]
                    state[node.name] = NodeState(
                        name=node.name,
                        labels=node.labels,
                        schedulable=node.schedulable,
                        free=Resources(
                            gpu=node.free.gpu - task.gpu,
                            cpu=node.free.cpu - task.cpu_millis,
                            memory=node.free.memory - task.memory_bytes,
                            storage=node.free.storage - task.storage_bytes,
                        ),
                    )
                dirty = True
                result.placed.append(group.pk)
            continue
        reason = result_to_json(outcome)
        waited = now - (group.scheduling_since or now)
        if starving_rank is None and waited > starvation:
            # Only a gang that fits the pool once running work has finished may hold the line; one
            # that cannot fit even the empty pool would block everything behind it forever.
            if empty_pool is None:
                empty_pool = snapshot_empty(pool, key_labels=key_labels)
            if isinstance(solve(empty_pool, request, policy), Placement):
                starving_rank = group.rank
            else:
                reason = {**reason, "fits_empty_pool": False,
                          "message": f"{reason.get('message', '')} (it does not fit even when the pool is idle)"}
        _reason_record(group, reason)
        result.unschedulable.append(group.pk)


def _keys_changed_reason(
    group: TaskGroup, workflow: Workflow, pool: Pool, key_labels: list[tuple[str, str]]
) -> dict | None:
    """A queued group whose tree uses a key that was removed, relabelled, or keys whose order changed
    since submission is not placed under the new semantics: it waits with this reason."""
    if workflow.pool_keys_version == pool.keys_version:
        return None
    keys = [key for key, _label in key_labels]
    position = {key: index for index, key in enumerate(keys)}
    label_now = dict(key_labels)
    label_then = {key: label for key, label in workflow.pool_keys or []}
    missing: set[str] = set()
    relabelled: set[str] = set()
    reordered = False

    def walk(node: dict, parent_index: int) -> None:
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

    for child in (group.constraint_tree or {}).get("children", []):
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
        "code": "pool_keys_changed",
        "missing_keys": sorted(missing),
        "relabelled_keys": sorted(relabelled),
        "reordered": reordered,
        "pool_keys": keys,
        "message": f"pool {pool.name} topology keys changed since submission ({'; '.join(what)}); this group's "
        "constraint tree no longer means the same thing. Cancel and resubmit it.",
    }


def _reason_record(group: TaskGroup, reason: dict) -> None:
    if group.unschedulable_reason != reason:
        group.unschedulable_reason = reason
        group.save(update_fields=["unschedulable_reason", "updated_at"])


def _placement_persist(
    group: TaskGroup, tasks: list[Task], placement: Placement, node_ids: dict[str, int], pool: Pool
) -> bool:
    """Reserve capacity and move the gang to INITIALIZING. False when the group changed under us
    (e.g. cancelled since it was read): then nothing is written."""
    now = timezone.now()  # not the cycle's start: a long cycle must not look like a stale dispatch
    updated = TaskGroup.objects.filter(pk=group.pk, status=TaskStatus.SCHEDULING).update(
        status=TaskStatus.INITIALIZING,
        unschedulable_reason=None,
        placement_report=report_to_json(placement),
        placed_at=now,
        dispatch_requested_at=now,
        updated_at=now,
    )
    if not updated:
        return False
    group.status = TaskStatus.INITIALIZING
    assignments = placement.tasks
    reservations = []
    transitions = [
        StatusTransition(
            workflow_id=group.workflow_id,
            group=group,
            from_status=TaskStatus.SCHEDULING,
            to_status=TaskStatus.INITIALIZING,
            message="placed",
        )
    ]
    for task in tasks:
        node_name = assignments[task.name]
        task.node_id = node_ids[node_name]
        task.pod_name = pod_name_for(group.workflow.workflow_id, task.name)
        previous = task.status
        task.status = TaskStatus.INITIALIZING
        task.updated_at = now
        reservations.append(
            Reservation(
                task=task,
                node_id=task.node_id,
                pool=pool,
                gpu=task.gpu,
                cpu_millis=task.cpu_millis,
                memory_bytes=task.memory_bytes,
                storage_bytes=task.storage_bytes,
            )
        )
        transitions.append(
            StatusTransition(
                workflow_id=group.workflow_id,
                group=group,
                task=task,
                from_status=previous,
                to_status=TaskStatus.INITIALIZING,
                message=f"placed on {node_name}",
            )
        )
    Task.objects.bulk_update(tasks, ["node", "pod_name", "status", "updated_at"])
    Reservation.objects.bulk_create(reservations)
    StatusTransition.objects.bulk_create(transitions)
    return True


def _queue_timeouts_apply(pool: Pool, now: datetime, workflows: dict[int, Workflow]) -> list[int]:
    """Groups queued longer than their workflow's queue_timeout fail with FAILED_QUEUE_TIMEOUT."""
    expired = []
    candidates = TaskGroup.objects.filter(
        workflow__pool=pool, status=TaskStatus.SCHEDULING, workflow__queue_timeout_s__isnull=False,
        workflow__in=list(workflows),
    ).order_by("pk")
    for group in candidates:
        group.workflow = workflows[group.workflow_id]
        limit = timedelta(seconds=group.workflow.queue_timeout_s)
        if group.scheduling_since and now - group.scheduling_since > limit:
            reason = (group.unschedulable_reason or {}).get("message", "")
            message = f"queued longer than queue_timeout ({group.workflow.queue_timeout_s}s)"
            group_fail(
                group,
                TaskStatus.FAILED_QUEUE_TIMEOUT,
                message=f"{message}; last reason: {reason}" if reason else message,
            )
            workflow_status_refresh(group.workflow)
            expired.append(group.pk)
    return expired
