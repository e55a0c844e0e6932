"""The pod lifecycle after dispatch (:mod:`workflows.scheduling.gang_dispatch` creates the pods): phase
sync back into task status, gang completion and failure, exec timeouts, and the periodic tick that
re-drives anything a lost message stranded.

Task status follows its pod: Pending -> INITIALIZING, Running -> RUNNING, Succeeded -> COMPLETED,
Failed -> FAILED. A gang moves as one: RUNNING once any task runs, COMPLETED when all completed,
FAILED as soon as one task failed (the others are stopped). Terminal tasks release their
reservations, which triggers a placement cycle for the pool.

Pods are reconciled against the cluster, not only the database (:func:`pods_reconcile`, every sync
of a pool whose backend has real pods): a pod that no task of the pool has, whose task is no longer
active while the pod may still run, or that runs on another node than its task's reservation is
deleted at once; a finished pod is kept for ``OSMO_POD_RETENTION_{SUCCEEDED,FAILED}_SECONDS`` after
its task ended, then deleted. Releasing capacity before a pod is gone is safe for this reason and
because Kubernetes itself does not start a pod on GPUs a terminating pod still holds (the pinned pod
stays Pending until they are free).
"""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from osmo import config as osmo_config
from scheduler.choices import DispatchBackend
from scheduler.dispatch import DispatchPermanentError, ListedPod, PodState, backend_for
from scheduler.dispatch.base import CAUSE_UNSCHEDULABLE
from scheduler.models import Pool
from scheduler.services.backends import backend_of_pool
from workflows import jobs
from workflows.choices import TASK_TERMINAL_STATUSES, TaskStatus
from workflows.lifecycle.cluster import ClusterSettled, tasks_cluster_settle
from workflows.lifecycle.exits import tasks_exit_settle
from workflows.lifecycle.placing import groups_requeue_refused, groups_reschedule
from workflows.lifecycle.rules import is_transition_allowed
from workflows.lifecycle.transitions import (
    TaskChange,
    gangs_settle,
    group_fail,
    tasks_status_set,
    workflows_status_refresh,
)
from workflows.models import Task, TaskGroup, Workflow
from workflows.scheduling.cluster import cluster_read
from workflows.scheduling.gang_dispatch import after_release, gang_backend_failure
from workflows.scheduling.locks import SYNC_LOCK, pool_lock_try, workflows_lock
from workflows.scheduling.pod.request import ACTIVE, pod_rows, row_pod_request

logger = logging.getLogger(__name__)

def _pool(pool_id: int) -> Pool | None:
    return Pool.objects.filter(pk=pool_id).first()


# What moving a task's status never reads of it and its gang (JSON, decoded for nothing otherwise).
_SYNC_UNREAD = ("command", "args", "environment", "nodes_excluded", "topology", "group__constraint_tree",
                "group__task_requests", "group__placement_report", "group__unschedulable_reason")


def pod_delete(*, task_id: int) -> None:
    """Delete a task's pod (NotFound is success) and record it, so the tick stops asking."""
    task = Task.objects.select_related("workflow__pool").filter(pk=task_id).first()
    if task is None or not task.pod_name or task.pod_deleted_at is not None:
        return
    pool = task.workflow.pool
    backend = backend_of_pool(pool) or backend_for(pool.backend)
    backend.delete_pod(namespace=pool.pod_namespace, pod_name=task.pod_name)
    Task.objects.filter(pk=task_id).update(pod_deleted_at=timezone.now())


def pods_evict(*, pool_id: int, pod_names: list[str]) -> None:
    """Delete preempted gangs' pods by name with the pool's grace period (:meth:`Pool.preemption_grace_seconds`;
    NotFound is success; a retry deletes the remaining ones again, which is harmless). A pod this misses is
    still deleted by :func:`pods_reconcile`: no task has its name any more."""
    pool = Pool.objects.filter(pk=pool_id).first()
    if pool is None:
        return
    backend = backend_of_pool(pool) or backend_for(pool.backend)
    for name in pod_names:
        backend.delete_pod(namespace=pool.pod_namespace, pod_name=name,
                           grace_seconds=pool.preemption_grace_seconds())
    logger.info("pods.evicted", extra={"pool": pool.name, "pods": len(pod_names)})


