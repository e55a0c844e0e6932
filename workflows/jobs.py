"""The workflows app's Celery task names, and the only place that enqueues Celery work (docs/design.md §6).

Every request is registered with ``transaction.on_commit(..., robust=True)``: inside a transaction
it is sent once the data it refers to is committed (a worker never reads a row that is not there
yet), outside one it is sent at once; a broker failure is logged, never raised into the caller,
because the periodic tick re-drives anything a lost message stranded.

The names below are the app's tasks' (:mod:`workflows.tasks` registers each under its constant), and
``CELERY_TASK_ROUTES`` in the settings maps each to its queue. Work is sent by name (``send_task``),
not through the task objects: the services, the lifecycle and the placement cycle that ask for work
would otherwise import the task module, which imports them (an import-linter contract keeps them
from it). The scheduler app asks for no work of the workflows app (it sends a signal,
``scheduler.services.reservations.capacity_changed``); its own task's name is in :mod:`scheduler.tasks`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.db import transaction

from osmo import config as osmo_config
from osmo.celery import app

logger = logging.getLogger(__name__)

PLACEMENT_CYCLE = "workflows.placement_cycle_run"
GROUP_DISPATCH = "workflows.group_dispatch"
GROUPS_DISPATCH = "workflows.groups_dispatch"
POD_DELETE = "workflows.pod_delete"
PODS_EVICT = "workflows.pods_evict"
PODS_SYNC = "workflows.pods_sync"
TICK = "workflows.tick"
TICK_WATCH = "workflows.tick_watch"  # sent by every worker's own timer (osmo.celery.TickWatchdog)
KUBERNETES_SYNC = "workflows.kubernetes_sync"  # beat only (docs/kubernetes.md)
KUBERNETES_BACKEND_SYNC = "workflows.kubernetes_backend_sync"  # one backend's pools, sent by KUBERNETES_SYNC
# The token of the WorkerHeartbeat row the follow-up ticks are claimed on (stored rows keep this value).
TICK_FOLLOWUP_TOKEN = "scheduler.tick-followup"

_PENDING_TTL_SECONDS = 10  # a lost message stops coalescing after this; the tick covers the gap


def _send(name: str, *, countdown: float | None = None, **kwargs: Any) -> None:
    app.send_task(name, kwargs=kwargs, countdown=countdown)


def _on_commit(name: str, *, countdown: float | None = None, **kwargs: Any) -> None:
    transaction.on_commit(lambda: _send(name, countdown=countdown, **kwargs), robust=True)


def placement_cycle_request(pool_id: int) -> None:
    """Ask for a placement cycle of the pool (after submission, completion, cancellation, inventory
    changes). Coalesced: while a cycle is queued but not started, further requests add nothing, so a
    burst of submissions costs one cycle, not one each. With the Redis mark, the cycle starts
    ``OSMO_PLACEMENT_COALESCE_SECONDS`` after the first request: without that window a steady stream
    of submissions got one cycle each (a cycle clears the mark as it starts, and a cycle placing one
    gang costs nearly what one placing twenty does)."""

    def send() -> None:
        if placement_pending_mark(pool_id):
            window = float(osmo_config.scheduler().placement_coalesce_seconds) if settings.REDIS_URL else 0.0
            _send(PLACEMENT_CYCLE, countdown=window if window > 0 else None, pool_id=pool_id)

    transaction.on_commit(send, robust=True)


def placement_cycle_continue(pool_id: int, *, attempt: int = 0, countdown: float | None = None) -> None:
    """Enqueue a cycle unconditionally (not coalesced): a cycle that stopped at its time budget
    continues, or a cycle that found the pool locked looks again after ``countdown`` seconds."""
    kwargs: dict[str, int] = {"pool_id": pool_id, "attempt": attempt} if attempt else {"pool_id": pool_id}
    transaction.on_commit(lambda: _send(PLACEMENT_CYCLE, countdown=countdown, **kwargs), robust=True)


def tick_followup() -> None:
    """Keep the periodic tick going without beat (docs/design.md §10): after a tick (or a placement
    cycle), send one more tick in ``OSMO_PLACEMENT_TICK_SECONDS`` unless one was sent less than 90 %
    of that interval ago. The claim is one conditional UPDATE of a database row, so the follow-ups of
    several workers, and beat's own ticks, never multiply: at most one chain runs beside beat."""
    if not osmo_config.scheduler().tick_without_beat:
        return
    from datetime import timedelta

    from django.utils import timezone

    from scheduler.models import WorkerHeartbeat

    interval = float(osmo_config.scheduler().placement_tick_seconds)
    now = timezone.now()
    claimed = WorkerHeartbeat.objects.filter(token=TICK_FOLLOWUP_TOKEN, at__lt=now - timedelta(seconds=interval * 0.9))
    if not claimed.update(at=now):
        _row, created = WorkerHeartbeat.objects.get_or_create(token=TICK_FOLLOWUP_TOKEN)
        if not created:
            return
    transaction.on_commit(lambda: _send(TICK, countdown=interval), robust=True)


