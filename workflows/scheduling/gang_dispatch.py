"""Creating a placed gang's pods: what one dispatch message reads of its gangs, the pods' requests with the
workflow's OSMO fields, credentials and runtime plans, the backend calls, and the record that they were
made (docs/design.md §6). Split from :mod:`workflows.scheduling.pods`, which follows the pods afterwards.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from osmo.rows import named_rows
from runtime import PlanInvalidError
from scheduler.choices import DispatchBackend
from scheduler.dispatch import DispatchPermanentError, DispatchTransientError, PodBackend, PodRequest, backend_for
from scheduler.dispatch.base import DispatchForbiddenError
from scheduler.models import Pool
from scheduler.services.backends import backend_of_pool, backend_permission_record
from workflows import jobs, sql
from workflows.choices import TaskStatus
from workflows.lifecycle.transitions import group_fail, workflow_status_refresh
from workflows.models import Task, TaskGroup, Workflow
from workflows.scheduling.locks import workflows_lock
from workflows.scheduling.pod.credentials import requests_credentials, with_api_access
from workflows.scheduling.pod.podspec import TaskPodFields, token_hosts, workflow_pods
from workflows.scheduling.pod.request import ACTIVE, PodRow, pod_osmo_fields, pod_rows, pool_platforms, row_pod_request
from workflows.scheduling.pod.runtime import runtime_backend, spec_runtime_fields, task_osmo_fields, task_plan
from workflows.spec import TokenUnresolvedError

logger = logging.getLogger(__name__)


class DispatchGang(NamedTuple):
    """What a dispatch reads of the gang it creates pods for."""

    pk: int
    status: str
    name: str
    workflow_pk: int
    workflow_label: str
    workflow_global: str
    pool_id: int
    scheduling_since: datetime | None
    submitted_at: datetime
    spec_text: str  # the workflow's stored spec: its tasks' pod fields and tokens
    labels: dict[str, Any] | None  # the workflow's pod labels (its label policy at submission)
    submitted_by: int  # whose credentials the tasks' ``credentials`` name
    dispatch_error: str  # the backend's error at the gang's last dispatch try ("" when none)


# The fields of DispatchGang read from a column of another name (the rest: from their own).
_GANG_COLUMNS = {"workflow_pk": "workflow_id", "workflow_label": "workflow__workflow_id",
                 "workflow_global": "workflow__global_id", "pool_id": "workflow__pool_id",
                 "submitted_at": "workflow__submitted_at", "spec_text": "workflow__spec_text",
                 "labels": "workflow__pod_labels", "submitted_by": "workflow__submitted_by_id"}


@dataclass(frozen=True, slots=True)
class DispatchBatch:
    """What one dispatch message reads of its gangs before creating any pod, in three queries however
    many gangs it carries: the gangs (absent: deleted), the tasks of each still without a recorded
    pod (by gang, in position order), and their pools."""

    gangs: dict[int, DispatchGang]
    tasks: dict[int, list[PodRow]]
    pools: dict[int, Pool]


def dispatch_batch_read(group_ids: list[int]) -> DispatchBatch:
    """Read what dispatching these gangs needs (see :class:`DispatchBatch`)."""
    rows = named_rows(TaskGroup.objects.filter(pk__in=group_ids).order_by(), DispatchGang, _GANG_COLUMNS)
    gangs = {gang.pk: gang for gang in rows}
    active = [pk for pk, gang in gangs.items() if gang.status in ACTIVE]
    tasks: dict[int, list[PodRow]] = {pk: [] for pk in active}
    if active:
        for row in pod_rows(Task.objects.filter(group__in=active, status__in=ACTIVE, dispatched_at__isnull=True)
                             .order_by("group_id", "position")):
            tasks[row.group_id].append(row)
    pool_ids = {gangs[pk].pool_id for pk in active}
    pools = ({pool.pk: pool for pool in Pool.objects.filter(pk__in=pool_ids).select_related("backend_ref")}
             if pool_ids else {})
    return DispatchBatch(gangs, tasks, pools)


@dataclass(frozen=True)
class GangDispatch:
    """What one dispatch run did to a gang, for the metrics (the caller observes it: no query)."""

    pool: str
    # From the gang becoming ready to place to its last pod recorded, when this run recorded that pod.
    ready_to_dispatched: timedelta | None = None
    refused: bool = False  # the backend refused a pod: the gang failed with FAILED_BACKEND_ERROR


def dispatch_retry_countdown(retries: int) -> float:
    """Seconds before the ``retries``-th retry of a gang's dispatch after a transient error: 2, 4, 8, ...
    up to 120."""
    return float(min(120, 2 ** (retries + 1)))


def gang_dispatch(*, group_id: int, batch: DispatchBatch | None = None,
                   retry_in: float = 0.0) -> GangDispatch | None:
    """Create the pods of a placed gang (idempotent: deterministic names; already-created pods are
    skipped and AlreadyExists counts as success). Transient errors propagate for Celery to retry.
    None when there was nothing to do (the gang is gone or no longer active). ``batch``: what the
    message this gang came in read of all its gangs before the first pod was created
    (:func:`dispatch_batch_read`); read here for this gang alone when not given. ``retry_in``: when the
    caller retries after a transient error (seconds): the gang's dispatch counts as requested until
    then, so the tick does not start a second retry beside it.

    The gang's pods are recorded as dispatched together once created (one UPDATE), and also when an
    error stops the run (so a retry does not create them again). A worker killed before that leaves
    them unrecorded: the tick dispatches the gang again and AlreadyExists counts as success. A pod
    is recorded only while its task is still active; if the task ended (the gang was cancelled or
    failed since it was read, while the pods of this gang or of the batch's earlier gangs were being
    created), the pods just made are deleted again, so a cancel racing a dispatch never leaves a pod
    running on capacity that was released.
    """
    if batch is None or group_id not in batch.gangs:  # (not in its batch: deleted since, or another batch's)
        batch = dispatch_batch_read([group_id])
    gang = batch.gangs.get(group_id)
    if gang is None or gang.status not in ACTIVE:
        return None
    pool = batch.pools.get(gang.pool_id)
    if pool is None:  # deleted with its workflows since the gang was read
        return None
    backend = backend_of_pool(pool) or backend_for(pool.backend)
    tasks = batch.tasks[group_id]
    requests, refused = _dispatch_requests(tasks, pool, spec_text=gang.spec_text, labels=gang.labels or {})
    if not refused:
        refused = requests_credentials(requests, workflow_pods(gang.spec_text or ""), backend=pool.backend,
                                       owner_id=gang.submitted_by)
    plans = _runtime_plans(tasks, pool, requests, workflow_pk=gang.workflow_pk, workflow_id=gang.workflow_label,
                           global_id=gang.workflow_global, group_id=group_id,
                           group_name=gang.name) if not refused else {}
    created: list[tuple[int, str]] = []  # (task, pod name)
    try:
        for row in tasks if not refused else ():
            request = requests[row.pk]
            plan = plans.get(row.pk)
            if isinstance(plan, PlanInvalidError):  # a stored spec the parser let through before
                refused = f"pod {request.pod_name}: the task's runtime plan is invalid: {plan}"
                break
            if plan:
                request = replace(request, runtime_plan=plan, credentials=with_api_access(request, row.pk))
            try:
                backend.create_pod(request)
            except DispatchTransientError as exc:
                # Retried (Celery, the tick) until the dispatch deadline; meanwhile the gang says why.
                TaskGroup.objects.filter(pk=group_id).update(
                    dispatch_error=f"pod {request.pod_name}: {exc}"[:2000],
                    dispatch_requested_at=timezone.now() + timedelta(seconds=retry_in))
                raise
            except DispatchPermanentError as exc:
                logger.error("dispatch.failed", extra={"pool": pool.name, "workflow": gang.workflow_label,
                                                       "group": gang.name, "task": request.task,
                                                       "pod": request.pod_name, "reason": str(exc)})
                refused = f"pod {request.pod_name}: {exc}"
                if isinstance(exc, DispatchForbiddenError):  # the backend's status names what it lacks
                    backend_permission_record(pool.backend_name, f"dispatch to pool {pool.name}: {exc}")
                break
            created.append((row.pk, request.pod_name))
    finally:
        recorded_at = timezone.now()
        complete = _dispatch_record(created, recorded_at, pool=pool, backend=backend) if created else False
    if refused:
        gang_backend_failure(group_id, refused)
        return GangDispatch(pool=pool.name, refused=True)
    if not complete or len(created) < len(tasks):
        return GangDispatch(pool=pool.name)
    if gang.dispatch_error:  # created at last: the error is gone with the problem
        TaskGroup.objects.filter(pk=group_id).update(dispatch_error="")
    if pool.backend_ref is not None and pool.backend_ref.permission_error:  # (loaded with the pool: no query)
        backend_permission_record(pool.backend_name, None)
    # Every pod the gang was missing when this run began is recorded now, by this run.
    return GangDispatch(pool=pool.name,
                        ready_to_dispatched=recorded_at - (gang.scheduling_since or gang.submitted_at))


def _dispatch_requests(tasks: list[PodRow], pool: Pool, *, spec_text: str, labels: dict[str, Any]
                       ) -> tuple[dict[int, PodRequest], str]:
    """Each task's pod as dispatch creates it (:func:`pod_osmo_fields`), by task id, and why the gang
    cannot be dispatched ("" when it can): a token the stored spec cannot resolve. No query but the
    pool's platforms, when a task names one."""
    if not tasks:
        return {}, ""
    pods = workflow_pods(spec_text or "")
    platforms = pool_platforms(pool) if any(pods.tasks.get(row.task, TaskPodFields()).platform for row in tasks) else {}
    requests: dict[int, PodRequest] = {}
    hosts = token_hosts(pool.backend, global_id=tasks[0].workflow_global, groups=pods.groups,
                        namespace=pool.pod_namespace)
    # The backend's scheduler for its pods (the pool row came with its backend: no query).
    scheduler_name = pool.backend_ref.scheduler_name if pool.backend_ref is not None else ""
    for row in tasks:
        request = row_pod_request(row, pool)
        if scheduler_name:
            request = replace(request, scheduler_name=scheduler_name)
        try:
            requests[row.pk] = pod_osmo_fields(request, pool, pods=pods, labels=labels, platforms=platforms,
                                               hosts=hosts)
        except TokenUnresolvedError as exc:
            return requests, f"pod {request.pod_name}: {exc}"
    return requests, ""


