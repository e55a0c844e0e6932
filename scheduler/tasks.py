"""Celery tasks of the scheduler app. Thin adapters: ids and JSON primitives in, services do the work.

Every task is idempotent (it re-reads the database and returns early when there is nothing to do),
so a redelivered or duplicated message is harmless.
"""

from __future__ import annotations

import socket
import time

from celery import shared_task
from django.db import OperationalError

from osmo.celery import Queue
from scheduler.dispatch import DispatchTransientError


@shared_task(name="scheduler.worker_heartbeat", queue=Queue.DEFAULT, ignore_result=True, soft_time_limit=20,
             time_limit=30)
def worker_heartbeat(token: str) -> None:
    """Record that a worker reached the database (used by health checks and the broker round-trip tests)."""
    from scheduler.models import WorkerHeartbeat

    WorkerHeartbeat.objects.update_or_create(token=token, defaults={"hostname": socket.gethostname()})


@shared_task(name="scheduler.placement_cycle_run", queue=Queue.SCHEDULER, ignore_result=True, soft_time_limit=50,
             time_limit=60, autoretry_for=(OperationalError,), retry_backoff=1, max_retries=5)
def placement_cycle_task(*, pool_id: int, attempt: int = 0) -> None:
    from osmo.metrics import cycle_result_observe
    from scheduler.heartbeats import heartbeat_record
    from scheduler.services.placement import placement_cycle_run

    started = time.monotonic()
    # Clear the "cycle pending" mark once this cycle holds the pool and before it reads the queue:
    # a request arriving from then on enqueues a fresh cycle, one that arrived before is covered.
    result = placement_cycle_run(pool_id=pool_id, on_locked=lambda: _pending_mark(pool_id, clear=True))
    if result.locked:
        heartbeat_record("placement_cycle", pool_id=pool_id)
        cycle_result_observe(result, seconds=time.monotonic() - started)
    if result.budget_exhausted:
        placement_cycle_task.delay(pool_id=pool_id)
    elif not result.locked and attempt < 5:
        # Another cycle holds the pool: it may have read the queue before our trigger's data was
        # committed, so look again shortly (the periodic tick is the last safety net).
        placement_cycle_task.apply_async(kwargs={"pool_id": pool_id, "attempt": attempt + 1},
                                         countdown=0.2 * 2**attempt)


def placement_cycle_request(pool_id: int) -> None:
    """Ask for a placement cycle of the pool (called on commit by submission, completion, cancellation
    and inventory changes). Requests are coalesced: while a cycle is queued but not started, further
    requests add nothing, so a burst of submissions costs one cycle, not one each."""
    if _pending_mark(pool_id):
        placement_cycle_task.delay(pool_id=pool_id)


_PENDING_TTL_SECONDS = 10  # a lost message stops coalescing after this; the tick covers the gap


def _pending_mark(pool_id: int, *, clear: bool = False) -> bool:
    """Set (or clear) the pool's "cycle pending" mark in Redis. True when a cycle should be enqueued.
    Without Redis (the embedded default) every request enqueues a cycle."""
    from django.conf import settings

    if not settings.REDIS_URL:
        return True
    import redis

    client = _redis_client(settings.REDIS_URL)
    key = f"osmo:placement-pending:{pool_id}"
    try:
        if clear:
            client.delete(key)
            return True
        return bool(client.set(key, "1", nx=True, ex=_PENDING_TTL_SECONDS))
    except redis.RedisError:
        return True


_REDIS_CLIENTS: dict[str, object] = {}


def _redis_client(url: str):
    import redis

    client = _REDIS_CLIENTS.get(url)
    if client is None:
        client = _REDIS_CLIENTS[url] = redis.Redis.from_url(url, socket_timeout=2)
    return client


@shared_task(name="scheduler.group_dispatch", queue=Queue.DISPATCH, ignore_result=True, acks_late=True,
             reject_on_worker_lost=True,
             autoretry_for=(DispatchTransientError, OperationalError), retry_backoff=2, retry_backoff_max=120,
             max_retries=8, soft_time_limit=110, time_limit=120)
def group_dispatch_task(*, group_id: int) -> None:
    # acks_late is safe: pod names are deterministic and AlreadyExists counts as success.
    from scheduler.services.lifecycle import group_dispatch

    group_dispatch(group_id=group_id)


@shared_task(name="scheduler.pod_delete", queue=Queue.DISPATCH, ignore_result=True, acks_late=True,
             reject_on_worker_lost=True,
             autoretry_for=(DispatchTransientError, OperationalError), retry_backoff=2, max_retries=8,
             soft_time_limit=50, time_limit=60)
def pod_delete_task(*, task_id: int) -> None:
    from scheduler.services.lifecycle import pod_delete

    pod_delete(task_id=task_id)


@shared_task(name="scheduler.pods_sync", queue=Queue.SCHEDULER, ignore_result=True, soft_time_limit=50,
             time_limit=60, autoretry_for=(DispatchTransientError, OperationalError), retry_backoff=2, max_retries=3)
def pods_sync_task(*, pool_id: int) -> None:
    from scheduler.services.lifecycle import pods_sync

    pods_sync(pool_id=pool_id)


@shared_task(name="scheduler.tick", queue=Queue.SCHEDULER, ignore_result=True, soft_time_limit=20, time_limit=30)
def tick_task() -> None:
    from scheduler.heartbeats import heartbeat_record
    from scheduler.services.lifecycle import tick

    tick()
    heartbeat_record("tick")
