import pytest
from django.core.management import call_command
from rest_framework.authtoken.models import Token

pytestmark = pytest.mark.django_db


def test_anonymous_write_gets_401_envelope(api_client):
    # when
    response = api_client.post("/api/workflows/", {"pool": "demo", "spec": "workflow: {}"}, format="json")
    # then
    assert response.status_code == 401
    assert response.json() == {
        "code": "not_authenticated",
        "message": "Authentication credentials were not provided.",
        "details": {},
    }


def test_anonymous_read_gets_401(api_client):
    response = api_client.get("/api/pools/")
    assert response.status_code == 401
    assert response.json()["code"] == "not_authenticated"


def test_bad_token_gets_401(api_client):
    api_client.credentials(HTTP_AUTHORIZATION="Token not-a-real-token")
    response = api_client.get("/api/pools/")
    assert response.status_code == 401
    assert response.json()["code"] == "authentication_failed"


def test_token_from_management_command_authenticates(api_client, user):
    # given a token handed out by the documented command
    call_command("drf_create_token", user.username, verbosity=0)
    token = Token.objects.get(user=user)
    # when
    api_client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    response = api_client.get("/api/pools/")
    # then
    assert response.status_code == 200


def test_pages_redirect_anonymous_to_login(client):
    response = client.get("/")
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")
    assert client.get("/accounts/login/").status_code == 200


def test_bearer_keyword_takes_the_same_token(api_client, user):
    """kubectl habits: `Authorization: Bearer <key>` works like `Token <key>`; a wrong one is 401."""
    # given
    token = Token.objects.create(user=user)
    # when
    api_client.credentials(HTTP_AUTHORIZATION=f"Bearer {token.key}")
    accepted = api_client.get("/api/me/")
    api_client.credentials(HTTP_AUTHORIZATION="bearer not-a-real-token")
    refused = api_client.get("/api/me/")
    # then
    assert (accepted.status_code, accepted.json()) == (200, {"username": "alice", "is_staff": False})
    assert (refused.status_code, refused.json()["code"]) == (401, "authentication_failed")
