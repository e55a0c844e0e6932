"""A Kubernetes API server for tests at the HTTP boundary: list pages in the API's shapes, served by
path and ``continue`` token, and a 410 Gone ``Status`` for an expired token."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

from kubernetes import client as k8s_client

EXPIRED = {
    "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "reason": "Expired", "code": 410,
    "message": "The provided continue parameter is too old to display a consistent list result. You can start a "
    "new list without the continue parameter.",
}


class FakeApiServer:
    """Serves ``pages[path][continue token]``; ``expired`` tokens answer 410 Gone (once each unless
    ``always_expired``); records every request's path and query in ``requests``, its Authorization
    header in ``authorizations``."""

    def __init__(self, pages: dict[str, dict[str | None, dict]], *, expired: set[str] = frozenset(),
                 always_expired: bool = False) -> None:
        self.pages, self.expired, self.always_expired = pages, set(expired), always_expired
        self.requests: list[tuple[str, dict]] = []
        self.authorizations: list[str | None] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                url = urlparse(self.path)
                query = parse_qs(url.query)
                server.requests.append((url.path, query))
                server.authorizations.append(self.headers.get("Authorization"))
                token = query.get("continue", [None])[0]
                if token in server.expired:
                    if not server.always_expired:
                        server.expired.discard(token)
                    self._send(410, EXPIRED)
                    return
                page = server.pages.get(url.path, {}).get(token)
                if page is None:
                    self._send(404, {"kind": "Status", "status": "Failure", "reason": "NotFound", "code": 404})
                    return
                self._send(200, page)

            def _send(self, code: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> FakeApiServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)

    def core(self) -> k8s_client.CoreV1Api:
        configuration = k8s_client.Configuration()
        configuration.host = self.url
        return k8s_client.CoreV1Api(k8s_client.ApiClient(configuration))
