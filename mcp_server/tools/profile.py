"""Health and profile: who the token belongs to, and what it may use."""

from __future__ import annotations

from typing import Any

from mcp_server.registry import tool
from ops.health import database_check
from osmo.types import User
from scheduler.selectors import pool_names


@tool("osmo_health", title="Check the connection")
def health(user: User) -> dict[str, Any]:
    """Check that the service answers and that your token works: the service's status, the database's, and
    the user the calls act as. Call it first after connecting."""
    database = database_check()
    return {"status": "ok" if database["ok"] else "degraded", "user": user.get_username(),
            "database": "ok" if database["ok"] else "unavailable"}


@tool("osmo_get_profile", title="Your profile")
def profile(user: User) -> dict[str, Any]:
    """Your profile: username, whether you are staff, your teams, and the pools you may see and submit to
    (what `osmo profile list` and `osmo pool list` show)."""
    return {"username": user.get_username(), "is_staff": user.is_staff,
            "teams": sorted(user.groups.values_list("name", flat=True)), "pools": pool_names(user=user)}
