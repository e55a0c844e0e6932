"""Celery tasks that move workflows through placement, dispatch and completion. Thin adapters: ids
and JSON primitives in, the services in :mod:`workflows.scheduling` do the work; every enqueue goes
through :mod:`workflows.jobs`, which keeps each task's name (queues: ``CELERY_TASK_ROUTES``).

Every task is idempotent (it re-reads the database and returns early when there is nothing to do),
so a redelivered or duplicated message is harmless.
"""

from __future__ import annotations

import logging
import time

from celery import Task, shared_task
from django.db import OperationalError

from osmo import config as osmo_config
from scheduler.dispatch import DispatchTransientError
from workflows import jobs

logger = logging.getLogger(__name__)

BATCH_RETRY_SECONDS = 2.0  # a gang of a batch that met a transient error is retried alone this much later
PODS_SYNC_ERROR_AFTER = 4  # failed syncs in a row before the outage's one ERROR (~8 s at the 2 s tick)


@shared_task(name=jobs.PLACEMENT_CYCLE, ignore_result=True, soft_time_limit=50, time_limit=60,
             autoretry_for=(OperationalError,), retry_backoff=1, max_retries=5)
def placement_cycle_task(*, pool_id: int, attempt: int = 0) -> None:
    from osmo.metrics import cycle_result_observe
    from scheduler.heartbeats import heartbeat_record
    from workflows.scheduling.cycle import placement_cycle_run

    started = time.monotonic()
    # Clear the "cycle pending" mark once this cycle holds the pool and before it reads the queue:
    # a request arriving from then on enqueues a fresh cycle, one that arrived before is covered.
    result = placement_cycle_run(pool_id=pool_id, on_locked=lambda: jobs.placement_pending_mark(pool_id, clear=True))
    if result.locked:
        heartbeat_record("placement_cycle", pool_id=pool_id)
        cycle_result_observe(result, seconds=time.monotonic() - started)
        jobs.tick_followup()
    if result.budget_exhausted:
        jobs.placement_cycle_continue(pool_id)
    elif not result.locked and attempt < 5:
        # Another cycle holds the pool: it may have read the queue before our trigger's data was
        # committed, so look again shortly (the periodic tick is the last safety net).
        jobs.placement_cycle_continue(pool_id, attempt=attempt + 1, countdown=0.2 * 2**attempt)


@shared_task(bind=True, name=jobs.GROUP_DISPATCH, ignore_result=True, acks_late=True,
             reject_on_worker_lost=True, autoretry_for=(OperationalError,), retry_backoff=2, retry_backoff_max=120,
             max_retries=8, soft_time_limit=110, time_limit=120)
def group_dispatch_task(self: Task, *, group_id: int) -> None:
    """acks_late is safe: pod names are deterministic and AlreadyExists counts as success. A transient
    backend error is retried after :func:`dispatch_retry_countdown`, and the gang records that retry as
    its dispatch request, so the tick does not start a second chain of retries beside this one."""
    from osmo.metrics import gang_dispatch_observe
    from workflows.scheduling.gang_dispatch import dispatch_retry_countdown, gang_dispatch

    countdown = dispatch_retry_countdown(self.request.retries)
    # The last try is followed by no retry: the tick takes over OSMO_REDISPATCH_AFTER_SECONDS after it.
    last = self.max_retries is not None and self.request.retries >= self.max_retries
    try:
        outcome = gang_dispatch(group_id=group_id, retry_in=0.0 if last else countdown)
    except DispatchTransientError as exc:
        raise self.retry(exc=exc, countdown=countdown) from exc
    gang_dispatch_observe(outcome)


@shared_task(name=jobs.GROUPS_DISPATCH, ignore_result=True, acks_late=True, reject_on_worker_lost=True,
             soft_time_limit=110, time_limit=120)
def groups_dispatch_task(*, group_ids: list[int]) -> None:
    """The pods of the gangs one placement cycle placed, one gang after the other in one message.
    acks_late is safe as for group_dispatch_task (a redelivered batch skips what is recorded). A gang
    whose dispatch meets a transient error goes on in a group_dispatch message of its own, with that
    task's retries and backoff, and the batch goes on with the next gang; so it does after an
    unexpected error on one gang (logged with its traceback). What a batch stopped by its time limit
    or a lost worker, or such an error, leaves undispatched, the tick re-dispatches."""
    from osmo.metrics import dispatch_handed_over, gang_dispatch_observe
    from workflows.scheduling.gang_dispatch import dispatch_batch_read, gang_dispatch

    try:
        batch = dispatch_batch_read(group_ids)  # every gang's rows and pool, read once per message
    except OperationalError:  # each gang reads its own below; one that fails too goes on alone, retrying
        batch = None
    for group_id in group_ids:
        try:
            outcome = gang_dispatch(group_id=group_id, batch=batch, retry_in=BATCH_RETRY_SECONDS)
        except (DispatchTransientError, OperationalError) as exc:
            logger.warning("dispatch.retry_alone", extra={"group_id": group_id, "reason": str(exc)})
            dispatch_handed_over()
            jobs.group_dispatch_request(group_id, countdown=BATCH_RETRY_SECONDS)
            continue
        except Exception:  # noqa: BLE001 - a bug on one gang must not strand the rest of the batch
            logger.exception("dispatch.batch_gang_failed", extra={"group_id": group_id})
            continue  # the tick re-dispatches it after OSMO_REDISPATCH_AFTER_SECONDS
        gang_dispatch_observe(outcome, task=jobs.GROUPS_DISPATCH)


