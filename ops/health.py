"""Probes for compose, Kubernetes and load balancers (docs/design.md §10).

- ``/healthz``: the process answers. Touches nothing else (no database, no broker), so a liveness
  probe never restarts a healthy web process because PostgreSQL is down.
- ``/readyz``: the service can do its work. Checks the database, the broker and the scheduler's
  heartbeats (last tick, last placement cycle per pool with queued gangs); 200 ``{"status": "ready"}``
  or 503 with the error envelope. Only the metrics token or a staff user (:func:`ops.access.privileged`)
  gets the details (``checks``: what failed, per pool): pool names and queue lengths are not for
  anonymous callers. ``?checks=database,broker`` runs only those checks (e.g. a web readiness probe
  that should not depend on beat).

:class:`ProbeMiddleware`, first in ``MIDDLEWARE``, answers these paths and Prometheus's
``/metrics`` (:mod:`ops.metrics`) before anything else runs: probes and scrapes arrive with the
pod's IP as ``Host`` (not in ``ALLOWED_HOSTS``), and must not wait for the per-request transaction
(``ATOMIC_REQUESTS``) or sessions. The same views are in the URLconf for ``reverse()``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import Error as DjangoDatabaseError
from django.db import connection, transaction
from django.db.models import Count, Min
from django.db.models.functions import Coalesce
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils import timezone
from django.views.decorators.cache import never_cache

from ops.access import privileged
from ops.sql import database_ping
from osmo import config as osmo_config

logger = logging.getLogger(__name__)

CHECKS = ("database", "broker", "scheduler")
_REDIS_CLIENTS: dict[str, Any] = {}


def _failure(exc: BaseException) -> dict[str, Any]:
    message = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
    return {"ok": False, "error": exc.__class__.__name__, "message": message}


def database_check() -> dict[str, Any]:
    try:
        database_ping()
    except DjangoDatabaseError as exc:
        # Drop the broken connection so the next request connects afresh.
        connection.close_if_unusable_or_obsolete()
        return _failure(exc)
    return {"ok": True, "vendor": connection.vendor}


def broker_check() -> dict[str, Any]:
    """Redis answers PING; on the embedded default, the filesystem broker's folder is writable."""
    if not settings.REDIS_URL:
        folder = settings.CELERY_BROKER_TRANSPORT_OPTIONS["data_folder_out"]
        if os.path.isdir(folder) and os.access(folder, os.W_OK):
            return {"ok": True, "transport": "filesystem"}
        return {"ok": False, "transport": "filesystem", "error": "FolderNotWritable", "message": folder}
    import redis

    client = _REDIS_CLIENTS.get(settings.REDIS_URL)
    if client is None:
        client = _REDIS_CLIENTS[settings.REDIS_URL] = redis.Redis.from_url(
            settings.REDIS_URL, socket_connect_timeout=2, socket_timeout=2
        )
    try:
        client.ping()
    except redis.RedisError as exc:
        return {**_failure(exc), "transport": "redis"}
    return {"ok": True, "transport": "redis"}


def scheduler_check() -> dict[str, Any]:
    try:
        return scheduler_status(now=timezone.now())
    except DjangoDatabaseError as exc:
        connection.close_if_unusable_or_obsolete()
        return _failure(exc)


