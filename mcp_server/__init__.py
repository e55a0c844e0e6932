"""The MCP endpoint (``/mcp``): the Model Context Protocol's streamable HTTP transport, served with the
official SDK, so that AI assistants can use the service with the user's own token (docs/mcp.md).

- :mod:`mcp_server.registry`: a tool is one plain function of the user and its arguments, registered
  with :func:`mcp_server.registry.tool`; the registry runs it in a worker thread with its own database
  connection handling and turns the API's errors into tool errors with the API's envelope.
- :mod:`mcp_server.tools`: the tools, one module per area (profile, pools, workflows, credentials).
- :mod:`mcp_server.server`: the SDK's server with every registered tool, and the ASGI application
  (bearer authentication in front of the SDK's transport) that ``osmo.asgi`` routes ``/mcp`` to.
"""
