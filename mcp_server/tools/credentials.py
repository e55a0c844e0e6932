"""Credentials: names, kinds and key names only. No tool reads, takes or returns a credential's values."""

from __future__ import annotations

from typing import Any

from credentials import services
from credentials.api import CredentialOutputSerializer
from credentials.models import Credential
from mcp_server.registry import tool
from osmo.types import User


@tool("osmo_list_credentials", title="Your credentials (names only)")
def credential_list(user: User) -> dict[str, Any]:
    """Your credentials, as `osmo credential list` shows them: name, kind (generic, registry, data), the
    names of the keys each holds, when created and updated. Never the values."""
    rows = Credential.objects.filter(owner=user).order_by("name")
    return {"credentials": CredentialOutputSerializer([services.describe(row) for row in rows], many=True).data}
