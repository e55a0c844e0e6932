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


def test_a_deactivated_users_token_is_refused_and_the_request_knows_its_token(api_client, user):
    # given: a token, then its user deactivated
    token = Token.objects.create(user=user)
    api_client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    assert api_client.get("/api/me/").json()["username"] == user.username
    user.is_active = False
    user.save(update_fields=["is_active"])
    # when
    response = api_client.get("/api/me/")
    # then: DRF's answer and words
    assert response.status_code == 401
    assert response.json()["message"] == "User inactive or deleted."


def test_token_authentication_answers_with_the_user_and_the_token_as_stored(user):
    from rest_framework.test import APIRequestFactory

    from osmo.api.authentication import ThrottledTokenAuthentication

    token = Token.objects.create(user=user)
    request = APIRequestFactory().get("/api/me/", HTTP_AUTHORIZATION=f"Token {token.key}")
    found_user, found_token = ThrottledTokenAuthentication().authenticate(request)
    assert (found_user.pk, found_user.username, found_user.is_staff) == (user.pk, user.username, user.is_staff)
    assert (found_token.key, found_token.user_id, found_token.created) == (token.key, user.pk, token.created)
