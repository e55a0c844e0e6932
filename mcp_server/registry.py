"""The tools of the MCP endpoint, and how one runs.

A tool is one small function ``fn(user, *, argument: type = default, ...) -> dict`` over the same
selectors and services as the API's views, registered with :func:`tool`. Its typed keyword arguments
become the tool's input schema (the SDK reads the signature; ``Annotated[..., Field(description=...)]``
documents an argument), its docstring the tool's description. The function runs in a worker thread (the
ORM is synchronous), inside one transaction like an API request (``ATOMIC_REQUESTS``: a refusal leaves
nothing half-stored), with Django's connection handling of a request before and after it.

Its answer is the tool's structured content (made JSON with DRF's encoder, as the API renders it). An
exception becomes a tool error whose content is the API's error envelope plus the HTTP status the API
would have answered (``{"status": 403, "code": "pool_forbidden", "message": ..., "details": ...}``):
:func:`osmo.api.exception_handler.osmo_exception_handler` decides both, so a tool fails exactly as the
endpoint it mirrors.
"""

from __future__ import annotations

import inspect
import json
import logging
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from asgiref.sync import sync_to_async
from django.db import close_old_connections, transaction
from mcp.server.fastmcp import Context
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from rest_framework.utils.encoders import JSONEncoder

from osmo.api.exception_handler import envelope, osmo_exception_handler
from osmo.types import User

logger = logging.getLogger(__name__)

ToolFunction = Callable[..., dict[str, Any]]


@dataclass(frozen=True)
class ToolSpec:
    """One registered tool: its MCP name, title and annotations, and the function that answers it."""

    name: str
    title: str
    function: ToolFunction
    annotations: ToolAnnotations


#: Every registered tool by name, in registration order (the order ``tools/list`` answers them in).
TOOLS: dict[str, ToolSpec] = {}


def tool(name: str, *, title: str, read_only: bool = True, destructive: bool = False,
         idempotent: bool | None = None) -> Callable[[ToolFunction], ToolFunction]:
    """Register ``fn(user, **arguments)`` as the tool ``name``. ``read_only``, ``destructive`` and
    ``idempotent`` are the MCP annotations a client shows its user before a call (a read is idempotent
    unless said otherwise); every tool works on this service only (``openWorldHint`` false)."""

    def register(function: ToolFunction) -> ToolFunction:
        if name in TOOLS:
            raise ValueError(f"two MCP tools named {name!r}")
        TOOLS[name] = ToolSpec(name=name, title=title, function=function, annotations=ToolAnnotations(
            title=title, readOnlyHint=read_only, destructiveHint=destructive,
            idempotentHint=read_only if idempotent is None else idempotent, openWorldHint=False))
        return function

    return register


def jsonable(data: Any) -> Any:
    """``data`` as plain JSON values, rendered as the API renders them (dates as ISO text, decimals...)."""
    return json.loads(json.dumps(data, cls=JSONEncoder))


def _result(content: dict[str, Any], *, error: bool = False) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=json.dumps(content))],
                          structuredContent=content, isError=error)


def error_result(exc: Exception, *, tool_name: str) -> CallToolResult:
    """The tool error for ``exc``: the API's envelope and status, or a logged ``server_error`` (500)."""
    response = osmo_exception_handler(exc, {})
    if response is None:
        logger.exception("mcp.tool_failed", extra={"tool": tool_name}, exc_info=exc)
        return _result({"status": 500, **envelope("server_error", "The server failed; the error is logged.")},
                       error=True)
    return _result({"status": response.status_code, **jsonable(response.data)}, error=True)


def tool_run(spec: ToolSpec, user: User, arguments: dict[str, Any]) -> CallToolResult:
    """Run one tool call for ``user`` (in a worker thread): one transaction, the request's connection
    handling around it (Django's ``request_started``/``request_finished`` do the same for a request)."""
    close_old_connections()
    try:
        with transaction.atomic():
            content = spec.function(user, **arguments)
        result = _result(jsonable(content))
    except Exception as exc:  # every failure is answered as a tool error (unknown ones logged as 500s)
        result = error_result(exc, tool_name=spec.name)
    finally:
        close_old_connections()
    # who called what and how it ended (never the arguments: a spec may hold what its author pasted)
    status = (result.structuredContent or {}).get("status", 500) if result.isError else 200
    logger.info("mcp.tool_call", extra={"tool": spec.name, "user": user.get_username(), "status": status})
    return result


def tool_adapter(spec: ToolSpec) -> Callable[..., Any]:
    """The coroutine the SDK registers for ``spec``: the function's keyword arguments (their resolved
    type hints, for the input schema) and the SDK's ``Context``, through which it finds the user that
    :class:`mcp_server.server.BearerAuthentication` put on the HTTP request."""
    hints = typing.get_type_hints(spec.function, include_extras=True)
    parameters = [parameter.replace(kind=inspect.Parameter.KEYWORD_ONLY, annotation=hints[parameter.name])
                  for parameter in list(inspect.signature(spec.function).parameters.values())[1:]]

    async def call(ctx: Context, **arguments: Any) -> CallToolResult:
        request = ctx.request_context.request
        user = request.scope.get("user") if request is not None else None
        if user is None:  # BearerAuthentication lets no request through without one
            raise RuntimeError("an MCP tool call reached the server without an authenticated user")
        return await sync_to_async(tool_run, thread_sensitive=False)(spec, user, arguments)

    context = inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=Context)
    call.__signature__ = inspect.Signature([*parameters, context], return_annotation=CallToolResult)  # type: ignore[attr-defined]
    call.__annotations__ = {**{p.name: p.annotation for p in parameters}, "ctx": Context, "return": CallToolResult}
    call.__name__ = spec.name
    call.__doc__ = spec.function.__doc__
    return call
