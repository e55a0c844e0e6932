import io
import re

import pytest
from django.core.management import call_command

from credentials.models import ApiKey
from tests.factories import make_api_key

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
    out = io.StringIO()
    call_command("drf_create_token", user.username, stdout=out)
    [key] = re.fullmatch(r"Generated token ([0-9a-f]{40}) for user alice\n", out.getvalue()).groups()
    # when
    api_client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
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
    token = make_api_key(user)
    # when
    api_client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    accepted = api_client.get("/api/me/")
    api_client.credentials(HTTP_AUTHORIZATION="bearer not-a-real-token")
    refused = api_client.get("/api/me/")
    # then
    assert (accepted.status_code, accepted.json()) == (200, {"username": "alice", "is_staff": False})
    assert (refused.status_code, refused.json()["code"]) == (401, "authentication_failed")


def test_a_deactivated_users_token_is_refused_and_the_request_knows_its_token(api_client, user):
    # given: a token, then its user deactivated
    token = make_api_key(user)
    api_client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
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

    key = make_api_key(user)
    stored = ApiKey.objects.get(user=user)
    request = APIRequestFactory().get("/api/me/", HTTP_AUTHORIZATION=f"Token {key}")
    found_user, found_key = ThrottledTokenAuthentication().authenticate(request)
    assert (found_user.pk, found_user.username, found_user.is_staff) == (user.pk, user.username, user.is_staff)
    assert (found_key.pk, found_key.digest, found_key.user_id, found_key.created_at) == (
        stored.pk, stored.digest, user.pk, stored.created_at)
