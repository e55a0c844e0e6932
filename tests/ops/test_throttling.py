"""Throttling of API token attempts and requests (DRF throttles) and the login lockout (django-axes).

Each test uses its own client address, so the counters (in Redis, shared by the whole run) of one
test never reach another."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.conf import settings
from django.test import override_settings

from credentials.models import ApiKey
from osmo.api.authentication import ThrottledTokenAuthentication
from tests.factories import make_api_key

pytestmark = pytest.mark.django_db


def rates(**overrides: str):
    return override_settings(REST_FRAMEWORK={
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {**settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], **overrides},
    })


def test_wrong_tokens_are_throttled_per_client_address(api_client, user):
    """Replays the fault run's finding: wrong credentials could be tried without limit."""
    # given at most 5 failed token attempts per minute from one address
    token = make_api_key(user)
    wrong = {"HTTP_AUTHORIZATION": "Token 0000000000000000000000000000000000000000", "REMOTE_ADDR": "10.77.0.1"}
    with rates(auth_failure="5/min"):
        # when an address tries 6 wrong tokens, then the right one
        failures = [api_client.get("/api/pools/", **wrong) for _ in range(6)]
        right = api_client.get("/api/pools/", HTTP_AUTHORIZATION=f"Token {token}", REMOTE_ADDR="10.77.0.1")
        elsewhere = api_client.get("/api/pools/", HTTP_AUTHORIZATION=f"Token {token}", REMOTE_ADDR="10.77.0.2")
    # then the first 5 are refused as wrong, and everything after from that address is throttled
    assert [r.status_code for r in failures] == [401] * 5 + [429]
    assert failures[0].json()["code"] == "authentication_failed"
    body = failures[5].json()
    assert (body["code"], body["details"]) == ("throttled", {})
    assert body["message"].startswith("Request was throttled. Expected available in ")
    assert 1 <= int(failures[5]["Retry-After"]) <= 60
    assert right.status_code == 429
    # while another address is not affected
    assert elsewhere.status_code == 200


def test_forwarded_for_headers_do_not_dodge_the_throttle(api_client):
    # given no trusted proxy in front (the default), so X-Forwarded-For is the client's own claim
    wrong = {"HTTP_AUTHORIZATION": "Token 0000000000000000000000000000000000000000", "REMOTE_ADDR": "10.77.1.1"}
    with rates(auth_failure="2/min"):
        # when every attempt claims another address
        codes = [api_client.get("/api/pools/", HTTP_X_FORWARDED_FOR=f"192.0.2.{i}", **wrong).status_code
                 for i in range(3)]
    # then they all count for the real peer address
    assert codes == [401, 401, 429]


def test_authenticated_requests_are_throttled_per_user(api_client, user):
    # given at most 3 requests per minute per user
    token = make_api_key(user)
    with rates(user="3/min"):
        # when
        codes = [api_client.get("/api/pools/", HTTP_AUTHORIZATION=f"Token {token}",
                                REMOTE_ADDR="10.77.2.1").status_code for _ in range(4)]
    # then
    assert codes == [200, 200, 200, 429]


def test_anonymous_requests_are_throttled_per_address(api_client):
    # given at most 2 anonymous requests per minute (the schema is public)
    with rates(anon="2/min"):
        # when
        codes = [api_client.get("/api/schema/", REMOTE_ADDR="10.77.3.1").status_code for _ in range(3)]
    # then
    assert codes == [200, 200, 429]


def _login(client, path: str, password: str, address: str, username: str = "alice"):
    return client.post(path, {"username": username, "password": password}, REMOTE_ADDR=address)


@pytest.mark.parametrize(("path", "username", "password"), [
    ("/accounts/login/", "alice", "alice-password"),
    ("/admin/login/", "root", "root-password"),
])
def test_login_is_locked_after_ten_wrong_passwords(client, user, staff_user, path, username, password):
    """Replays the fault run's finding: 100 wrong passwords in 28 s, no lockout."""
    # when one address sends 10 wrong passwords for the user, then the right one
    wrong = [_login(client, path, "nope", "10.77.4.1", username) for _ in range(10)]
    right = _login(client, path, password, "10.77.4.1", username)
    # then the form refused 9, the 10th locked the pair out, and the lockout stops even the right password
    assert [r.status_code for r in wrong] == [200] * 9 + [429]
    assert right.status_code == 429
    assert "Account locked: too many login attempts" in right.content.decode()
    attempt = AccessAttempt.objects.get(username=username)  # an attempt while locked out counts as a failure
    assert (attempt.ip_address, attempt.failures_since_start) == ("10.77.4.1", 11)
    # while the user, from their own address, still logs in
    assert _login(client, path, password, "10.77.4.2", username).status_code == 302


def test_the_lockout_ends_after_the_cool_off(client, user):
    # given a cool-off of one second, and alice locked out
    with override_settings(AXES_COOLOFF_TIME=timedelta(seconds=1)):
        for _ in range(10):
            _login(client, "/accounts/login/", "nope", "10.77.5.1")
        assert _login(client, "/accounts/login/", "alice-password", "10.77.5.1").status_code == 429
        # when the cool-off has passed
        time.sleep(1.2)
        response = _login(client, "/accounts/login/", "alice-password", "10.77.5.1")
    # then the right password works again
    assert response.status_code == 302


def test_a_lockout_spares_the_tokens_already_used_from_that_address(api_client, user, other_user):
    """Replays the attack run's finding: twenty bad tokens from one address locked that address's valid
    tokens out for a minute."""
    # given alice's token in use from an address, and bob's token never used from there
    alice = make_api_key(user)
    bob = make_api_key(other_user)
    address = "10.77.6.1"
    with rates(auth_failure="20/min"):
        first = api_client.get("/api/pools/", HTTP_AUTHORIZATION=f"Token {alice}", REMOTE_ADDR=address)
        # when twenty wrong tokens come from the same address
        wrong = [api_client.get("/api/pools/", HTTP_AUTHORIZATION=f"Token {i:040d}", REMOTE_ADDR=address)
                 for i in range(21)]
        again = api_client.get("/api/pools/", HTTP_AUTHORIZATION=f"Bearer {alice}", REMOTE_ADDR=address)
        new = api_client.get("/api/pools/", HTTP_AUTHORIZATION=f"Token {bob}", REMOTE_ADDR=address)
    # then the guesses are locked out, alice's token still works, a token new to the address waits
    assert first.status_code == 200
    assert [r.status_code for r in wrong] == [401] * 20 + [429]
    assert again.status_code == 200
    assert new.status_code == 429


def test_token_authentication_reads_token_and_user_in_one_query(api_client, user, django_assert_num_queries):
    # given a key
    key = make_api_key(user)
    stored = ApiKey.objects.get(user=user)
    # when it is checked
    with django_assert_num_queries(1):
        authenticated_user, authenticated_key = ThrottledTokenAuthentication().authenticate_credentials(key)
    # then the user and the key's row come from that one query
    assert (authenticated_user, authenticated_key) == (user, stored)
    assert (authenticated_key.digest, authenticated_key.created_at) == (stored.digest, stored.created_at)
    assert authenticated_key.user.username == "alice"
