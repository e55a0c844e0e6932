"""gunicorn's ``gthread`` worker whose own refusals are the API's JSON error envelope.

gunicorn answers a request it cannot parse (a request line past ``limit_request_line``, a header with
a NUL or a bad name, too many headers, a bad chunk) itself, before the application sees it, with an
HTML page. The API promises ``{"code", "message", "details"}`` for every answer (docs/api.md): this
worker writes that instead. The path is not known yet when the request line itself is refused, so
every such refusal is the envelope. Set as ``worker_class`` in :mod:`osmo.gunicorn_conf`; the status
codes are gunicorn's own (the table below follows ``gunicorn.workers.base.Worker.handle_error``).
"""

from __future__ import annotations

import json
from ssl import SSLError
from typing import Any

from gunicorn import util  # type: ignore[import-untyped]
from gunicorn.http import errors  # type: ignore[import-untyped]
from gunicorn.workers.gthread import ThreadWorker  # type: ignore[import-untyped]

# (exception, HTTP status, reason, envelope code); first match wins.
REFUSALS: tuple[tuple[type[BaseException], int, str, str], ...] = (
    (errors.InvalidResponseHeader, 500, "Internal Server Error", "server_error"),
    (errors.InvalidResponseHeaderName, 500, "Internal Server Error", "server_error"),
    (errors.LimitRequestLine, 414, "URI Too Long", "request_line_too_long"),
    (errors.LimitRequestHeaders, 431, "Request Header Fields Too Large", "headers_too_large"),
    (errors.ExpectationFailed, 417, "Expectation Failed", "expectation_failed"),
    (errors.UnsupportedTransferCoding, 501, "Not Implemented", "unsupported_transfer_coding"),
    (errors.ForbiddenProxyRequest, 403, "Forbidden", "forbidden"),
    (SSLError, 403, "Forbidden", "forbidden"),
    (errors.ConfigurationProblem, 500, "Internal Server Error", "server_error"),
    (errors.ParseException, 400, "Bad Request", "bad_request"),
)


def refusal(exc: BaseException) -> tuple[int, str, str, str]:
    """``(status, reason, code, message)`` of gunicorn's answer to ``exc``."""
    for kind, status, reason, code in REFUSALS:
        if isinstance(exc, kind):
            message = "Internal server error." if status == 500 else f"{reason}: {exc}"[:500]
            return status, reason, code, message
    return 500, "Internal Server Error", "server_error", "Internal server error."


class EnvelopeThreadWorker(ThreadWorker):
    def handle_error(self, req: Any, client: Any, addr: Any, exc: BaseException) -> None:
        status, reason, code, message = refusal(exc)
        address = (addr or ("", -1))[0]
        if status == 500:
            self.log.exception("Error handling request %s", getattr(req, "uri", "(no URI read)"))
        else:
            self.log.warning("Invalid request from ip=%s: %s", address, exc)
        body = json.dumps({"code": code, "message": message, "details": {}}).encode()
        head = (f"HTTP/1.1 {status} {reason}\r\nConnection: close\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n").encode("latin1")
        try:
            util.write_nonblock(client, head + body)
        except Exception:
            self.log.debug("Failed to send error message.")