def group_dispatch_request(group_id: int, *, countdown: float | None = None) -> None:
    """Create the pods of a placed gang, in a message of its own (retried with backoff on transient
    errors): the tick's re-dispatch, and a gang whose batch met a transient error."""
    _on_commit(GROUP_DISPATCH, countdown=countdown, group_id=group_id)


def groups_dispatch_request(group_ids: Iterable[int]) -> None:
    """Create the pods of the gangs a placement cycle placed: one message per
    ``OSMO_DISPATCH_BATCH_GANGS`` gangs, not one per gang (Celery's own work around a message costs
    about what dispatching a gang does). A lost message is covered like a lost per-gang one: the tick
    re-dispatches a placed gang whose pods are missing ``OSMO_REDISPATCH_AFTER_SECONDS`` after its
    placement."""
    ids = sorted(set(group_ids))
    size = max(1, int(osmo_config.dispatch().batch_gangs))
    for start in range(0, len(ids), size):
        _on_commit(GROUPS_DISPATCH, group_ids=ids[start:start + size])


def pods_delete_request(task_ids: Iterable[int]) -> None:
    """Delete the pods of these tasks (each deletion is idempotent)."""
    ids = sorted(set(task_ids))
    if ids:
        def send() -> None:
            for task_id in ids:
                _send(POD_DELETE, task_id=task_id)

        transaction.on_commit(send, robust=True)


def pods_evict_request(pool_id: int, pod_names: Iterable[str]) -> None:
    """Delete the pods of preempted gangs by name, with the preemption grace period (their tasks are
    queued again and get new pod names when placed, so the names are passed, not the tasks)."""
    names = sorted(set(pod_names))
    if names:
        _on_commit(PODS_EVICT, pool_id=pool_id, pod_names=names)


def kubernetes_backend_sync_request(backend: str) -> None:
    """Sync one backend's Kubernetes pools in a task of its own (several backends: one slow cluster
    never delays another's sync). Expires after one sync period: a newer run asks again."""
    expires = max(float(osmo_config.kubernetes().sync_seconds), 1.0)
    transaction.on_commit(lambda: _send_expiring(KUBERNETES_BACKEND_SYNC, expires, backend=backend), robust=True)


def _send_expiring(name: str, expires: float, **kwargs: Any) -> None:
    app.send_task(name, kwargs=kwargs, expires=expires)


def pods_sync_request(pool_id: int) -> None:
    """Read the pool's pod phases back into task status."""
    _on_commit(PODS_SYNC, pool_id=pool_id)


# -- coalescing mark ------------------------------------------------------------------------------
_REDIS_CLIENTS: dict[str, Any] = {}


def placement_pending_mark(pool_id: int, *, clear: bool = False) -> bool:
    """Set (or clear) the pool's "cycle pending" mark in Redis. True when a cycle should be enqueued.
    Without Redis (the embedded default) every request enqueues a cycle."""
    if not settings.REDIS_URL:
        return True
    import redis

    client = _REDIS_CLIENTS.get(settings.REDIS_URL)
    if client is None:
        client = _REDIS_CLIENTS[settings.REDIS_URL] = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2)
    key = f"osmo:placement-pending:{pool_id}"
    try:
        if clear:
            client.delete(key)
            return True
        return bool(client.set(key, "1", nx=True, ex=_PENDING_TTL_SECONDS))
    except redis.RedisError:
        logger.warning("placement.pending_mark_unavailable", extra={"pool_id": pool_id})
        return True
