"""The MCP tools, one module per area; importing this package registers them all
(:func:`mcp_server.registry.tool`). A new area is a new module listed here."""

from mcp_server.tools import apps, credentials, pools, profile, workflows

MODULES = (profile, pools, workflows, apps, credentials)
