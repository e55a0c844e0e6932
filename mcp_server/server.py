"""The MCP server and the ASGI application ``osmo.asgi`` routes ``/mcp`` to (docs/mcp.md).

- The SDK's ``FastMCP`` with every tool of :data:`mcp_server.registry.TOOLS`, served on its streamable
  HTTP transport in **stateless** mode with JSON answers: each POST is one self-contained exchange, so any
  replica answers any request (the sessions Deployment runs two, behind an Ingress without sticky
  sessions), a restart loses nothing, and nothing is kept per client between requests. The tools are
  request and answer; none needs a stream from server to client.
- :class:`BearerAuthentication` in front of it: ``Authorization: Bearer <token>`` with the user's API key or
  access token, or the identity provider's access token where single sign-on is configured, checked by
  the API's own authentication classes (same lookup, expiry and failed-attempt throttle) and the API's
  per-user rate; anything else is refused with 401 (429 when throttled, 503 when the provider cannot be
  reached) in the API's envelope before the MCP transport sees the request.
- The SDK's session manager runs inside the ASGI lifespan (uvicorn's, ``--lifespan auto``, the default):
  ``osmo.asgi`` sends the lifespan scope to the SDK's Starlette application, which starts the manager's
  task group on startup and stops it on shutdown.
"""

from __future__ import annotations

import io
import json
from typing import Any, cast

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIRequest
from django.db import close_old_connections
from mcp.server.fastmcp import FastMCP
from mcp.server.transport_security import TransportSecuritySettings
from rest_framework.authentication import BaseAuthentication
from rest_framework.exceptions import NotAuthenticated, Throttled
from rest_framework.settings import api_settings

from mcp_server import tools
from mcp_server.registry import TOOLS, tool_adapter
from osmo.api.authentication import ThrottledTokenAuthentication
from osmo.api.exception_handler import osmo_exception_handler
from osmo.api.throttling import UserRateThrottle
from osmo.sso.authentication import OIDCAccessTokenAuthentication

PATH = "/mcp"
INSTRUCTIONS = (
    "Tools of an OSMO-style workflow service with topology-aware gang placement: your profile and pools, "
    "the nodes of your pools, your workflows (list, query, logs, events, spec), validating and submitting "
    "workflow specs, cancelling and restarting workflows, and the names of your credentials. Every call acts "
    "as you, with your permissions. Submitting and restarting use real compute and are not retried "
    "automatically: after an unclear failure, query the workflow list before trying again."
)
WWW_AUTHENTICATE = 'Bearer realm="osmo"'
#: The API's authentication classes the endpoint takes, in the API's configured order: the provider's access
#: token (single sign-on, where configured: a bearer JWT), then the user's API key or access token. Not the
#: session cookie (no CSRF check protects /mcp) and not a task's token (it is for the task's own calls).
BEARER_CLASSES = (OIDCAccessTokenAuthentication, ThrottledTokenAuthentication)
NO_TOKEN = "Send your API key or access token as Authorization: Bearer <token> (docs/mcp.md)."


def server_build() -> FastMCP:
    """A FastMCP server with every registered tool (the tool modules register on import)."""
    server = FastMCP(
        "osmo", instructions=INSTRUCTIONS, streamable_http_path=PATH, stateless_http=True, json_response=True,
        # The SDK's DNS-rebinding guard is for servers without authentication: a page another site serves
        # cannot send the bearer token (the browser would need CORS, which /mcp does not answer), and Host
        # is checked against ALLOWED_HOSTS by BearerAuthentication as Django checks it.
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    modules = [module.__name__ for module in tools.MODULES]  # the listing's order: by area, then as registered
    for spec in sorted(TOOLS.values(), key=lambda spec: modules.index(spec.function.__module__)):
        server.add_tool(tool_adapter(spec), name=spec.name, title=spec.title,
                        description=(spec.function.__doc__ or "").strip(), annotations=spec.annotations,
                        structured_output=False)
    return server


def _authenticate(scope: dict[str, Any]) -> tuple[Any, int, dict[str, Any], dict[str, str]]:
    """``(user, status, body, headers)``: the user of the request's bearer token, or a refusal in the API's
    envelope. Runs in a worker thread (the ORM and the throttles' cache are synchronous)."""
    request = ASGIRequest(scope, io.BytesIO())
    close_old_connections()
    try:
        request.get_host()  # DisallowedHost (400) unless the Host is one of ALLOWED_HOSTS
        found = None
        # (the setting holds the imported classes; the stubs type it as the dotted paths it is written with)
        for authentication in cast(list[type[BaseAuthentication]], api_settings.DEFAULT_AUTHENTICATION_CLASSES):
            if issubclass(authentication, BEARER_CLASSES):
                found = authentication().authenticate(request)
                if found is not None:
                    break
        if found is None:
            raise NotAuthenticated(NO_TOKEN)
        request.user = found[0]
        throttle = UserRateThrottle()
        if not throttle.allow_request(request, None):
            raise Throttled(wait=throttle.wait())
        return found[0], 200, {}, {}
    except Exception as exc:  # the API's refusals; anything else propagates (uvicorn logs it, answers 500)
        response = osmo_exception_handler(exc, {})
        if response is None:
            raise
        headers = {name: value for name, value in response.items() if name.lower() == "retry-after"}
        if response.status_code == 401:
            headers["WWW-Authenticate"] = WWW_AUTHENTICATE
        return None, response.status_code, dict(response.data), headers
    finally:
        close_old_connections()


class BearerAuthentication:
    """ASGI middleware: the request goes on to ``app`` with ``scope["user"]`` set (the tools read it
    through the SDK's request context), or is answered here with the refusal."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        user, status, body, headers = await sync_to_async(_authenticate, thread_sensitive=False)(scope)
        if user is None:
            payload = json.dumps(body).encode()
            await send({"type": "http.response.start", "status": status, "headers": [
                (b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode()),
                *((name.lower().encode(), value.encode()) for name, value in headers.items())]})
            await send({"type": "http.response.body", "body": payload})
            return
        await self.app({**scope, "user": user}, receive, send)


class McpRouter:
    """The HTTP side of ``osmo.asgi``: ``/mcp`` (and below it) to the MCP application behind
    :class:`BearerAuthentication`, every other path to ``django_application``."""

    def __init__(self, django_application: Any, mcp_application: Any) -> None:
        self.django_application = django_application
        self.mcp_application = BearerAuthentication(mcp_application)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        path = scope.get("path", "")
        if path == PATH or path.startswith(PATH + "/"):
            await self.mcp_application(scope, receive, send)
        else:
            await self.django_application(scope, receive, send)
