"""Shared behaviour of the API views."""

from __future__ import annotations

import sys
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults
from rest_framework.exceptions import NotFound
from rest_framework.request import Request

from osmo.api.exception_handler import DATABASE_RETRY_AFTER_SECONDS, DATABASE_UNAVAILABLE, database_unavailable


class NulSafeLookupMixin:
    """Answer 404 for a URL whose path values (``{name}``, ``{id}``, ...) contain a NUL character.

    Every lookup compares them with text columns, and PostgreSQL refuses NUL in a query (psycopg raises
    ``ValueError``, a 500). No pool, node or workflow name can contain one, so such a URL names nothing.
    Runs after authentication and permission checks, so an anonymous caller still gets 401.
    """

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)  # type: ignore[misc]
        if any(isinstance(value, str) and "\x00" in value for value in kwargs.values()):
            raise NotFound()


def bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """``handler400``: Django's own refusals (a ``Host`` not in ``ALLOWED_HOSTS``, other
    ``SuspiciousOperation``) -- the error envelope under /api/, Django's page elsewhere."""
    if request.path.startswith("/api/"):
        message = str(exception) if exception is not None and str(exception) else "The request is malformed."
        return JsonResponse({"code": "bad_request", "message": message[:500], "details": {}}, status=400)
    return defaults.bad_request(request, exception or Exception())


def permission_denied(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """``handler403``: the error envelope under /api/, Django's page elsewhere."""
    if request.path.startswith("/api/"):
        return JsonResponse({"code": "permission_denied",
                             "message": "You do not have permission to perform this action.", "details": {}},
                            status=403)
    return defaults.permission_denied(request, exception or Exception())


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """404 for unknown URLs: the error envelope under /api/, Django's page elsewhere."""
    if request.path.startswith("/api/"):
        body = {"code": "not_found", "message": f"No API endpoint at {request.path}.", "details": {}}
        return JsonResponse(body, status=404)
    return defaults.page_not_found(request, exception)


DATABASE_UNAVAILABLE_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Service unavailable</title></head>
<body><h1>Service unavailable</h1><p>The database is unavailable; retry shortly.</p></body></html>
"""


def server_error(request: HttpRequest) -> HttpResponse:
    """``handler500``: what an exception no view handled becomes (with DEBUG off).

    Django calls it inside its ``except`` block, so ``sys.exc_info()`` is the exception. A database
    that cannot be reached (PostgreSQL restarting, a dropped connection; raised e.g. when the request's
    transaction opens) answers 503 with ``Retry-After``; under /api/ every answer is the error envelope.
    """
    exc = sys.exc_info()[1]
    headers = {"Retry-After": str(DATABASE_RETRY_AFTER_SECONDS)}
    if database_unavailable(exc):
        if request.path.startswith("/api/"):
            return JsonResponse(DATABASE_UNAVAILABLE, status=503, headers=headers)
        return HttpResponse(DATABASE_UNAVAILABLE_PAGE, status=503, headers=headers)
    if request.path.startswith("/api/"):
        return JsonResponse({"code": "server_error", "message": "Internal server error.", "details": {}}, status=500)
    return defaults.server_error(request)