@shared_task(name=jobs.POD_DELETE, ignore_result=True, acks_late=True, reject_on_worker_lost=True,
             autoretry_for=(DispatchTransientError, OperationalError), retry_backoff=2, max_retries=8,
             soft_time_limit=50, time_limit=60)
def pod_delete_task(*, task_id: int) -> None:
    from workflows.scheduling.pods import pod_delete

    pod_delete(task_id=task_id)


@shared_task(name=jobs.PODS_EVICT, ignore_result=True, acks_late=True, reject_on_worker_lost=True,
             autoretry_for=(DispatchTransientError, OperationalError), retry_backoff=2, max_retries=8,
             soft_time_limit=110, time_limit=120)
def pods_evict_task(*, pool_id: int, pod_names: list[str]) -> None:
    from workflows.scheduling.pods import pods_evict

    pods_evict(pool_id=pool_id, pod_names=pod_names)


@shared_task(name=jobs.PODS_SYNC, ignore_result=True, soft_time_limit=50, time_limit=60,
             autoretry_for=(OperationalError,), retry_backoff=2, max_retries=3)
def pods_sync_task(*, pool_id: int) -> None:
    """Read pod phases back. A backend that cannot be reached (an API server outage) is not retried
    here: the tick sends the next sync every few seconds, and retries of their own used to pile up
    on those. Each failed sync logs one WARNING without a traceback (it is not a bug), with the
    count of failed syncs in a row; the :data:`PODS_SYNC_ERROR_AFTER`-th logs the outage's one
    ERROR, and the first sync that succeeds again says how many failed (INFO)."""
    from workflows.scheduling.pods import pods_sync

    try:
        counts = pods_sync(pool_id=pool_id)
    except DispatchTransientError as exc:
        failed = _sync_failures(pool_id, failed=True)
        extra = {"pool_id": pool_id, "attempt": failed, "reason": str(exc)}
        if failed == PODS_SYNC_ERROR_AFTER:
            logger.error("pods_sync.backend_unreachable", extra=extra)
        else:
            logger.warning("pods_sync.backend_unreachable_retrying", extra=extra)
        return
    failed = _sync_failures(pool_id, failed=False)
    if failed:
        logger.info("pods_sync.backend_reachable_again", extra={"pool_id": pool_id, "failed_syncs": failed})
    _cluster_observe(pool_id, counts or {})


def _cluster_observe(pool_id: int, counts: dict[str, int]) -> None:
    """The metrics of the gangs a pod sync requeued or rescheduled because of the cluster (the pool's name
    is read only when there are some)."""
    from osmo.metrics import cluster_verdicts_observe
    from scheduler.models import Pool

    lost = {key: count for key, count in counts.items() if key.startswith("lost.") and count}
    if not (counts.get("requeued") or counts.get("requeue_failed") or lost):
        return
    name = Pool.objects.filter(pk=pool_id).values_list("name", flat=True).first() or str(pool_id)
    by_outcome: dict[str, dict[str, int]] = {"rescheduled": {}, "failed": {}}
    for key, count in lost.items():
        _lost, cause, outcome = key.split(".")
        by_outcome[outcome][cause] = count
    cluster_verdicts_observe(pool=name, requeued=counts.get("requeued", 0),
                             requeue_failed=counts.get("requeue_failed", 0),
                             rescheduled=by_outcome["rescheduled"], reschedule_failed=by_outcome["failed"])


def _sync_failures(pool_id: int, *, failed: bool) -> int:
    """Failed syncs of the pool in a row, in the shared cache (Redis when configured): with ``failed``
    one more, counted; else the count so far, then cleared. 0 when the cache cannot say."""
    from django.core.cache import cache

    key = f"pods-sync-failures:{pool_id}"
    try:
        if failed:
            cache.add(key, 0, timeout=24 * 3600)
            return int(cache.incr(key))
        count = cache.get(key)
        if count:
            cache.delete(key)
        return int(count or 0)
    except Exception:  # a cache outage must not fail the sync; the count is only for the logs
        return 0


