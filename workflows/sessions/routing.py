"""The websocket routes of the sessions into running tasks (osmo/asgi.py mounts them)."""

from django.urls import path, re_path

from workflows.sessions.consumers import (
    ExecConsumer,
    PortForwardConsumer,
    UdpForwardConsumer,
    UnknownSessionConsumer,
)

websocket_urlpatterns = [
    path("ws/sessions/exec/<str:ticket>/", ExecConsumer.as_asgi()),
    path("ws/sessions/port-forward/<str:ticket>/", PortForwardConsumer.as_asgi()),
    path("ws/sessions/port-forward-udp/<str:ticket>/", UdpForwardConsumer.as_asgi()),
    re_path(r"", UnknownSessionConsumer.as_asgi()),
]