def pods_sync(*, pool_id: int, now: datetime | None = None) -> dict[str, int]:
    """Read pod phases back into task status for every dispatched, unfinished task of the pool.

    The backend is asked before the transaction opens (a Kubernetes list can be slow; no lock or
    transaction is held across it); the phases are then applied under the pool's sync lock to the
    tasks that are still active.
    """
    counts = {"running": 0, "completed": 0, "failed": 0, "requeued": 0, "rescheduled": 0}
    pool = _pool(pool_id)
    if pool is None:
        return counts
    now = now or timezone.now()
    snapshot = pod_rows(Task.objects.filter(workflow__pool=pool_id, status__in=ACTIVE, dispatched_at__isnull=False)
                         .order_by("pk"))
    # One listing of the pool's pods serves both the reconcile and the phases.
    backend = backend_of_pool(pool) or backend_for(pool.backend)
    listed, states = backend.pods_observe(
        [row_pod_request(row, pool) for row in snapshot], namespace=pool.pod_namespace,
        pool=pool.name, now=now)
    counts["deleted"] = pods_reconcile(pool, now=now, listed=listed)
    if not snapshot:
        return counts
    said = cluster_read(pool, backend, snapshot, states, now=now)  # what the cluster did (its nodes re-read)
    # Only tasks whose phase moves them on, and workflows with a gang past its exec timeout, are locked
    # and read again: a task's status only moves forward (and a re-placed task gets a new pod name),
    # so a change not allowed from the status read here is not allowed from the status read under the
    # lock either. Most tasks of a busy pool are unchanged at any one sync.
    moving = {row.pk for row in snapshot if _phase_moves(row.status, states.get(row.pod_name))} - said.deferred
    moving |= said.tasks
    overdue = _exec_timeouts_due(pool, now, {row.workflow_id for row in snapshot})
    if not moving and not overdue:
        return counts
    released: list[int] = []
    pods_to_delete: list[int] = []
    with transaction.atomic():
        if not pool_lock_try(pool_id, SYNC_LOCK):
            return counts
        # The shared lock order (see placement_cycle_run): workflows by pk, then re-read, so a cancel
        # that committed meanwhile is seen and never overwritten.
        workflows = workflows_lock({row.workflow_id for row in snapshot if row.pk in moving} | overdue)
        tasks = list(Task.objects.filter(pk__in=moving, status__in=ACTIVE, dispatched_at__isnull=False)
                     .select_related("group").defer(*_SYNC_UNREAD).order_by("pk"))
        for task in tasks:
            task.workflow = task.group.workflow = workflows[task.workflow_id]
        changes: list[TaskChange] = []
        cluster = tasks_cluster_settle(tasks, refused=said.refused, lost=said.lost, max_retries=pool.max_retries,
                                       max_requeues=osmo_config.kubernetes().unschedulable_requeues)
        exits = tasks_exit_settle([task for task in tasks if task.pk not in said.tasks],
                                  {task.pk: states[task.pod_name] for task in tasks if task.pod_name in states},
                                  max_retries=pool.max_retries)
        back = cluster.groups | set(exits.reschedule)  # gangs sent back to the queue
        for task in tasks:
            state = states.get(task.pod_name)
            if state is None or task.group_id in back:
                continue
            if task.pk in cluster.changes:
                changes.append(cluster.changes[task.pk])
                if state.live or task.pk in said.refused:  # still Pending or terminating: it must not start
                    pods_to_delete.append(task.pk)
            elif task.pk in said.tasks:
                continue
            elif state.phase == "Running":
                changes.append(TaskChange(task, TaskStatus.RUNNING))
            elif state.phase in ("Succeeded", "Failed"):
                changes.append(exits.changes[task.pk])
                if state.phase == "Failed" and state.live:  # e.g. a pod that never left Pending must not start later
                    pods_to_delete.append(task.pk)
                # A pod that failed by itself is kept for its logs (OSMO_POD_RETENTION_FAILED_SECONDS).
            elif state.phase == "Missing":
                changes.append(TaskChange(task, TaskStatus.FAILED_BACKEND_ERROR,
                                          message=said.refused_reads.get(task.pk, "pod disappeared from the backend")))
        changed = tasks_status_set(changes)
        touched: dict[int, TaskGroup] = {}
        # One way back per gang: the cluster's verdict wins over a member's RESCHEDULE exit action.
        reschedule = {**{pk: why for pk, why in exits.reschedule.items() if pk not in cluster.requeue},
                      **cluster.reschedule}
        for send, why in ((groups_reschedule, reschedule), (groups_requeue_refused, cluster.requeue)):
            if not why:
                continue
            unique = list({task.group_id: task.group for task in tasks if task.group_id in why}.values())
            jobs.pods_evict_request(pool_id, send(unique, why=why))
            touched.update({group.pk: group for group in unique})
            jobs.placement_cycle_request(pool_id)
        counts["rescheduled"] = len(reschedule)
        counts.update(_cluster_report(pool, tasks, cluster))
        for task in changed:
            touched[task.group_id] = task.group
            if task.status == TaskStatus.RUNNING:
                counts["running"] += 1
            elif task.status == TaskStatus.COMPLETED:
                counts["completed"] += 1
            else:
                counts["failed"] += 1
            if task.status in TASK_TERMINAL_STATUSES:
                released.append(task.pk)
        released += _exec_timeouts_apply(pool, now, touched, pods_to_delete, workflows)
        stopped = gangs_settle(touched.values())
        released += stopped
        pods_to_delete += stopped
        workflows_status_refresh([workflows[workflow_id] for workflow_id in sorted({g.workflow_id
                                                                                   for g in touched.values()})])
        if released:
            after_release(pool_id, pods_to_delete)
    return counts


