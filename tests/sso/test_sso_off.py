"""With single sign-on off (no OSMO_OIDC_ISSUER, the default), the /oidc/ endpoints are not there
(docs/deploy.md, "Single sign-on"): 404 like any unknown page, and nothing is stored."""

from __future__ import annotations

import pytest
from django.contrib.sessions.models import Session
from django.test import Client

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(("method", "path"), [
    pytest.param("get", "/oidc/authenticate/", id="_case_authenticate"),
    pytest.param("get", "/oidc/callback/?code=x&state=y", id="_case_callback"),
    pytest.param("post", "/oidc/logout/", id="_case_logout"),
])
def test_the_oidc_endpoints_are_404_and_store_nothing_with_sso_off(settings, method, path):
    """docs/deploy.md "Single sign-on": with it off, an anonymous GET /oidc/authenticate/ redirected to
    itself (the provider's address is empty) and stored a new session row each time: 20 requests, 20 rows."""
    # given single sign-on off and no session yet
    settings.OSMO_OIDC_ISSUER = ""
    client = Client()

    # when an anonymous client asks 20 times
    responses = [getattr(client, method)(path) for _ in range(20)]

    # then each is Django's 404 page, without a redirect or a session cookie, and no session row was stored
    assert {(response.status_code, response.get("Location")) for response in responses} == {(404, None)}
    assert all(settings.SESSION_COOKIE_NAME not in response.cookies for response in responses)
    assert Session.objects.count() == 0


def test_with_sso_on_authenticate_still_sends_the_browser_to_the_provider(settings):
    # given single sign-on configured (the provider is not asked before the browser goes there)
    settings.OSMO_OIDC_ISSUER = "https://idp.example"
    settings.OIDC_RP_CLIENT_ID = "osmo"
    settings.OIDC_OP_AUTHORIZATION_ENDPOINT = "https://idp.example/authorize"

    # when
    response = Client().get("/oidc/authenticate/")

    # then the browser is sent to the provider, with the flow's state kept in its session
    assert response.status_code == 302
    assert response["Location"].startswith("https://idp.example/authorize?")
    assert Session.objects.count() == 1
