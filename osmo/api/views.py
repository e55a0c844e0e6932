"""Shared behaviour of the API views."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults
from rest_framework.exceptions import NotFound
from rest_framework.request import Request


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


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """404 for unknown URLs: the error envelope under /api/, Django's page elsewhere."""
    if request.path.startswith("/api/"):
        body = {"code": "not_found", "message": f"No API endpoint at {request.path}.", "details": {}}
        return JsonResponse(body, status=404)
    return defaults.page_not_found(request, exception)
