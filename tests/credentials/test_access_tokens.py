"""Personal access tokens (docs/api.md "Access tokens", OSMO's ``osmo token``): made, listed and deleted
over ``/api/tokens/``; a key works as an API token through the last day of its expiry date, is stored
only as its digest, and stops at once when deleted or when its user is deactivated."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from credentials import tokens
from credentials.models import AccessToken
from tests.factories import make_api_key

pytestmark = pytest.mark.django_db


def today() -> datetime:
    return timezone.now().astimezone(UTC)


def with_key(_api_client, key: str):
    """A client of its own sending ``key`` (``user_client`` is the ``api_client`` fixture, signed in)."""
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def test_a_made_token_works_its_key_is_shown_once_and_only_its_digest_is_kept(user_client, user, api_client):
    # when a token is made for a date ten days on, then listed
    last = (today() + timedelta(days=10)).date()
    made = user_client.post("/api/tokens/", {"name": "ci", "expires_at": last.isoformat(),
                                             "description": "nightly job"}, format="json")
    listed = user_client.get("/api/tokens/")

    # then the answer holds the key, the list does not, the database keeps its digest only
    assert made.status_code == 201, made.json()
    key = made.json()["token"]
    assert key.startswith("osmo_") and len(key) == len("osmo_") + 43
    assert made.json()["expires_at"] == (datetime(last.year, last.month, last.day, tzinfo=UTC)
                                         + timedelta(days=1)).isoformat().replace("+00:00", "Z")
    assert [(row["name"], row["description"], row["expired"]) for row in listed.json()["results"]] == [
        ("ci", "nightly job", False)]
    assert key not in json.dumps(listed.json())
    row = AccessToken.objects.get(user=user)
    assert key not in (row.digest, row.name, row.description) and row.digest == tokens.digest(key)

    # and the key authenticates as the user, with the Token or the Bearer keyword
    me = with_key(api_client, key).get("/api/me/")
    assert me.status_code == 200 and me.json()["username"] == user.username
    bearer = APIClient()
    bearer.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    assert bearer.get("/api/workflows/").status_code == 200


def test_the_default_expiry_is_31_days_and_expired_or_deleted_keys_are_401(user_client, user, api_client):
    # given a token with the default expiry
    made = user_client.post("/api/tokens/", {"name": "laptop"}, format="json")
    key = made.json()["token"]
    expiry = AccessToken.objects.get(name="laptop").expires_at
    assert expiry == datetime.combine((today() + timedelta(days=32)).date(), datetime.min.time(), tzinfo=UTC)

    # when it expires
    AccessToken.objects.filter(name="laptop").update(expires_at=timezone.now() - timedelta(seconds=1))
    expired = with_key(api_client, key).get("/api/me/")

    # then it is refused, saying so, and listed as expired
    assert expired.status_code == 401, expired.json()
    assert expired.json()["message"].startswith("The access token 'laptop' expired on ")
    assert user_client.get("/api/tokens/").json()["results"][0]["expired"] is True

    # when another is deleted, its key stops at once
    other = user_client.post("/api/tokens/", {"name": "other"}, format="json").json()["token"]
    assert with_key(api_client, other).get("/api/me/").status_code == 200
    assert user_client.delete("/api/tokens/other/").status_code == 204
    assert with_key(api_client, other).get("/api/me/").status_code == 401
    assert user_client.delete("/api/tokens/other/").status_code == 404


def test_a_deactivated_user_s_token_is_refused(user_client, user, api_client):
    key = user_client.post("/api/tokens/", {"name": "ci"}, format="json").json()["token"]
    type(user).objects.filter(pk=user.pk).update(is_active=False)
    assert with_key(api_client, key).get("/api/me/").status_code == 401


@pytest.mark.parametrize(("body", "path", "fragment"), [
    pytest.param({"name": "-bad"}, "name", "invalid", id="_case_bad_name"),
    pytest.param({}, "name", "", id="_case_no_name"),
    pytest.param({"name": "a", "expires_at": "2020-01-01"}, "expires_at", "in the past", id="_case_past"),
    pytest.param({"name": "a", "expires_at": "tomorrow"}, "expires_at", "is not a date", id="_case_not_a_date"),
    pytest.param({"name": "a", "expires_at": 20270101}, "expires_at", "must be a date", id="_case_a_number"),
    pytest.param({"name": "a", "expires_at": ""}, "expires_at", "is not a date", id="_case_empty"),
    pytest.param({"name": "a", "expires_at": None}, "expires_at", "must be a date", id="_case_null"),
    pytest.param({"name": "a", "description": None}, "description", "must be text", id="_case_null_text"),
    pytest.param({"name": "a", "description": "x" * 201}, "description", "at most 200", id="_case_long_text"),
])
def test_bad_input_is_a_400_naming_the_field_and_nothing_is_made(user_client, body, path, fragment):
    response = user_client.post("/api/tokens/", body, format="json")
    assert response.status_code == 400, response.json()
    assert [error["path"] for error in response.json()["details"]["errors"]] == [path]
    assert fragment in response.json()["details"]["errors"][0]["message"]
    assert AccessToken.objects.count() == 0


def test_expiry_at_most_the_longest_allowed_and_names_once_per_user(user_client, other_user, api_client, settings):
    # given a service that allows 30 days
    settings.OSMO_ACCESS_TOKEN_MAX_DAYS = 30
    too_far = (today() + timedelta(days=31)).date().isoformat()

    # then a later date is refused, the default becomes the longest allowed, and a taken name is a 409
    refused = user_client.post("/api/tokens/", {"name": "a", "expires_at": too_far}, format="json")
    assert refused.status_code == 400 and "at most 30 days ahead" in refused.json()["details"]["errors"][0]["message"]
    assert user_client.post("/api/tokens/", {"name": "a"}, format="json").status_code == 201
    assert AccessToken.objects.get(name="a").expires_at.date() == (today() + timedelta(days=31)).date()
    taken = user_client.post("/api/tokens/", {"name": "a"}, format="json")
    assert taken.status_code == 409 and taken.json()["details"]["errors"][0]["path"] == "name"
    # another user may use the name, and sees none of the first user's tokens
    other = APIClient()
    other.force_authenticate(other_user)
    assert other.get("/api/tokens/").json()["results"] == []
    assert other.post("/api/tokens/", {"name": "a"}, format="json").status_code == 201
    assert other.delete("/api/tokens/b/").status_code == 404


def test_at_most_the_limit_per_user(user_client, user, monkeypatch):
    monkeypatch.setattr(tokens, "MAX_PER_USER", 2)
    for name in ("a", "b"):
        assert user_client.post("/api/tokens/", {"name": name}, format="json").status_code == 201
    refused = user_client.post("/api/tokens/", {"name": "c"}, format="json")
    assert refused.status_code == 409, refused.json()
    assert refused.json()["code"] == "access_token_limit"
    assert "osmo token delete" in refused.json()["message"]


def test_a_wrong_key_of_the_token_form_counts_as_a_failed_guess(api_client, settings):
    # given an address's failed-token budget of 2 (osmo.api.throttling.AuthFailureThrottle)
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {
        **settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], "auth_failure": "2/min"}}
    from django.core.cache import cache

    cache.clear()

    # when three made-up access tokens are tried
    answers = [with_key(api_client, f"osmo_{'x' * 42}{n}").get("/api/me/").status_code for n in range(3)]

    # then the third is throttled like any wrong token
    assert answers == [401, 401, 429]


def test_the_admin_lists_tokens_without_keys_and_revokes_by_deleting(client, admin_user, user_client):
    # given a user's token
    key = user_client.post("/api/tokens/", {"name": "ci", "description": "nightly"}, format="json").json()["token"]
    token = AccessToken.objects.get(name="ci")
    client.force_login(admin_user)

    # when an admin looks, tries to add one, and deletes it
    listed = client.get("/admin/credentials/accesstoken/")
    add = client.get("/admin/credentials/accesstoken/add/")
    deleted = client.post(f"/admin/credentials/accesstoken/{token.pk}/delete/", {"post": "yes"})

    # then the list names it without its key or digest, nobody adds one there, and the key is dead
    assert listed.status_code == 200 and "ci" in listed.content.decode()
    assert key not in listed.content.decode() and token.digest not in listed.content.decode()
    assert add.status_code == 403
    assert deleted.status_code == 302 and not AccessToken.objects.exists()
    assert with_key(None, key).get("/api/me/").status_code == 401


def test_an_access_token_cannot_make_tokens_but_the_api_key_and_a_session_can(user_client, user, api_client):
    """docs/design.md §15: an access token could make further access tokens, so a leaked one renewed
    itself past its expiry; only the user's API key or a signed-in session makes them now."""
    # given an access token, the user's API key and a signed-in session
    token_key = user_client.post("/api/tokens/", {"name": "ci"}, format="json").json()["token"]
    api_key = make_api_key(user)
    session = APIClient()
    session.force_login(user)

    # when the access token asks for another token
    refused = with_key(api_client, token_key).post("/api/tokens/", {"name": "renewed"}, format="json")

    # then 403 in the envelope, and nothing was made
    assert refused.status_code == 403
    assert refused.json() == {
        "code": "permission_denied",
        "message": "An access token cannot make access tokens (a leaked one would renew itself): use your API key "
                   "or sign in.",
        "details": {}}
    assert list(AccessToken.objects.values_list("name", flat=True)) == ["ci"]
    # and it still works for the rest (listing included)
    assert with_key(api_client, token_key).get("/api/tokens/").status_code == 200
    # and the API key and the session make tokens
    by_key = with_key(api_client, api_key).post("/api/tokens/", {"name": "by-key"}, format="json")
    by_session = session.post("/api/tokens/", {"name": "by-session"}, format="json")
    assert (by_key.status_code, by_session.status_code) == (201, 201)
    assert sorted(AccessToken.objects.values_list("name", flat=True)) == ["by-key", "by-session", "ci"]
