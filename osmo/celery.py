"""The Celery application. Configuration comes from Django settings (``CELERY_*``)."""

import logging
import os
from enum import StrEnum
from typing import Any

from celery import Celery, bootsteps
from celery.signals import task_postrun, task_prerun, worker_ready
from kombu.transport import TRANSPORT_ALIASES

from osmo import broker
from osmo import config as osmo_config

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "osmo.settings.local")
# The embedded default's broker (``osmofs://``): kombu's filesystem transport, message files atomic.
TRANSPORT_ALIASES[broker.ALIAS] = "osmo.broker:Transport"

logger = logging.getLogger(__name__)

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
    """A worker that starts sends one tick, which keeps itself going (``workflows.jobs.tick_followup``):
    placement and pod sync progress even when the beat process is gone."""

    if osmo_config.scheduler().tick_without_beat:
        from workflows.jobs import TICK  # function-local: workflows.jobs imports this module's app

        app.send_task(TICK)


TICK_WATCH_INTERVALS = 3  # a watch every this many tick intervals; a tick older than that is overdue


class TickWatchdog(bootsteps.StartStopStep):
    """Every worker is a backup for the tick chain (docs/design.md §10).

    The chain is one pending follow-up tick, a message with a countdown that some worker holds until
    it is due. If that worker is killed (SIGKILL, out of memory) while beat is gone too, the message
    comes back only after the broker's visibility timeout (an hour), and nothing syncs pods until a
    worker starts or a submission runs a cycle. So each worker's own timer (in its main process, which
    lives as long as the worker) sends ``workflows.tick_watch`` every three tick intervals; that task
    runs a tick when none ran for that long, and the tick starts a new chain. While beat or the chain
    is alive, the watch finds a fresh tick and does nothing (one small message per worker every few
    seconds). The main process only sends: the check runs in a task, where database connections belong.
    """

    requires = ("celery.worker.components:Timer",)

    def __init__(self, worker: Any, **kwargs: Any) -> None:
        self.timer_entry: Any = None

    def start(self, worker: Any) -> None:

        if not osmo_config.scheduler().tick_without_beat:
            return
        every = float(osmo_config.scheduler().placement_tick_seconds) * TICK_WATCH_INTERVALS
        self.timer_entry = worker.timer.call_repeatedly(every, _tick_watch_send, (every,), priority=10)

    def stop(self, worker: Any) -> None:
        if self.timer_entry is not None:
            self.timer_entry.cancel()
            self.timer_entry = None


def _tick_watch_send(expires: float) -> None:
    from workflows.jobs import TICK_WATCH  # function-local: workflows.jobs imports this module's app

    try:
        # No publish retries: this runs in the worker's event loop, which must not wait on a broker
        # that does not answer; the next timer call tries again.
        app.send_task(TICK_WATCH, expires=expires, retry=False)
    except Exception:  # noqa: BLE001 - the broker is down: the next timer call tries again
        logger.warning("tick_watch.send_failed", exc_info=True)


app.steps["worker"].add(TickWatchdog)
