"""Browser sessions of single sign-on, through Django's test client (a new client builds its
middleware with the settings of the test): silent renewal when the ID token expired, the failed
sign-in message, local sessions untouched."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest

pytestmark = pytest.mark.django_db


def _session_from_provider(client, user, *, expires_at: float) -> None:
    client.force_login(user, backend="osmo.sso.backend.OIDCBackend")
    session = client.session
    session["oidc_id_token_expiration"] = expires_at
    session.save()


def test_expired_sso_session_is_renewed_silently_at_the_provider(client, sso, user):
    # given: a session signed in through the provider whose ID token has expired
    _session_from_provider(client, user, expires_at=0)

    # when
    response = client.get("/workflows/")

    # then: off to the provider without a prompt, back to this service's callback
    assert response.status_code == 302
    location = urlsplit(response["Location"])
    assert f"{location.scheme}://{location.netloc}{location.path}" == f"{sso.issuer}/authorize/"
    query = parse_qs(location.query)
    assert query["prompt"] == ["none"]
    assert query["client_id"] == ["osmo-web"]
    assert query["redirect_uri"] == ["http://testserver/oidc/callback/"]


def test_fresh_sso_session_and_local_sessions_are_not_sent_to_the_provider(client, sso, user, other_user):
    # given
    _session_from_provider(client, user, expires_at=9_999_999_999)

    # then
    assert client.get("/workflows/").status_code == 200
    client.force_login(other_user, backend="django.contrib.auth.backends.ModelBackend")
    assert client.get("/workflows/").status_code == 200


def test_failed_sign_in_is_said_on_the_login_page(client, sso):
    # when
    page = client.get("/accounts/login/?sso=failed").content.decode()

    # then
    assert 'id="sso-failed"' in page
    assert "Sign-in through single sign-on did not complete." in page
    assert 'id="sso-login"' in page
