"""Celery tasks of the scheduler app. Thin adapters: ids and JSON primitives in, services do the work."""

from __future__ import annotations

import socket

from celery import shared_task

from osmo.celery import Queue


@shared_task(name="scheduler.worker_heartbeat", queue=Queue.DEFAULT, ignore_result=True, soft_time_limit=20, time_limit=30)
def worker_heartbeat(token: str) -> None:
    """Record that a worker reached the database (used by health checks and the broker round-trip tests)."""
    from scheduler.models import WorkerHeartbeat

    WorkerHeartbeat.objects.update_or_create(token=token, defaults={"hostname": socket.gethostname()})
