"""The ASGI application: HTTP (the API, the pages, the admin: the same Django views as ``osmo.wsgi``) and
the websockets of the sessions into running tasks (Django Channels; :mod:`workflows.sessions`), and the
task page's "Open port" proxy (:mod:`workflows.sessions.proxy`: HTTP routed ahead of Django so it streams).

Served by uvicorn: ``make run`` (scripts/run.sh) and the Kubernetes ``osmo-sessions`` Deployment
(docs/deploy.md, "Sessions: exec and port-forward")."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "osmo.settings.local")
django_application = get_asgi_application()  # first: it sets Django up before the consumers are imported

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.urls import re_path  # noqa: E402

from workflows.sessions.routing import http_urlpatterns, websocket_urlpatterns  # noqa: E402

# No origin check for the sessions' websockets: one opens only with a ticket, which only a (CSRF-checked)
# POST of the same user hands out, so another site's page cannot open one with a visitor's cookie. The
# "Open port" proxy has no ticket: it refuses another site's websockets and writes itself (proxy.py).
application = ProtocolTypeRouter({
    # (Channels' routers take any ASGI app where Django's stubs expect a view)
    "http": URLRouter([*http_urlpatterns, re_path(r"", django_application)]),  # type: ignore[arg-type]
    "websocket": AuthMiddlewareStack(URLRouter(websocket_urlpatterns)),
})
