"""``osmo login --device``: the OAuth 2.0 device authorization grant (RFC 8628) against the
organisation's identity provider, and refreshing its access token when it expires.

The service says where the provider is (``GET /api/auth/sso/``). The CLI asks the provider for a
device code, prints the address and the user code to open in any browser, and polls the token
endpoint (every ``interval`` seconds, slower on ``slow_down``) until the user approved or denied
it, or the code expired. The access token (a JWT the service checks) and the refresh token are
saved with the server in the config file (mode 0600); an access token about to expire is refreshed
before a command uses it."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx

from cli.errors import EXIT_USAGE, CliError, NotLoggedInError

DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"
TIMEOUT = httpx.Timeout(30.0, connect=5.0)
# An access token with less than this left is refreshed before use.
REFRESH_MARGIN_SECONDS = 30


def sso_discover(url: str) -> dict[str, Any]:
    try:
        response = httpx.get(f"{url}/api/auth/sso/", timeout=TIMEOUT)
    except httpx.HTTPError as exc:
        raise CliError(f"cannot reach {url}: {exc}") from exc
    data: dict[str, Any] = response.json() if response.status_code == 200 else {}
    if not data.get("enabled"):
        raise CliError(f"{url} has no single sign-on configured", exit_code=EXIT_USAGE,
                       hint="Log in with an API token instead: osmo login URL --token.")
    if not data.get("device_authorization_endpoint"):
        raise CliError(f"{url} has single sign-on without the device flow", exit_code=EXIT_USAGE,
                       hint="Ask the administrator to set OSMO_OIDC_DEVICE_AUTHORIZATION_ENDPOINT, or use --token.")
    return data


def _post(endpoint: str, data: dict[str, str]) -> httpx.Response:
    try:
        return httpx.post(endpoint, data=data, timeout=TIMEOUT, headers={"Accept": "application/json"})
    except httpx.HTTPError as exc:
        raise CliError(f"cannot reach the identity provider at {endpoint}: {exc}") from exc


def _saved(sso: dict[str, Any], tokens: dict[str, Any]) -> dict[str, str]:
    """What the config file keeps of a token response."""
    saved = {
        "token": str(tokens["access_token"]),
        "token_endpoint": str(sso["token_endpoint"]),
        "client_id": str(sso["client_id"]),
        "expires_at": str(int(time.time() + float(tokens.get("expires_in", 300)))),
    }
    if tokens.get("refresh_token"):
        saved["refresh_token"] = str(tokens["refresh_token"])
    return saved


def device_login(url: str, *, echo: Callable[[str], None],
                 sleep: Callable[[float], None] = time.sleep) -> dict[str, str]:
    """Run the device flow; the config entries to save (token, refresh token, where to refresh)."""
    sso = sso_discover(url)
    response = _post(sso["device_authorization_endpoint"], {"client_id": sso["client_id"], "scope": sso["scope"]})
    if response.status_code != 200:
        raise CliError(f"the identity provider refused the device login ({response.status_code}): {response.text}")
    grant = response.json()
    echo(f"To sign in, open {grant['verification_uri']} in a browser and enter the code: {grant['user_code']}")
    if grant.get("verification_uri_complete"):
        echo(f"(or open {grant['verification_uri_complete']})")
    echo("Waiting for you to approve it ...")
    interval = float(grant.get("interval") or 5)
    deadline = time.monotonic() + float(grant.get("expires_in") or 600)
    while time.monotonic() < deadline:
        sleep(interval)
        answer = _post(sso["token_endpoint"], {"grant_type": DEVICE_GRANT, "device_code": grant["device_code"],
                                                "client_id": sso["client_id"]})
        if answer.status_code == 200:
            return _saved(sso, answer.json())
        error = answer.json().get("error") if answer.headers.get("content-type", "").startswith("application/json") \
            else None
        if error == "authorization_pending":
            continue
        if error == "slow_down":
            interval += 5
            continue
        if error == "access_denied":
            raise CliError("the sign-in was denied in the browser")
        if error == "expired_token":
            break
        raise CliError(f"the identity provider answered {answer.status_code}: {answer.text}")
    raise CliError("the code expired before it was approved", hint="Run osmo login --device again.")


def refreshed(stored: dict[str, str]) -> dict[str, str] | None:
    """New token entries when the saved access token is (about to be) expired and a refresh token is
    saved; None when nothing needs doing."""
    if not stored.get("refresh_token") or not stored.get("token_endpoint"):
        return None
    if float(stored.get("expires_at") or 0) - REFRESH_MARGIN_SECONDS > time.time():
        return None
    answer = _post(stored["token_endpoint"], {"grant_type": "refresh_token", "refresh_token": stored["refresh_token"],
                                              "client_id": stored.get("client_id", "")})
    if answer.status_code != 200:
        raise NotLoggedInError("your single sign-on session has ended (the refresh token was refused); "
                               "run osmo login --device again")
    tokens = answer.json()
    saved = _saved({"token_endpoint": stored["token_endpoint"], "client_id": stored.get("client_id", "")}, tokens)
    if "refresh_token" not in saved:
        saved["refresh_token"] = stored["refresh_token"]
    return saved
