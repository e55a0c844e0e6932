"""The routes of the sessions into running tasks (osmo/asgi.py mounts them): the CLI's websockets, and the
task page's "Open port" proxy (HTTP and websockets, :mod:`workflows.sessions.proxy`)."""

from channels.auth import AuthMiddlewareStack
from django.urls import path, re_path

from workflows.sessions.consumers import (
    ExecConsumer,
    PortForwardConsumer,
    UdpForwardConsumer,
    UnknownSessionConsumer,
)
from workflows.sessions.proxy import PORT_ROUTE, PortProxyHttp, PortProxyWebsocket

websocket_urlpatterns = [
    path("ws/sessions/exec/<str:ticket>/", ExecConsumer.as_asgi()),
    path("ws/sessions/port-forward/<str:ticket>/", PortForwardConsumer.as_asgi()),
    path("ws/sessions/port-forward-udp/<str:ticket>/", UdpForwardConsumer.as_asgi()),
    re_path(PORT_ROUTE, PortProxyWebsocket.as_asgi()),
    re_path(r"", UnknownSessionConsumer.as_asgi()),
]

#: HTTP routes served before Django's (signed in with the pages' session cookie).
http_urlpatterns = [
    re_path(PORT_ROUTE, AuthMiddlewareStack(PortProxyHttp())),
]
