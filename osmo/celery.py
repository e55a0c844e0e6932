"""The Celery application. Configuration comes from Django settings (``CELERY_*``)."""

import os
from enum import StrEnum

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "osmo.settings.local")

app = Celery("osmo")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


class Queue(StrEnum):
    """Queues by latency class: placement cycles must not wait behind Kubernetes calls."""

    SCHEDULER = "scheduler"
    DISPATCH = "dispatch"
    DEFAULT = "default"