def _runtime_plans(tasks: list[PodRow], pool: Pool, requests: dict[int, PodRequest], *, workflow_pk: int,
                   workflow_id: str, global_id: str, group_id: int, group_name: str
                   ) -> dict[int, str | PlanInvalidError]:
    """The runtime plan (JSON) of each task, by task id, when the pool's backend runs the runtime
    (docs/runtime.md); none otherwise (no query)."""
    if not runtime_backend(pool.backend) or not tasks:
        return {}
    names = list(Task.objects.filter(workflow=workflow_pk).values_list("name", "group_id"))
    group_size = sum(1 for _name, group in names if group == group_id)
    spec = spec_runtime_fields(Workflow.objects.filter(pk=workflow_pk).values_list("spec_text", flat=True).first()
                               or "")
    barrier = spec.barriers.get(group_name, False)
    plans: dict[int, str | PlanInvalidError] = {}
    for row in tasks:
        pk, name = row.pk, row.task
        try:
            plan = task_plan(pool_name=pool.name, backend=pool.backend, workflow_id=workflow_id,
                             global_id=global_id, task_id=pk, task_name=name, pod_name=row.pod_name,
                             fields=_plan_fields(spec.tasks.get(name), requests[pk], backend=pool.backend),
                             upstream_tasks={other: global_id for other, group in names if group != group_id},
                             group_size=group_size, barrier=barrier)
        except PlanInvalidError as exc:
            plans[pk] = exc
            continue
        plans[pk] = plan.to_json()
    return plans


