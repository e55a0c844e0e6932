"""The ASGI application: HTTP (the API, the pages, the admin: the same Django views as ``osmo.wsgi``), the
websockets of the sessions into running tasks (Django Channels; :mod:`workflows.sessions`), the task page's
"Open port" proxy (:mod:`workflows.sessions.proxy`: HTTP routed ahead of Django so it streams) and the MCP
endpoint ``/mcp`` for AI assistants (:mod:`mcp_server`, docs/mcp.md), whose session manager runs in the
ASGI lifespan.

Served by uvicorn: ``make run`` (scripts/run.sh) and the Kubernetes ``osmo-sessions`` Deployment
(docs/deploy.md, "Sessions: exec and port-forward")."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "osmo.settings.local")
# PostgreSQL connections from a pool: under ASGI each request runs in a thread of its own, where Django's
# persistent connections are never reused (docs/operations.md, DATABASE_POOL).
os.environ.setdefault("DATABASE_POOL", "true")
django_application = get_asgi_application()  # first: it sets Django up before the consumers are imported

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