def _cluster_report(pool: Pool, tasks: list[Task], cluster: ClusterSettled) -> dict[str, int]:
    """One event per gang the cluster sent back or failed (``gang.requeued``, ``gang.rescheduled``,
    ``gang.cluster_failed``) with its cause and the cluster's words; and their counts for the metrics:
    ``requeued``, ``requeue_failed``, ``lost.<cause>.rescheduled``, ``lost.<cause>.failed``."""
    groups = {task.group_id: task.group for task in tasks}
    failed = {change.task.group_id: change.message for change in cluster.changes.values()}
    counts: dict[str, int] = {"requeued": len(cluster.requeue)}
    for event, whys in (("gang.requeued", cluster.requeue), ("gang.rescheduled", cluster.reschedule),
                        ("gang.cluster_failed", failed)):
        for group_id, why in sorted(whys.items()):
            group, cause = groups[group_id], cluster.causes[group_id]
            logger.info(event, extra={"pool": pool.name, "workflow": group.workflow.workflow_id, "group": group.name,
                                      "cause": cause, "reason": why})
            if event == "gang.rescheduled":
                key = f"lost.{cause}.rescheduled"
            elif event == "gang.cluster_failed":
                key = "requeue_failed" if cause == CAUSE_UNSCHEDULABLE else f"lost.{cause}.failed"
            else:
                continue
            counts[key] = counts.get(key, 0) + 1
    return counts


_PHASE_STATUS = {"Running": TaskStatus.RUNNING, "Succeeded": TaskStatus.COMPLETED, "Failed": TaskStatus.FAILED,
                 "Missing": TaskStatus.FAILED_BACKEND_ERROR}


def _phase_moves(status: str, state: PodState | None) -> bool:
    """Whether this pod state changes a task of this status (what :func:`pods_sync` applies)."""
    target = _PHASE_STATUS.get(state.phase) if state is not None else None
    return target is not None and is_transition_allowed(status, target)


def _exec_timeouts_due(pool: Pool, now: datetime, workflow_ids: set[int]) -> set[int]:
    """The workflows (of these) with a RUNNING gang past its exec timeout (one query, no lock)."""
    if not workflow_ids:
        return set()
    timed = (TaskGroup.objects.filter(workflow__pool=pool.pk, status=TaskStatus.RUNNING,
                                      workflow__exec_timeout_s__isnull=False, started_at__isnull=False)
             .values_list("workflow_id", "started_at", "workflow__exec_timeout_s"))
    return {workflow_id for workflow_id, started_at, limit in timed
            if workflow_id in workflow_ids and started_at is not None and limit is not None
            and now - started_at > timedelta(seconds=limit)}


