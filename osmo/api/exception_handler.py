"""One error envelope for every API error: ``{"code", "message", "details"}``.

Validation errors carry ``details.errors = [{"path": "a.b[0].c", "message": "..."}]`` whatever raised
them (DRF serializers, Django model validation, the spec package). Anything unexpected is left to DRF
(``None``), so it becomes a logged 500 and is never swallowed.
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied, RequestDataTooBig, SuspiciousOperation
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import InterfaceError as DjangoInterfaceError
from django.db import OperationalError as DjangoOperationalError
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.serializers import as_serializer_error
from rest_framework.views import exception_handler as drf_exception_handler

from osmo.api.parsers import JSON_TOO_DEEP_MESSAGE
from osmo.errors import LockBusyError, OsmoError

logger = logging.getLogger(__name__)


def flatten_errors(data: Any, prefix: str = "") -> list[dict[str, str]]:
    """Turn DRF's nested error structure into ``[{"path", "message"}]``, paths like ``spec.groups[0].name``."""
    items: list[dict[str, str]] = []
    if isinstance(data, dict):
        for key, value in data.items():
            if key == "non_field_errors":
                path = prefix
            elif isinstance(key, int) or (isinstance(key, str) and key.isdigit()):
                path = f"{prefix}[{key}]"
            else:
                path = f"{prefix}.{key}" if prefix else str(key)
            items.extend(flatten_errors(value, path))
    elif isinstance(data, list):
        if all(not isinstance(item, (dict, list)) for item in data):
            items.extend({"path": prefix, "message": str(item)} for item in data)
        else:
            for index, item in enumerate(data):
                if item:
                    items.extend(flatten_errors(item, f"{prefix}[{index}]"))
    else:
        items.append({"path": prefix, "message": str(data)})
    return items


def envelope(code: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"code": code, "message": message, "details": details or {}}


DATABASE_UNAVAILABLE = envelope("database_unavailable", "The database is unavailable; retry shortly.")
DATABASE_RETRY_AFTER_SECONDS = 5
# PostgreSQL SQLSTATEs that mean "not reachable now": class 08 (connection exception), its volume
# full (a table or index cannot grow: 53100), too many connections, and the server shutting down or
# starting up (a restart).
_UNAVAILABLE_SQLSTATES = frozenset({"53100", "53300", "57P01", "57P02", "57P03"})


def database_unavailable(exc: BaseException | None) -> bool:
    """True when ``exc`` means the database cannot be reached right now, rather than a problem with
    the query: a failed or dropped connection, a server restarting, SQLite's busy or missing file."""
    if isinstance(exc, DjangoInterfaceError):
        return True
    if not isinstance(exc, DjangoOperationalError):
        return False
    sqlstate = getattr(exc.__cause__, "sqlstate", None)
    if sqlstate is None:  # raised by the client library (refused, timed out, closed) or by SQLite
        return True
    return sqlstate.startswith("08") or sqlstate in _UNAVAILABLE_SQLSTATES


def _unique_violation(exc: DjangoValidationError) -> bool:
    """True when every error of ``exc`` is a uniqueness check (codes ``unique``, ``unique_together``)."""
    codes = [error.code for error in exc.error_list] if hasattr(exc, "error_list") else []
    if hasattr(exc, "error_dict"):
        codes = [error.code for errors in exc.error_dict.values() for error in errors]
    return bool(codes) and all(code in ("unique", "unique_together") for code in codes)


def osmo_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, OsmoError):
        domain = Response(envelope(exc.code, exc.message, exc.details), status=exc.http_status)
        if isinstance(exc, LockBusyError):
            domain["Retry-After"] = str(exc.retry_after_seconds)
        return domain
    if isinstance(exc, DjangoValidationError):
        errors = flatten_errors(as_serializer_error(exc))
        # A name another row already has is a conflict with the current state, not malformed input.
        taken = _unique_violation(exc)
        return Response(
            envelope("conflict" if taken else "validation_error",
                     "The name is taken." if taken else "The request is invalid.", {"errors": errors}),
            status=status.HTTP_409_CONFLICT if taken else status.HTTP_400_BAD_REQUEST,
        )
    if isinstance(exc, RequestDataTooBig):
        # Django's limit (DATA_UPLOAD_MAX_MEMORY_SIZE), hit when DRF reads a JSON or form body.
        return Response(
            envelope("request_too_large", "The request body is too large.",
                     {"max_bytes": settings.DATA_UPLOAD_MAX_MEMORY_SIZE}),
            status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
        )
    if database_unavailable(exc):
        logger.warning("api.database_unavailable", extra={"error": str(exc).strip().splitlines()[0][:300]})
        unavailable = Response(DATABASE_UNAVAILABLE, status=status.HTTP_503_SERVICE_UNAVAILABLE)
        unavailable["Retry-After"] = str(DATABASE_RETRY_AFTER_SECONDS)
        return unavailable
    if isinstance(exc, RecursionError):
        # A body nested deeper than Python's recursion limit allows, read by a view with its own parser
        # list (osmo.api.parsers.JSONParser refuses these itself) or walked by a recursive step later.
        logger.warning("api.input_too_deep", exc_info=True)
        return Response(envelope("parse_error", JSON_TOO_DEEP_MESSAGE), status=status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, SuspiciousOperation):
        # e.g. TooManyFieldsSent for a form body: Django would answer a bare 400 page.
        return Response(envelope("bad_request", str(exc) or "The request is malformed."),
                        status=status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied()

    response = drf_exception_handler(exc, context)
    if response is None or not isinstance(exc, exceptions.APIException):
        return response
    if isinstance(exc, exceptions.ValidationError):
        errors = flatten_errors(exc.detail)
        response.data = envelope("validation_error", "The request is invalid.", {"errors": errors})
        return response
    detail = exc.detail
    code = getattr(detail, "code", None) or exc.default_code
    message = str(detail) if not isinstance(detail, (dict, list)) else str(exc.default_detail)
    response.data = envelope(str(code), message)
    return response
