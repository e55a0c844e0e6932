"""Refusals under /api/ that happen before a view runs, in the API's error envelope."""

from __future__ import annotations

import re
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, JsonResponse

# C0 control characters but horizontal tab, and DEL: no header value of the API may hold one
# (PostgreSQL refuses NUL in a query, which made an Idempotency-Key with one a 500).
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


class ApiHeaderMiddleware:
    """Answer 400 with the envelope, naming the header, for an /api/ request whose header value holds
    a control character (gunicorn refuses most of them itself, see osmo.gunicorn_worker; other
    servers and the test client pass them through)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path_info.startswith("/api/"):
            for key, value in request.META.items():
                if key.startswith("HTTP_") and isinstance(value, str) and _CONTROL.search(value):
                    name = key[5:].replace("_", "-").title()
                    return JsonResponse({"code": "bad_request",
                                         "message": f"The {name} header holds a control character.",
                                         "details": {"header": name}}, status=400)
        return self.get_response(request)
