"""Single sign-on while Redis (the cache) is down (docs/operations.md, "Failure answers": the cache
fails open): the provider's keys and state are fetched again instead of read from the cache, never a 500."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.test import override_settings

from tests.ops.conftest import RedisProcess

pytestmark = pytest.mark.django_db


@pytest.fixture
def redis_cache(tmp_path):
    """The cache on a redis-server of this test, which the test stops."""
    server = RedisProcess(tmp_path)
    server.start()
    caches = {"default": {**settings.CACHES["default"], "BACKEND": "django.core.cache.backends.redis.RedisCache",
                          "LOCATION": server.url,
                          "OPTIONS": {"socket_connect_timeout": 1.0, "socket_timeout": 1.0}}}
    with override_settings(CACHES=caches):
        yield server
    server.kill()


def test_provider_tokens_and_the_login_page_answer_while_redis_is_down(client, sso, redis_cache):
    """Replays the audit's finding: with single sign-on on, every provider-token API call and the login
    page answered 500 while Redis was down (the JWKS and the provider's state are read from the cache)."""
    # given a provider token used once (its keys cached in Redis)
    token = sso.token("alice", "alice-sso-password")["access_token"]
    assert client.get("/api/me/", HTTP_AUTHORIZATION=f"Bearer {token}").status_code == 200

    # when Redis stops
    redis_cache.kill()
    me = client.get("/api/me/", HTTP_AUTHORIZATION=f"Bearer {token}")
    login = client.get("/accounts/login/")

    # then the token still signs alice in, and the login page offers the provider
    assert me.status_code == 200
    assert me.json() == {"username": "alice", "is_staff": False}
    assert login.status_code == 200
    assert b'id="sso-login"' in login.content


def test_the_login_page_asks_the_provider_once_per_status_period_while_redis_is_down(client, sso, redis_cache,
                                                                                      monkeypatch):
    """Replays the audit's finding: with no cache to remember the provider's state, every load of the
    login page during a Redis outage asked the provider (up to 3 s each when it is slow)."""
    # given Redis down, and the provider's probes counted
    from osmo.sso import shared_cache, views

    monkeypatch.setattr(shared_cache, "_local", {})
    probes = []
    real_get = views.requests.get
    monkeypatch.setattr(views.requests, "get", lambda *args, **kwargs: probes.append(args) or real_get(*args, **kwargs))
    redis_cache.kill()

    # when the login page is loaded three times
    pages = [client.get("/accounts/login/") for _ in range(3)]

    # then each offers the provider, which was asked once
    assert [page.status_code for page in pages] == [200, 200, 200]
    assert all(b'id="sso-login"' in page.content for page in pages)
    assert len(probes) == 1
