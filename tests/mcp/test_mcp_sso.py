"""``/mcp`` with single sign-on configured: the identity provider's access token (what ``osmo login --device``
keeps) works as a bearer token, as on the API; a forged one is refused before any tool runs (docs/mcp.md)."""

from __future__ import annotations

import time

import httpx
import pytest

from tests.mcp.test_mcp import _content, session_run
from tests.sso.conftest import provider  # noqa: F401  (the fixture: a real OpenID Connect provider)

pytestmark = pytest.mark.django_db(transaction=True)


def _sso_env(provider) -> dict[str, str]:  # noqa: F811
    """The server's single sign-on settings, pointing at the test provider (as tests/sso/conftest.py's sso)."""
    return {"OSMO_OIDC_ISSUER": provider.issuer, "OSMO_OIDC_CLIENT_ID": "osmo-web",
            "OSMO_OIDC_CLIENT_SECRET": "osmo-web-secret",
            "OSMO_OIDC_AUTHORIZATION_ENDPOINT": f"{provider.issuer}/authorize/",
            "OSMO_OIDC_TOKEN_ENDPOINT": f"{provider.issuer}/token/",
            "OSMO_OIDC_USERINFO_ENDPOINT": f"{provider.issuer}/userinfo/",
            "OSMO_OIDC_JWKS_ENDPOINT": f"{provider.issuer}/.well-known/jwks.json",
            "OSMO_OIDC_AUDIENCE": "osmo-web,osmo-cli,osmo-tests"}


def test_the_provider_s_access_token_acts_as_its_user_and_a_forged_one_gets_401(provider, asgi_server):  # noqa: F811
    # given a server with single sign-on, and a token the provider issued to alice
    server = asgi_server(env=_sso_env(provider))
    token = provider.token("alice", "alice-sso-password")["access_token"]
    forged = provider.forge({"iss": provider.issuer, "aud": "osmo-tests", "sub": "x", "preferred_username": "alice",
                             "exp": int(time.time()) - 60, "iat": int(time.time()) - 120})

    # when the SDK's client calls the profile tool with it, and a plain POST sends the expired one
    profile = session_run(server.url, token, lambda session: session.call_tool("osmo_get_profile", {}))
    refused = httpx.post(f"{server.url}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                         headers={"Authorization": f"Bearer {forged}",
                                  "Accept": "application/json, text/event-stream"})

    # then the tool acted as the provider's user; the expired token is the API's 401, saying why
    assert _content(profile)["username"] == "alice"
    assert (refused.status_code, refused.json()["code"]) == (401, "authentication_failed")
    assert "expired" in refused.json()["message"]
