"""Django's own refusals under /api/ as the error envelope, with DEBUG on too (docs/api.md, "Errors").

With DEBUG off, Django answers an unknown URL with ``handler404`` and a ``Host`` not in
``ALLOWED_HOSTS`` with ``handler400`` (:mod:`osmo.api.views`), both the envelope under /api/. With
DEBUG on (``make run``) it answers both with its debug pages instead, so the API's clients got HTML.
This middleware, outside the one that checks the host, gives those answers the envelope again. The
API's own answers (DRF's ``Response``, e.g. a 404 "Workflow 'x-1' not found." rendered as the browsable
API's HTML for a browser) are left as they are.
"""

from __future__ import annotations

from collections.abc import Callable

from django.core.exceptions import DisallowedHost
from django.http import HttpRequest, HttpResponse
from rest_framework.response import Response

from osmo.api.views import bad_request, not_found


class ApiRefusalEnvelopeMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if (response.status_code not in (400, 404) or not request.path.startswith("/api/")
                or isinstance(response, Response) or response.get("Content-Type", "").startswith("application/json")):
            return response
        if response.status_code == 404:
            return not_found(request)
        try:
            request.get_host()
        except DisallowedHost as exc:
            return bad_request(request, exc)
        return bad_request(request)
