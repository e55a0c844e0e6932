"""Celery tasks of the scheduler app and their names (queues: ``CELERY_TASK_ROUTES``). The tasks that
move workflows through placement and dispatch, and their names, are the workflows app's
(:mod:`workflows.tasks`, :mod:`workflows.jobs`)."""

from __future__ import annotations

import socket

from celery import shared_task

WORKER_HEARTBEAT = "scheduler.worker_heartbeat"


@shared_task(name=WORKER_HEARTBEAT, ignore_result=True, soft_time_limit=20, time_limit=30)
def worker_heartbeat(token: str) -> None:
    """Record that a worker reached the database (used by health checks and the broker round-trip tests)."""
    from scheduler.models import WorkerHeartbeat

    WorkerHeartbeat.objects.update_or_create(token=token, defaults={"hostname": socket.gethostname()})
