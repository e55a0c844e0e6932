"""The Prometheus scrape at ``/metrics`` (docs/operations.md, "Metrics"): the event counters of every
process (:mod:`osmo.metrics`, prometheus_client's multiprocess files) and gauges read from the
database at scrape time (:class:`DatabaseCollector`). The gauges name pools and their load, so the
scrape answers only the metrics token or a staff user (:func:`ops.access.privileged`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from datetime import datetime

from django.db import Error as DjangoDatabaseError
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils import timezone
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector

from ops.access import privileged
from osmo.metrics import metrics_dir

logger = logging.getLogger(__name__)


# ------------------------------------------------------------------------------------------------
# State: computed from the database at scrape time
# ------------------------------------------------------------------------------------------------
class DatabaseCollector:
    """Gauges read from the database on every scrape (a fixed number of grouped queries). If the
    database cannot be reached, only ``osmo_database_up 0`` is reported."""

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily("osmo_database_up", "1 when the scrape could read the database.")
        try:
            families = list(self._families(timezone.now()))
        except DjangoDatabaseError:
            logger.warning("metrics.database_unavailable", exc_info=True)
            connection.close_if_unusable_or_obsolete()
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        yield from families

    def _families(self, now: datetime) -> Iterable[Metric]:
        from django.db.models import Count, F, Q, Sum

        from scheduler.heartbeats import heartbeats_read
        from scheduler.models import Node, Pool, Reservation
        from workflows.choices import Priority, TaskStatus
        from workflows.models import Task, TaskGroup

        pools = dict(Pool.objects.order_by("name").values_list("pk", "name"))

        queue = GaugeMetricFamily("osmo_queue_gangs", "Gangs queued for placement (SCHEDULING).",
                                  labels=["pool", "priority"])
        depth = {
            (pool_id, priority): count
            for pool_id, priority, count in TaskGroup.objects.filter(status=TaskStatus.SCHEDULING)
            .values_list("workflow__pool_id", "workflow__priority")
            .annotate(count=Count("pk"))
            .order_by()
        }
        for pool_id, name in pools.items():
            for priority in Priority.values:
                queue.add_metric([name, priority], depth.get((pool_id, priority), 0))
        yield queue

        active = [TaskStatus.WAITING, TaskStatus.SCHEDULING, TaskStatus.INITIALIZING, TaskStatus.RUNNING]
        tasks = GaugeMetricFamily(
            "osmo_tasks", "Tasks (pods) not finished yet, by status: INITIALIZING is a pod being created or "
            "pending, RUNNING a running pod.", labels=["pool", "status"])
        by_status = {
            (pool_id, status): count
            for pool_id, status, count in Task.objects.filter(status__in=active)
            .values_list("workflow__pool_id", "status")
            .annotate(count=Count("pk"))
            .order_by()
        }
        for pool_id, name in pools.items():
            for status in active:
                tasks.add_metric([name, status], by_status.get((pool_id, status), 0))
        yield tasks

        nodes = {
            row["pool_id"]: row
            for row in Node.objects.values("pool_id")
            .annotate(capacity=Sum("gpu"), external=Sum("used_gpu"),
                      room=Sum(F("gpu") - F("used_gpu"), filter=Q(schedulable=True)))
            .order_by()
        }
        held = {
            row["pool_id"]: row
            for row in Reservation.objects.filter(released_at__isnull=True)
            .values("pool_id")
            .annotate(reserved=Sum("gpu"), on_schedulable=Sum("gpu", filter=Q(node__schedulable=True)))
            .order_by()
        }
        gpus = GaugeMetricFamily(
            "osmo_pool_gpus", "GPUs per pool: capacity (all nodes); used (reserved by this service plus used "
            "outside it); reserved (by this service); free (placeable now: schedulable nodes only).",
            labels=["pool", "state"])
        for pool_id, name in pools.items():
            node_row = nodes.get(pool_id, {})
            held_row = held.get(pool_id, {})
            reserved = held_row.get("reserved") or 0
            gpus.add_metric([name, "capacity"], node_row.get("capacity") or 0)
            gpus.add_metric([name, "used"], reserved + (node_row.get("external") or 0))
            gpus.add_metric([name, "reserved"], reserved)
            gpus.add_metric([name, "free"], max(0, (node_row.get("room") or 0) - (held_row.get("on_schedulable") or 0)))
        yield gpus

        beats = heartbeats_read()
        tick = GaugeMetricFamily("osmo_scheduler_tick_age_seconds",
                                 "Seconds since the last scheduler tick completed (absent: never).")
        if beats.tick_at is not None:
            tick.add_metric([], (now - beats.tick_at).total_seconds())
        yield tick
        cycles = GaugeMetricFamily("osmo_placement_cycle_age_seconds",
                                   "Seconds since the pool's last placement cycle completed (absent: never).",
                                   labels=["pool"])
        for pool_id, at in beats.cycle_at_by_pool_id.items():
            if pool_id in pools:
                cycles.add_metric([pools[pool_id]], (now - at).total_seconds())
        yield cycles


def metrics_registry() -> CollectorRegistry:
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=metrics_dir())
    registry.register(DatabaseCollector())
    return registry


def metrics_view(request: HttpRequest) -> HttpResponse:
    """The Prometheus text format, for ``Authorization: Bearer <OSMO_METRICS_TOKEN>`` or a staff user."""
    if not privileged(request):
        return JsonResponse({"code": "not_authenticated",
                             "message": "The metrics bearer token or a staff user is required.",
                             "details": {}}, status=401, headers={"WWW-Authenticate": "Bearer"})
    response = HttpResponse(generate_latest(metrics_registry()), content_type=CONTENT_TYPE_LATEST)
    response["Cache-Control"] = "no-store"
    return response
