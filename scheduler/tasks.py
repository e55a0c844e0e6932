"""Celery tasks of the scheduler app (queues: ``CELERY_TASK_ROUTES``). The tasks that move
workflows through placement and dispatch live in :mod:`workflows.tasks`."""

from __future__ import annotations

import socket

from celery import shared_task


@shared_task(name="scheduler.worker_heartbeat", ignore_result=True, soft_time_limit=20, time_limit=30)
def worker_heartbeat(token: str) -> None:
    """Record that a worker reached the database (used by health checks and the broker round-trip tests)."""
    from scheduler.models import WorkerHeartbeat

    WorkerHeartbeat.objects.update_or_create(token=token, defaults={"hostname": socket.gethostname()})