@shared_task(name=jobs.TICK, ignore_result=True, soft_time_limit=20, time_limit=30)
def tick_task() -> None:
    from scheduler.heartbeats import heartbeat_record
    from workflows.scheduling.pods import tick

    tick()
    heartbeat_record("tick")
    jobs.tick_followup()


@shared_task(name=jobs.TICK_WATCH, ignore_result=True, soft_time_limit=20, time_limit=30)
def tick_watch_task() -> None:
    """Sent by every worker's own timer every three tick intervals (``osmo.celery.TickWatchdog``): a
    tick when none completed for that long (beat is gone and the worker holding the follow-up tick
    was killed); the tick's follow-up starts the chain again. Otherwise nothing."""
    from osmo.celery import TICK_WATCH_INTERVALS
    from scheduler.heartbeats import tick_age_seconds

    age = tick_age_seconds()
    if age is None or age > float(osmo_config.scheduler().placement_tick_seconds) * TICK_WATCH_INTERVALS:
        logger.info("tick.watch_resumed", extra={"tick_age_seconds": age})
        tick_task()


@shared_task(name=jobs.KUBERNETES_SYNC, ignore_result=True, soft_time_limit=240, time_limit=300)
def kubernetes_sync() -> None:
    """Follow every Kubernetes pool (beat, every ``OSMO_K8S_SYNC_SECONDS``; docs/kubernetes.md): its nodes'
    capacity, labels, readiness and taints, and the requests of the other pods on them, backend by
    backend. With one backend its pools are synced here; with several, each backend gets a task of its
    own (:func:`kubernetes_backend_sync`), so one that hangs never delays another's. A pool whose sync
    fails is logged and counted and the others go on; the next run tries again. Here rather than in
    ``scheduler.tasks`` because it records in :mod:`osmo.metrics`, which reads the workflows app.
    Without a Kubernetes pool it is one query: the Kubernetes client is not even loaded."""
    from scheduler.choices import DispatchBackend
    from scheduler.models import Pool

    names = sorted({pool.backend_name for pool in Pool.objects.filter(backend=DispatchBackend.KUBERNETES)
                    .only("backend", "backend_ref")})
    if len(names) == 1:
        kubernetes_backend_sync(backend=names[0])
        return
    for name in names:
        jobs.kubernetes_backend_sync_request(name)


@shared_task(name=jobs.KUBERNETES_BACKEND_SYNC, ignore_result=True, soft_time_limit=240, time_limit=300)
def kubernetes_backend_sync(backend: str) -> None:
    """Follow the Kubernetes pools of one backend, then record its health: ONLINE with its last contact
    when every pool's sync succeeded, OFFLINE with the error (a 403 names the verb and the resource the
    credentials lack) when one failed (docs/kubernetes.md §9)."""

    from osmo.metrics import k8s_sync_failed, k8s_sync_observe
    from scheduler.choices import DispatchBackend
    from scheduler.dispatch import backend_for
    from scheduler.dispatch.pod.manifest import LABEL_MANAGED_BY, MANAGED_BY
    from scheduler.models import Backend, Pool
    from scheduler.services import pool_follow_kubernetes
    from scheduler.services.backends import (
        api_error_words,
        backend_client,
        backend_record_sync,
        pool_tolerated_taints,
    )

    row = Backend.objects.filter(name=backend).first()
    pools = list(Pool.objects.filter(backend=DispatchBackend.KUBERNETES, backend_ref__name=backend).order_by("name"))
    if backend == DispatchBackend.KUBERNETES:  # and pools written without one (bulk_create)
        pools += list(Pool.objects.filter(backend=DispatchBackend.KUBERNETES, backend_ref__isnull=True))
    if row is None or not pools:
        return
    error: str | None = None
    for pool in pools:
        started = time.monotonic()
        try:
            client = backend_client(row) or backend_for(DispatchBackend.KUBERNETES)
            report = pool_follow_kubernetes(
                pool=pool, core_v1=client.core,  # type: ignore[attr-defined]
                managed_by_label=LABEL_MANAGED_BY, managed_by=MANAGED_BY,
                tolerated_taints=pool_tolerated_taints(pool, row, osmo_config.kubernetes().tolerated_taints),
                node_conditions=row.node_conditions, page_size=osmo_config.kubernetes().sync_page_size,
            )
        except Exception as exc:  # the cluster unreachable or refusing: this pool waits for the next run
            logger.exception("pool.k8s_sync_failed", extra={"pool": pool.name, "backend": backend})
            k8s_sync_failed(pool=pool.name)
            error = error or f"sync of pool {pool.name}: {api_error_words(exc)}"
            continue
        k8s_sync_observe(pool=pool.name, seconds=time.monotonic() - started, created=report.created,
                         updated=report.updated, cordoned=report.marked_unschedulable,
                         foreign_pods=report.foreign_pods)
    backend_record_sync(row, error=error)
