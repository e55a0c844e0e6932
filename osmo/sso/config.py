"""The single sign-on settings, read at call time (tests and admins change them without a restart
of anything but the process)."""

from __future__ import annotations

from osmo import config as osmo_config


def enabled() -> bool:
    return bool(osmo_config.sso().issuer)


def audiences() -> list[str]:
    """The ``aud`` values an API access token may carry: the configured list, else the client ids."""
    configured = [value for value in osmo_config.sso().audience if value]
    if configured:
        return configured
    return [value for value in (osmo_config.sso().client_id, osmo_config.sso().cli_client_id) if value]


def username_from(claims: dict) -> str | None:
    """The local username of the provider's user: the configured claim, else ``sub``."""
    value = claims.get(osmo_config.sso().username_claim) or claims.get("sub")
    return str(value)[:150] if value else None
