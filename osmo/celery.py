"""The Celery application. Configuration comes from Django settings (``CELERY_*``)."""

import os
from enum import StrEnum

from celery import Celery
from celery.signals import task_postrun, task_prerun, worker_ready

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "osmo.settings.local")

app = Celery("osmo")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


class Queue(StrEnum):
    """Queues by latency class: placement cycles must not wait behind Kubernetes calls."""

    SCHEDULER = "scheduler"
    DISPATCH = "dispatch"
    DEFAULT = "default"


@task_prerun.connect(dispatch_uid="osmo.celery.connections_prerun")
@task_postrun.connect(dispatch_uid="osmo.celery.connections_postrun")
def _database_connections_check(sender: object = None, **kwargs: object) -> None:
    """Around every task run by a worker: what Django does around every request. A connection past
    ``CONN_MAX_AGE``, or left unusable by an error (a database restart), is closed and the next query
    opens a new one; otherwise the task reuses it (``CELERY_DB_REUSE_MAX`` keeps Celery's Django fixup
    from closing it after every task). Tasks run eagerly, and connections inside a transaction, are left
    alone."""
    if getattr(getattr(sender, "request", None), "is_eager", False):
        return
    from django.db import connections

    for connection in connections.all(initialized_only=True):
        if not connection.in_atomic_block:
            connection.close_if_unusable_or_obsolete()


@worker_ready.connect
def _tick_on_worker_start(sender: object, **kwargs: object) -> None:
    """A worker that starts sends one tick, which keeps itself going (``scheduler.jobs.tick_followup``):
    placement and pod sync progress even when the beat process is gone."""
    from django.conf import settings

    if settings.OSMO_TICK_WITHOUT_BEAT:
        app.send_task("scheduler.tick")