def _plan_fields(raw: Any, request: PodRequest, *, backend: str) -> dict[str, Any]:
    """The task's OSMO fields for its runtime plan, with the texts dispatch resolved. On Kubernetes
    the files come from the pod's ConfigMap, not from the runtime."""
    fields = task_osmo_fields(raw, command=list(request.command), args=list(request.args),
                              environment=dict(request.environment))
    if backend == DispatchBackend.KUBERNETES:
        fields.pop("files", None)
    else:
        fields["files"] = [{"path": path, "contents": contents} for path, contents in request.files]
    return fields


def _dispatch_record(pods: list[tuple[int, str]], at: datetime, *, pool: Pool, backend: PodBackend) -> bool:
    """Record the pods (task id, pod name) as created, for the tasks still active and not recorded yet:
    one UPDATE (:func:`workflows.sql.tasks_dispatched_record`). A task no longer active has its pod deleted
    again (NotFound is success). True when every pod was recorded by this call."""
    ids = [pk for pk, _pod_name in pods]
    recorded = sql.tasks_dispatched_record(ids, at, statuses=ACTIVE)
    if recorded == len(ids):
        return True
    # Some were not recorded: another run recorded them (the task is active), or the gang ended while
    # its pods were being created: take those back.
    ended = set(Task.objects.filter(pk__in=ids).exclude(status__in=ACTIVE).values_list("pk", flat=True))
    for pk, pod_name in pods:
        if pk in ended:
            backend.delete_pod(namespace=pool.pod_namespace, pod_name=pod_name)
    if ended:
        Task.objects.filter(pk__in=ended).update(pod_deleted_at=timezone.now())
    return False


@transaction.atomic
def gang_backend_failure(group_id: int, message: str) -> None:
    group = TaskGroup.objects.get(pk=group_id)
    workflow = workflows_lock([group.workflow_id])[group.workflow_id]
    group.refresh_from_db()
    if group.status in (TaskStatus.WAITING, TaskStatus.SCHEDULING):  # preempted meanwhile: its pods are gone
        return
    group.workflow = workflow
    group_fail(group, TaskStatus.FAILED_BACKEND_ERROR, message=message)
    workflow_status_refresh(workflow)
    logger.warning("group.backend_failed", extra={"workflow": workflow.global_id, "group": group.name,
                                                  "pool_id": workflow.pool_id, "reason": message})
    # Every task that has a pod name may have a pod, recorded or not (a worker killed between the
    # create call and recording it): delete them all (NotFound is success).
    after_release(workflow.pool_id, tasks_with_pods(group.tasks.all()))


def tasks_with_pods(tasks: QuerySet[Task]) -> list[int]:
    """The tasks among ``tasks`` that may have a pod not known to be deleted: every task given a pod
    name at placement, whether or not its dispatch was recorded."""
    return list(tasks.exclude(pod_name="").filter(pod_deleted_at__isnull=True).values_list("pk", flat=True))


def after_release(pool_id: int, pods_to_delete: list[int]) -> None:
    """Capacity was released: delete the pods that may still run, and place what waits (on commit)."""
    jobs.pods_delete_request(pods_to_delete)
    jobs.placement_cycle_request(pool_id)
