"""The ASGI application: HTTP (the API, the pages, the admin: the same Django views as ``osmo.wsgi``) and
the websockets of the sessions into running tasks (Django Channels; :mod:`workflows.sessions`).

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

from workflows.sessions.routing import websocket_urlpatterns  # noqa: E402

# No origin check: a websocket opens only with a ticket, which only a (CSRF-checked) POST of the same user
# hands out, so another site's page cannot open one with a visitor's cookie.
application = ProtocolTypeRouter({
    "http": django_application,
    "websocket": AuthMiddlewareStack(URLRouter(websocket_urlpatterns)),
})