def _exec_timeouts_apply(
    pool: Pool, now: datetime, touched: dict[int, TaskGroup], pods_to_delete: list[int],
    workflows: dict[int, Workflow],
) -> list[int]:
    released: list[int] = []
    running = TaskGroup.objects.filter(
        workflow__pool=pool, status=TaskStatus.RUNNING, workflow__in=list(workflows),
        workflow__exec_timeout_s__isnull=False,
    ).order_by("pk")
    for group in running:
        group.workflow = workflows[group.workflow_id]
        limit = group.workflow.exec_timeout_s
        if limit is not None and group.started_at and now - group.started_at > timedelta(seconds=limit):
            ids = list(group.tasks.exclude(status__in=TASK_TERMINAL_STATUSES).values_list("pk", flat=True))
            group_fail(group, TaskStatus.FAILED_EXEC_TIMEOUT, message=f"ran longer than exec_timeout ({limit}s)")
            touched[group.pk] = group
            released += ids
            pods_to_delete += ids
    return released


def pods_reconcile(pool: Pool, *, now: datetime, listed: list[ListedPod] | None = None) -> int:
    """Delete the pool's pods that should not exist (see the module docstring), in one paginated list
    (or the pool's pods ``listed`` by the caller) and one query whatever the number of pods. Returns
    how many were deleted.

    Finished pods past their retention go one label-selector delete per gang when every listed pod
    of the gang is due (a 72-pod gang costs one call, not 72); otherwise, and for every other reason,
    one delete per pod."""
    backend = backend_of_pool(pool) or backend_for(pool.backend)
    namespace = pool.pod_namespace
    if listed is None:
        listed = backend.pods_list(namespace=namespace, pool=pool.name)
    if not listed:
        return 0
    rows = {
        name: (status, node, finished_at, (workflow_id, group))
        for name, status, node, finished_at, workflow_id, group in Task.objects.filter(
            workflow__pool=pool, pod_name__in=[pod.name for pod in listed]
        ).values_list("pod_name", "status", "node__name", "finished_at", "workflow__global_id", "group__name")
    }
    keep = {"Succeeded": timedelta(seconds=osmo_config.kubernetes().pod_retention_succeeded_seconds),
            "Failed": timedelta(seconds=osmo_config.kubernetes().pod_retention_failed_seconds)}
    doomed: list[tuple[str, str]] = []
    expired: dict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)
    listed_per_gang: Counter[tuple[str, str]] = Counter()
    for pod in listed:
        row = rows.get(pod.name)
        if pod.terminating:  # already being deleted, with its own grace period: nothing to do
            continue
        if row is None:
            doomed.append((pod.name, "no task of this pool has it"))
            continue
        status, node, finished_at, gang = row
        listed_per_gang[gang] += 1
        if status in ACTIVE:
            if pod.node and node and pod.node != node:
                doomed.append((pod.name, f"on node {pod.node}, but its task holds capacity on {node}"))
        elif not pod.finished:
            doomed.append((pod.name, f"its task is {status}; the pod is {pod.phase}"))
        elif finished_at is None or now - finished_at > keep[pod.phase]:
            kept = int(keep[pod.phase].total_seconds())
            expired[gang].append((pod.name, f"{pod.phase}, kept {kept} s after its task ended"))
    gone: list[str] = []
    for gang, pods_due in sorted(expired.items()):
        if len(pods_due) > 1 and len(pods_due) == listed_per_gang[gang]:
            workflow_id, group = gang
            backend.gang_finished_pods_delete(namespace=namespace, pool=pool.name, workflow_id=workflow_id,
                                              group=group)
            logger.info("pod.reconciled", extra={"pool": pool.name, "workflow": workflow_id, "group": group,
                                                 "pods": len(pods_due), "reason": pods_due[0][1]})
            gone += [name for name, _why in pods_due]
        else:
            doomed += pods_due
    for name, why in doomed:
        try:
            backend.delete_pod(namespace=namespace, pod_name=name)
        except DispatchPermanentError as exc:  # one refusal must not stop the pool's status sync
            logger.warning("pod.reconcile_failed", extra={"pool": pool.name, "pod": name, "reason": str(exc)})
            continue
        logger.info("pod.reconciled", extra={"pool": pool.name, "pod": name, "reason": why})
        gone.append(name)
    if gone:
        Task.objects.filter(workflow__pool=pool, pod_name__in=gone, pod_deleted_at__isnull=True).update(
            pod_deleted_at=now)
    return len(gone)


