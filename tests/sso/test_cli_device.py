"""``osmo login --device`` (RFC 8628) as the installed console script, against the live service and
the real provider, the code approved in real Chromium at the provider; the token refreshes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth.models import Group

from scheduler.models import PoolGrant
from tests.factories import make_pool

pytestmark = pytest.mark.django_db(transaction=True)
OSMO_SCRIPT = Path(sys.executable).parent / "osmo"


@pytest.fixture
def cli_env(tmp_path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key not in ("OSMO_URL", "OSMO_TOKEN")}
    return {**env, "OSMO_CONFIG": str(tmp_path / "config.json")}


def _start_login(site: str, env: dict[str, str]) -> tuple[subprocess.Popen, str, str]:
    """``osmo login SITE --device`` running; the address and code it printed."""
    process = subprocess.Popen([str(OSMO_SCRIPT), "login", site, "--device"], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    assert process.stdout is not None
    line = process.stdout.readline()
    prefix = "To sign in, open "
    assert line.startswith(prefix), line
    address, code = line[len(prefix):].strip().split(" in a browser and enter the code: ")
    return process, address, code


def _approve(browser, address: str, code: str, action: str) -> None:
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(address)
        page.wait_for_selector("#provider-login")
        page.fill("#id_username", "alice")
        page.fill("#id_password", "alice-sso-password")
        page.click("#provider-login button[type=submit]")
        page.wait_for_selector("#id_user_code")
        page.fill("#id_user_code", code)
        page.click("form button[type=submit]")
        page.click(f"button[value={action}]")
        page.wait_for_load_state()
    finally:
        context.close()


def test_device_login_then_commands_use_and_refresh_the_token(browser, live_server, sso, cli_env):
    # given: a pool granted to the provider's gpu-team
    PoolGrant.objects.create(pool=make_pool("granted"), team=Group.objects.create(name="gpu-team"))
    site = live_server.url

    # when: logging in with the device flow, approved in the browser
    process, address, code = _start_login(site, cli_env)
    assert address == f"{sso.issuer}/device/"
    _approve(browser, address, code, "accept")
    output, _ = process.communicate(timeout=60)

    # then
    assert process.returncode == 0, output
    assert output.splitlines()[-2:] == [
        f"Logged in to {site} as alice: signed in; pools visible: granted.",
        f"Saved to {cli_env['OSMO_CONFIG']} (mode 0600).",
    ]
    saved = json.loads(Path(cli_env["OSMO_CONFIG"]).read_text())
    assert saved["token"].count(".") == 2
    assert saved["client_id"] == "osmo-cli"

    # when: the access token is about to expire and a command runs
    Path(cli_env["OSMO_CONFIG"]).write_text(json.dumps({**saved, "expires_at": "0"}))
    listing = subprocess.run([str(OSMO_SCRIPT), "pool", "list", "--json"], env=cli_env, capture_output=True,
                             text=True, timeout=60)

    # then: it was refreshed first (new access and refresh tokens saved) and the command worked
    assert listing.returncode == 0, listing.stderr
    assert [pool["name"] for pool in json.loads(listing.stdout)["results"]] == ["granted"]
    renewed = json.loads(Path(cli_env["OSMO_CONFIG"]).read_text())
    assert renewed["token"] != saved["token"]
    assert renewed["refresh_token"] != saved["refresh_token"]
    assert int(renewed["expires_at"]) > 0


def test_device_login_denied_in_the_browser_saves_nothing(browser, live_server, sso, cli_env):
    # when
    process, address, code = _start_login(live_server.url, cli_env)
    _approve(browser, address, code, "deny")
    output, _ = process.communicate(timeout=60)

    # then
    assert process.returncode == 1
    assert "the sign-in was denied in the browser" in output
    assert not Path(cli_env["OSMO_CONFIG"]).exists()


def test_device_login_without_single_sign_on_says_so(live_server, settings, cli_env):
    # given
    settings.OSMO_OIDC_ISSUER = ""

    # when
    result = subprocess.run([str(OSMO_SCRIPT), "login", live_server.url, "--device"], env=cli_env,
                            capture_output=True, text=True, timeout=60)

    # then
    assert result.returncode == 2
    assert f"{live_server.url} has no single sign-on configured" in result.stderr
    assert not Path(cli_env["OSMO_CONFIG"]).exists()


def test_refresh_refused_by_the_provider_asks_to_log_in_again(live_server, sso, cli_env):
    # given: a saved single sign-on login whose refresh token the provider does not know
    saved = {"url": live_server.url, "token": "a.b.c", "refresh_token": "unknown-refresh-token",
             "token_endpoint": f"{sso.issuer}/token/", "client_id": "osmo-cli", "expires_at": "0"}
    Path(cli_env["OSMO_CONFIG"]).write_text(json.dumps(saved))

    # when
    result = subprocess.run([str(OSMO_SCRIPT), "pool", "list"], env=cli_env, capture_output=True, text=True,
                            timeout=60)

    # then: told to log in again, the saved login left as it was
    assert result.returncode == 1
    assert "your single sign-on session has ended (the refresh token was refused); run osmo login --device again" \
        in result.stderr
    assert json.loads(Path(cli_env["OSMO_CONFIG"]).read_text()) == saved
