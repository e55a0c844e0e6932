"""The API with the real provider's signed access tokens (docs/design.md §12): accepted ones map the
user and their teams; expired, unsigned, alg none, another audience or issuer get 401 in the envelope."""

from __future__ import annotations

import time

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from django.contrib.auth.models import Group, User

from scheduler.models import PoolGrant
from tests.factories import make_pool

pytestmark = pytest.mark.django_db


@pytest.fixture
def pools():
    """``granted`` (to the team gpu-team only) and ``open`` (no grants: everyone's)."""
    team = Group.objects.create(name="gpu-team")
    granted = make_pool("granted")
    PoolGrant.objects.create(pool=granted, team=team)
    make_pool("open")
    return team


def _bearer(token: str) -> dict:
    return {"HTTP_AUTHORIZATION": f"Bearer {token}"}


def _pool_names(client, token: str) -> list[str]:
    response = client.get("/api/pools/", **_bearer(token))
    assert response.status_code == 200, response.content
    return sorted(pool["name"] for pool in response.json()["results"])


def test_provider_token_signs_the_user_in_and_their_groups_become_teams(client, sso, pools):
    # given
    token = sso.token("alice", "alice-sso-password")["access_token"]

    # when
    me = client.get("/api/me/", **_bearer(token))

    # then: the user exists locally, without a password, in the existing team the claim names
    assert me.status_code == 200
    assert me.json()["username"] == "alice"
    alice = User.objects.get(username="alice")
    assert alice.email == "alice@example.com"
    assert alice.has_usable_password() is False
    assert list(alice.groups.values_list("name", flat=True)) == ["gpu-team"]
    # and the provider's group with no team creates none
    assert sorted(Group.objects.values_list("name", flat=True)) == ["gpu-team"]
    assert "Warning" not in me
    # and the team's pool grant follows
    assert _pool_names(client, token) == ["granted", "open"]


def test_groups_claim_missing_means_no_team_no_granted_pool_and_a_clear_message(client, sso, pools):
    # given: carol is in gpu-team locally, but the provider lists no groups for her
    carol = User.objects.create(username="carol")
    carol.set_unusable_password()
    carol.save()
    carol.groups.add(pools)
    token = sso.token("carol", "carol-sso-password")["access_token"]
    assert "groups" not in jwt.decode(token, options={"verify_signature": False})

    # when
    response = client.get("/api/pools/", **_bearer(token))

    # then
    assert response.status_code == 200
    assert [pool["name"] for pool in response.json()["results"]] == ["open"]
    assert list(carol.groups.all()) == []
    assert response["Warning"] == (
        "299 osmo \"The identity provider sent no 'groups' claim, so you are in no team: pools granted to teams "
        "are closed to you. Ask your administrator to release the 'groups' claim to this service.\"")
    refused = client.get("/api/pools/granted/", **_bearer(token))
    assert refused.status_code in (403, 404)


def _now() -> int:
    return int(time.time())


def _claims(sso, **changes) -> dict:
    claims = {"iss": sso.issuer, "aud": "osmo-tests", "sub": "1", "preferred_username": "mallory",
              "iat": _now(), "exp": _now() + 300, "groups": ["gpu-team"]}
    claims.update(changes)
    return claims


def _other_key() -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


