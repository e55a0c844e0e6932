"""Redis down: token-authenticated calls still answer (the throttles fail open with a logged warning,
docs/operations.md, "Redis outage"), never a 500; throttling resumes when Redis is back."""

from __future__ import annotations

import logging

import pytest
from django.conf import settings
from django.test import override_settings

from osmo.api import throttling
from tests.factories import make_api_key, make_node, make_pool
from tests.pipeline.helpers import gang_spec
from workflows.models import Workflow

pytestmark = pytest.mark.django_db


def test_token_calls_answer_while_redis_is_down(api_client, user, redis_process, caplog, monkeypatch):
    """Replays the attack run's finding: 34 x 500 (10 submissions lost) during a 4 s Redis outage."""
    # given no outage logged yet by this process (the warning is rate-limited)
    monkeypatch.setattr(throttling.cache_unavailable, "last", float("-inf"))
    # and the throttles' cache on a real redis-server of this test, a pool, a user's token
    pool = make_pool("outage", keys=[("rack", "rack")])
    make_node(pool, "a1", {"rack": "r1"}, gpu=8)
    token = make_api_key(user)
    auth = {"HTTP_AUTHORIZATION": f"Token {token}", "REMOTE_ADDR": "10.78.0.1"}
    caches = {"default": {**settings.CACHES["default"], "BACKEND": "django.core.cache.backends.redis.RedisCache",
                          "LOCATION": redis_process.url}}
    rates = {**settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], "user": "3/min"}
    with override_settings(CACHES=caches, REST_FRAMEWORK={**settings.REST_FRAMEWORK,
                                                          "DEFAULT_THROTTLE_RATES": rates}):
        before = api_client.get("/api/pools/", **auth)
        # when Redis stops mid-test
        redis_process.kill()
        with caplog.at_level(logging.WARNING, logger="osmo.api.throttling"):
            during = [api_client.get("/api/pools/", **auth) for _ in range(4)]
            submitted = api_client.post("/api/workflows/", {"pool": "outage", "spec": gang_spec("during", 1, 1)},
                                        format="json", **auth)
            wrong = api_client.get("/api/pools/", HTTP_AUTHORIZATION="Token " + "0" * 40, REMOTE_ADDR="10.78.0.1")
        # and comes back
        redis_process.start()
        after = [api_client.get("/api/pools/", **auth) for _ in range(4)]
    # then every call during the outage was answered as if unthrottled (more than the rate of 3/min)
    assert before.status_code == 200
    assert [r.status_code for r in during] == [200] * 4
    assert submitted.status_code == 201
    assert Workflow.objects.filter(workflow_id="during-1").exists()
    assert wrong.status_code == 401
    # with a warning logged (once: the log is rate-limited)
    warnings = [r for r in caplog.records if r.getMessage() == "throttle.cache_unavailable"]
    assert len(warnings) >= 1
    assert len(warnings) < 4
    # and once Redis is back (empty), throttling resumes: 3 per minute
    assert [r.status_code for r in after] == [200, 200, 200, 429]
