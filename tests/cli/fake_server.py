"""A small fake of the service's logs and events endpoints (docs/design.md §11), for the CLI tests of
``osmo workflow logs`` and ``events``: a real HTTP server in a thread that answers canned JSON and
records each request."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit


class FakeServer:
    def __init__(self, routes: dict[str, tuple[int, Any]]) -> None:
        self.routes = routes
        self.requests: list[dict[str, str]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802  # http.server's name
                parts = urlsplit(self.path)
                fake.requests.append({"path": parts.path, "query": parts.query,
                                      "authorization": self.headers.get("Authorization", "")})
                status, body = fake.routes.get(parts.path, (404, {"code": "not_found", "message": "Not found.",
                                                                  "details": {}}))
                # bytes are sent as they are, as an HTML page (what a proxy in front of the service answers)
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/html" if isinstance(body, bytes) else "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
