"""The Celery application. Configuration comes from Django settings (``CELERY_*``)."""

import os
from enum import StrEnum

from celery import Celery
from celery.signals import worker_ready

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "osmo.settings.local")

app = Celery("osmo")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


class Queue(StrEnum):
    """Queues by latency class: placement cycles must not wait behind Kubernetes calls."""

    SCHEDULER = "scheduler"
    DISPATCH = "dispatch"
    DEFAULT = "default"


@worker_ready.connect
def _tick_on_worker_start(sender: object, **kwargs: object) -> None:
    """A worker that starts sends one tick, which keeps itself going (``scheduler.jobs.tick_followup``):
    placement and pod sync progress even when the beat process is gone."""
    from django.conf import settings

    if settings.OSMO_TICK_WITHOUT_BEAT:
        app.send_task("scheduler.tick")
