"""The MCP endpoint through the SDK's own client against a live uvicorn on ``osmo.asgi`` (the sessions'
fixture: the ASGI application as `make run` and the sessions Deployment serve it)."""

from tests.sessions.conftest import asgi_server  # noqa: F401  (the fixture, shared)
