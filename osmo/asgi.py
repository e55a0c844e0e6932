"""The ASGI application: HTTP (the API, the pages, the admin: the same Django views as ``osmo.wsgi``), the
websockets of the sessions into running tasks (Django Channels; :mod:`workflows.sessions`), the task page's
"Open port" proxy (:mod:`workflows.sessions.proxy`: HTTP routed ahead of Django so it streams) and the MCP
endpoint ``/mcp`` for AI assistants (:mod:`mcp_server`, docs/mcp.md), whose session manager runs in the
ASGI lifespan.

Served by uvicorn: ``make run`` (scripts/run.sh) and the Kubernetes ``osmo-sessions`` Deployment
(docs/deploy.md, "Sessions: exec and port-forward")."""

import os

from a2wsgi import WSGIMiddleware
from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "osmo.settings.local")
# PostgreSQL connections from a pool, shared by the HTTP threads and the websockets' database calls
# (docs/operations.md, DATABASE_POOL).
os.environ.setdefault("DATABASE_POOL", "true")
# Django's HTTP side (the API, the pages, the admin: all synchronous views and middleware) runs as it does
# under gunicorn: each request whole in one thread of a pool (a2wsgi), its middleware and view without a
# hop. Django's own ASGI handler crossed between the event loop and threads about a dozen times per request
# (its async-capable middleware run each hook through sync_to_async), and started a thread per request:
# 3.9 against 2.1 ms of CPU for a GET /api/me/ (docs/benchmarks-log.md, "Sessions").
HTTP_THREADS = 10
django_application = WSGIMiddleware(get_wsgi_application(), workers=HTTP_THREADS)  # type: ignore[arg-type]
# (first: get_wsgi_application sets Django up before the consumers are imported)

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.urls import re_path  # noqa: E402

from mcp_server.server import McpRouter, server_build  # noqa: E402
from workflows.sessions.routing import http_urlpatterns, websocket_urlpatterns  # noqa: E402

mcp_application = server_build().streamable_http_app()

# No origin check for the sessions' websockets: one opens only with a ticket, which only a (CSRF-checked)
# POST of the same user hands out, so another site's page cannot open one with a visitor's cookie. The
# "Open port" proxy has no ticket: it refuses another site's websockets and writes itself (proxy.py).
application = ProtocolTypeRouter({
    # (Channels' routers take any ASGI app where Django's stubs expect a view)
    "http": McpRouter(URLRouter([*http_urlpatterns, re_path(r"", django_application)]),  # type: ignore[arg-type]
                      mcp_application),
    "websocket": AuthMiddlewareStack(URLRouter(websocket_urlpatterns)),
    "lifespan": mcp_application,  # starts and stops the MCP session manager (Starlette's lifespan)
})