POD_DELETE_SWEEP_LIMIT = 100


def tick() -> dict[str, list[int]]:
    """The periodic safety net, so that no lost message can strand work:
    - a placement cycle for every pool with queued groups, a pod sync for every pool with active tasks;
    - placed gangs whose pods were not all created: dispatched again once the last request is older
      than ``OSMO_REDISPATCH_AFTER_SECONDS``, failed with FAILED_BACKEND_ERROR (capacity released)
      when placed longer than ``OSMO_DISPATCH_DEADLINE_SECONDS`` ago (a retry still due or not);
    - pods of failed or cancelled tasks that were never confirmed deleted: deleted again.
    """
    now = timezone.now()
    pending_pools = set(
        TaskGroup.objects.filter(status__in=[TaskStatus.SCHEDULING, TaskStatus.WAITING])
        .values_list("workflow__pool_id", flat=True)
        .distinct()
    )
    active_pools = set(Task.objects.filter(status__in=ACTIVE).values_list("workflow__pool_id", flat=True).distinct())
    # Pools with real pods are reconciled every tick, active or not: a pod may outlive its task.
    active_pools |= set(Pool.objects.exclude(backend=DispatchBackend.SIMULATED).values_list("pk", flat=True))
    grace = now - timedelta(seconds=osmo_config.dispatch().redispatch_after_seconds)
    deadline = now - timedelta(seconds=osmo_config.dispatch().deadline_seconds)
    stranded = list(
        TaskGroup.objects.filter(
            status=TaskStatus.INITIALIZING,
            tasks__dispatched_at__isnull=True,
            tasks__status=TaskStatus.INITIALIZING,
        )
        # Past the deadline whatever its last request: a gang retried after a transient error counts as
        # requested until its retry (in the future), which must not put its deadline off.
        .filter(Q(dispatch_requested_at__isnull=True) | Q(dispatch_requested_at__lt=grace) | Q(placed_at__lt=deadline))
        .values_list("pk", "placed_at", "dispatch_requested_at", "dispatch_error",
                     "workflow__pool__backend_ref__status")
        .distinct()
    )
    last_error = {pk: error for pk, _placed_at, _requested_at, error, _backend in stranded}
    # A gang whose backend is OFFLINE is not failed for it: its pods are created (once: their names are
    # deterministic) when the backend answers again.
    expired = sorted(pk for pk, placed_at, _requested_at, _error, backend in stranded
                     if placed_at is not None and placed_at < deadline and backend in (None, "ONLINE"))
    redispatch = sorted(pk for pk, _placed_at, requested_at, _error, _backend in stranded
                        if pk not in expired and (requested_at is None or requested_at < grace))
    TaskGroup.objects.filter(pk__in=redispatch).update(dispatch_requested_at=now)
    for group_id in expired:
        message = f"pods could not be created within {osmo_config.dispatch().deadline_seconds}s of placement"
        if last_error[group_id]:
            message += f"; the backend's last error: {last_error[group_id]}"
        gang_backend_failure(group_id, message)
    # Simulated pools: the tasks the service stopped whose delete was not confirmed. (Pools with real
    # pods are reconciled against the cluster by their sync, which keeps finished pods for a while.)
    undeleted = list(
        Task.objects.filter(
            workflow__pool__backend=DispatchBackend.SIMULATED,
            status__in=TASK_TERMINAL_STATUSES - {TaskStatus.COMPLETED},
            pod_deleted_at__isnull=True,
            finished_at__lt=grace,
            finished_at__gt=now - timedelta(hours=1),
        )
        .exclude(pod_name="")
        .order_by("finished_at")
        .values_list("pk", flat=True)[:POD_DELETE_SWEEP_LIMIT]
    )
    for pool_id in sorted(pending_pools):
        jobs.placement_cycle_continue(pool_id)
    for pool_id in sorted(active_pools):
        jobs.pods_sync_request(pool_id)
    for group_id in redispatch:
        jobs.group_dispatch_request(group_id)
    jobs.pods_delete_request(undeleted)
    return {"placement": sorted(pending_pools), "sync": sorted(active_pools), "redispatch": redispatch,
            "dispatch_expired": expired, "pod_delete": undeleted}