def scheduler_status(*, now: datetime | None = None) -> dict:
    """Is the scheduler making progress? ``{"ok", "tick", "pools"}`` for ``/readyz`` (three queries).

    Not OK when the last tick is older than ``OSMO_READY_TICK_MAX_AGE_SECONDS`` (or never happened:
    beat, the broker or every worker is gone), or when a pool has had gangs queued for longer than
    ``OSMO_READY_CYCLE_MAX_AGE_SECONDS`` and no placement cycle completed on it within that time
    (its cycles fail or never start). An idle pool needs no cycles, so its age alone is not a fault.
    """
    from scheduler.heartbeats import heartbeats_read
    from scheduler.models import Pool
    from workflows.choices import TaskStatus
    from workflows.models import TaskGroup

    now = now or timezone.now()
    tick_max_age = osmo_config.observability().ready_tick_max_age_seconds
    cycle_max_age = osmo_config.observability().ready_cycle_max_age_seconds
    beats = heartbeats_read()
    tick_age = (now - beats.tick_at).total_seconds() if beats.tick_at else None
    tick = {
        "last_at": beats.tick_at.isoformat() if beats.tick_at else None,
        "age_seconds": round(tick_age, 1) if tick_age is not None else None,
        "max_age_seconds": tick_max_age,
        "stale": tick_age is None or tick_age > tick_max_age,
    }
    queued = {
        row["workflow__pool_id"]: row
        for row in TaskGroup.objects.filter(status=TaskStatus.SCHEDULING)
        .values("workflow__pool_id")
        .annotate(gangs=Count("pk"), since=Min(Coalesce("scheduling_since", "workflow__submitted_at")))
        .order_by()
    }
    pools = {}
    for pool_id, name in Pool.objects.order_by("name").values_list("pk", "name"):
        cycle_at = beats.cycle_at_by_pool_id.get(pool_id)
        cycle_age = (now - cycle_at).total_seconds() if cycle_at else None
        waiting = queued.get(pool_id)
        oldest = (now - waiting["since"]).total_seconds() if waiting else None
        pools[name] = {
            "last_cycle_at": cycle_at.isoformat() if cycle_at else None,
            "cycle_age_seconds": round(cycle_age, 1) if cycle_age is not None else None,
            "queued_gangs": waiting["gangs"] if waiting else 0,
            "oldest_queued_seconds": round(oldest, 1) if oldest is not None else None,
            "stale": oldest is not None and oldest > cycle_max_age
            and (cycle_age is None or cycle_age > cycle_max_age),
        }
    return {
        "ok": not tick["stale"] and not any(pool["stale"] for pool in pools.values()),
        "tick": tick,
        "max_cycle_age_seconds": cycle_max_age,
        "pools": pools,
    }


_RUNNERS: dict[str, Callable[[], dict[str, Any]]] = {
    "database": database_check,
    "broker": broker_check,
    "scheduler": scheduler_check,
}


@never_cache
@transaction.non_atomic_requests
def healthz(request: HttpRequest) -> HttpResponse:
    return JsonResponse({"status": "ok"})


@never_cache
@transaction.non_atomic_requests
def readyz(request: HttpRequest) -> HttpResponse:
    wanted = [name.strip() for name in request.GET.get("checks", ",".join(CHECKS)).split(",") if name.strip()]
    unknown = sorted(set(wanted) - set(CHECKS))
    if unknown or not wanted:
        return JsonResponse(
            {"code": "validation_error", "message": "The request is invalid.",
             "details": {"errors": [{"path": "checks", "message": f"unknown check(s) {', '.join(unknown)}; "
                                     f"choose from {', '.join(CHECKS)}"}]}},
            status=400,
        )
    checks = {name: _RUNNERS[name]() for name in CHECKS if name in wanted}
    failed = [name for name, result in checks.items() if not result["ok"]]
    if failed:
        logger.warning("readyz.not_ready", extra={"failed": failed})
    if not privileged(request):
        if not failed:
            return JsonResponse({"status": "ready"})
        return JsonResponse({"code": "not_ready", "message": "Not ready.", "details": {}}, status=503)
    if not failed:
        return JsonResponse({"status": "ready", "checks": checks})
    return JsonResponse(
        {"code": "not_ready", "message": f"Not ready: {', '.join(failed)}.", "details": {"checks": checks}},
        status=503,
    )


@never_cache
@transaction.non_atomic_requests
def metrics(request: HttpRequest) -> HttpResponse:
    from ops.metrics import metrics_view

    return metrics_view(request)


PROBES: dict[str, Callable[[HttpRequest], HttpResponse]] = {"/healthz": healthz, "/readyz": readyz, "/metrics": metrics}


class ProbeMiddleware:
    """Answer the probe paths before host validation, sessions and the request transaction."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        view = PROBES.get(request.path_info)
        if view is None:
            return self.get_response(request)
        if request.method not in ("GET", "HEAD"):
            return JsonResponse({"code": "method_not_allowed", "message": f"Method {request.method} not allowed.",
                                 "details": {}}, status=405, headers={"Allow": "GET, HEAD"})
        return view(request)
