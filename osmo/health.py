"""Probes for compose, Kubernetes and load balancers (docs/design.md §10).

- ``/healthz``: the process answers. Touches nothing else (no database, no broker), so a liveness
  probe never restarts a healthy web process because PostgreSQL is down.
- ``/readyz``: the service can do its work. Checks the database, the broker and the scheduler's
  heartbeats (last tick, last placement cycle per pool with queued gangs); 200 with the details,
  or 503 with the error envelope whose ``details.checks`` says what failed. ``?checks=database,broker``
  runs only those checks (e.g. a web readiness probe that should not depend on beat).

:class:`ProbeMiddleware`, first in ``MIDDLEWARE``, answers these paths (and ``/metrics``) before
anything else runs: probes arrive with the pod's IP as ``Host`` (not in ``ALLOWED_HOSTS``), and must
not wait for the per-request transaction (``ATOMIC_REQUESTS``) or sessions. The same views are in the
URLconf for ``reverse()``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import Error as DjangoDatabaseError
from django.db import connection, transaction
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils import timezone
from django.views.decorators.cache import never_cache

logger = logging.getLogger(__name__)

CHECKS = ("database", "broker", "scheduler")
_REDIS_CLIENTS: dict[str, Any] = {}


def _failure(exc: BaseException) -> dict[str, Any]:
    message = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
    return {"ok": False, "error": exc.__class__.__name__, "message": message}


def database_check() -> dict[str, Any]:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
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
    from scheduler.heartbeats import scheduler_status

    try:
        return scheduler_status(now=timezone.now())
    except DjangoDatabaseError as exc:
        connection.close_if_unusable_or_obsolete()
        return _failure(exc)


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
    if not failed:
        return JsonResponse({"status": "ready", "checks": checks})
    logger.warning("readyz.not_ready", extra={"failed": failed})
    return JsonResponse(
        {"code": "not_ready", "message": f"Not ready: {', '.join(failed)}.", "details": {"checks": checks}},
        status=503,
    )


PROBES: dict[str, Callable[[HttpRequest], HttpResponse]] = {"/healthz": healthz, "/readyz": readyz}


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
