"""The single sign-on settings, read at call time (tests and admins change them without a restart
of anything but the process)."""

from __future__ import annotations

from django.conf import settings


def enabled() -> bool:
    return bool(settings.OSMO_OIDC_ISSUER)


def audiences() -> list[str]:
    """The ``aud`` values an API access token may carry: the configured list, else the client ids."""
    configured = [value for value in settings.OSMO_OIDC_AUDIENCE if value]
    if configured:
        return configured
    return [value for value in (settings.OIDC_RP_CLIENT_ID, settings.OSMO_OIDC_CLI_CLIENT_ID) if value]


def username_from(claims: dict) -> str | None:
    """The local username of the provider's user: the configured claim, else ``sub``."""
    value = claims.get(settings.OSMO_OIDC_USERNAME_CLAIM) or claims.get("sub")
    return str(value)[:150] if value else None