REFUSED = {
    "expired": (lambda sso: sso.forge(_claims(sso, iat=_now() - 7200, exp=_now() - 3600)),
                "Access token refused: it has expired."),
    "another issuer": (lambda sso: sso.forge(_claims(sso, iss="https://idp.example.com/realms/other")),
                       "Access token refused: it was issued by another issuer (accepted: {issuer})."),
    "alg none": (lambda sso: jwt.encode(_claims(sso), None, algorithm="none"),
                 "Access token refused: its algorithm 'none' is not accepted (signed tokens only: RS256, RS384, "
                 "RS512, PS256, PS384, PS512, ES256, ES384, ES512)."),
    "unsigned (signature cut off)": (lambda sso: sso.forge(_claims(sso)).rsplit(".", 1)[0] + ".",
                                     "Access token refused: its signature does not verify."),
    "HS256 (a shared secret)": (
        lambda sso: jwt.encode(_claims(sso), "a-secret-shared-by-nobody-0123456789", algorithm="HS256"),
        "Access token refused: its algorithm 'HS256' is not accepted (signed tokens only: RS256, RS384, "
        "RS512, PS256, PS384, PS512, ES256, ES384, ES512)."),
    "signed by another key with the provider's kid": (
        lambda sso: sso.forge(_claims(sso), key=_other_key()), "Access token refused: its signature does not verify."),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_refused_tokens_get_401_in_the_envelope_and_create_nobody(client, sso, pools, case):
    # given
    make, message = REFUSED[case]
    token = make(sso)

    # when
    response = client.get("/api/me/", **_bearer(token))

    # then
    assert response.status_code == 401
    assert response.json() == {"code": "authentication_failed", "message": message.format(issuer=sso.issuer),
                               "details": {}}
    assert response["WWW-Authenticate"] == 'Bearer realm="api"'
    assert not User.objects.filter(username="mallory").exists()


def test_a_real_token_of_another_audience_is_refused(client, sso, pools):
    # given: the provider's token for another service
    token = sso.token("alice", "alice-sso-password", client="other-app")["access_token"]

    # when
    response = client.get("/api/me/", **_bearer(token))

    # then
    assert response.status_code == 401
    assert response.json()["message"] == (
        "Access token refused: it is for another audience (accepted: osmo-web, osmo-cli, osmo-tests).")
    assert not User.objects.filter(username="alice").exists()


def test_validated_tokens_keep_working_while_the_provider_is_down(client, sso, pools, request):
    # given: a token used once (the JWKS is fetched and cached)
    token = sso.token("alice", "alice-sso-password")["access_token"]
    assert client.get("/api/me/", **_bearer(token)).status_code == 200

    # when: the provider goes down
    request.getfixturevalue("stopped_provider")
    response = client.get("/api/me/", **_bearer(token))

    # then
    assert response.status_code == 200
    assert response.json()["username"] == "alice"
    # and an expired one is still refused
    expired = sso.forge(_claims(sso, preferred_username="alice", iat=_now() - 7200, exp=_now() - 3600))
    assert client.get("/api/me/", **_bearer(expired)).status_code == 401


def test_provider_down_and_no_keys_cached_is_503_not_401(client, sso, pools, request):
    # given: a well-formed token, and a provider that is down before any key was fetched
    token = sso.forge(_claims(sso))
    request.getfixturevalue("stopped_provider")

    # when
    response = client.get("/api/me/", **_bearer(token))

    # then
    assert response.status_code == 503
    assert response.json()["code"] == "identity_provider_unavailable"
    assert not User.objects.filter(username="mallory").exists()


def test_local_tokens_keep_working_with_single_sign_on_on(client, sso, user):
    # given
    from tests.factories import make_api_key

    key = make_api_key(user)

    # then
    assert client.get("/api/me/", **_bearer(key)).json()["username"] == "alice"
    assert client.get("/api/me/", HTTP_AUTHORIZATION=f"Token {key}").status_code == 200


def test_provider_tokens_are_refused_while_single_sign_on_is_off(client, provider, settings):
    # given: a real token, single sign-on not configured
    settings.OSMO_OIDC_ISSUER = ""
    token = provider.token("alice", "alice-sso-password")["access_token"]

    # when
    response = client.get("/api/me/", **_bearer(token))

    # then: the local token authentication answers, as before
    assert response.status_code == 401
    assert response.json()["message"] == "Invalid token."
    assert not User.objects.filter(username="alice").exists()


def test_a_provider_username_that_is_a_local_account_is_not_taken_over(client, sso, django_user_model):
    # given: a local alice with a password
    django_user_model.objects.create_user(username="alice", password="local-password")
    token = sso.token("alice", "alice-sso-password")["access_token"]

    # when
    response = client.get("/api/me/", **_bearer(token))

    # then
    assert response.status_code == 401
    assert response.json()["message"] == "Access token refused: the username 'alice' belongs to a local account."


def test_sso_discovery_for_the_cli(client, sso, settings):
    # when
    on = client.get("/api/auth/sso/").json()
    settings.OSMO_OIDC_ISSUER = ""
    off = client.get("/api/auth/sso/").json()

    # then
    assert on == {"enabled": True, "issuer": sso.issuer, "client_id": "osmo-cli",
                  "device_authorization_endpoint": f"{sso.issuer}/device-authorization/",
                  "token_endpoint": f"{sso.issuer}/token/", "scope": "openid profile email groups"}
    assert off == {"enabled": False}


def test_sso_discovery_refuses_other_methods_in_the_envelope(client, sso):
    # when
    response = client.post("/api/auth/sso/", {})

    # then
    assert response.status_code == 405
    assert response.json()["code"] == "method_not_allowed"
