"""A notice for the API client about its credentials (the groups claim is missing), sent as a
``Warning: 299`` response header, as the Kubernetes API server sends its warnings."""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar

from django.http import HttpRequest, HttpResponse

_notice: ContextVar[str | None] = ContextVar("osmo_sso_notice", default=None)


def notice_set(text: str | None) -> None:
    _notice.set(text)


class NoticeMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        token = _notice.set(None)
        try:
            response = self.get_response(request)
            text = _notice.get()
            if text:
                response["Warning"] = '299 osmo "' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
            return response
        finally:
            _notice.reset(token)
