"""Workers survive broker restarts (docs/operations.md, "Broker outage"): a real Redis killed and
started again under a real Celery worker; the worker reconnects and goes on working."""

from __future__ import annotations

import time

import pytest
from django.utils import timezone

from scheduler.heartbeats import heartbeats_read
from tests.conftest import wait_for

RESTARTS = 3


@pytest.mark.django_db(transaction=True)
def test_a_worker_survives_redis_restarts(celery_worker_factory, worker_env, redis_process):
    """Replays the attack run's finding: `Unrecoverable error: AttributeError("'NoneType' object has no
    attribute 'hostname'")` in kombu's Redis transport; two restarts killed both workers."""
    # given a worker on a Redis of this test, ticking by itself (no beat)
    env = {**worker_env, "REDIS_URL": redis_process.url, "OSMO_PLACEMENT_TICK_SECONDS": "0.5"}
    worker = celery_worker_factory("restarts", env=env)
    wait_for(lambda: "ready." in worker.log(), timeout=60, message="the worker to start")
    wait_for(lambda: heartbeats_read().tick_at is not None, timeout=60, message="a first tick")
    for restart in range(RESTARTS):
        # when Redis is killed, stays away a while, and comes back (empty: no persistence)
        redis_process.kill()
        time.sleep(3)
        redis_process.start()
        back = timezone.now()
        # then the worker is still running and ticks again after the restart
        assert worker.process.poll() is None, worker.log()[-4000:]
        wait_for(lambda: (heartbeats_read().tick_at or back) > back and worker.process.poll() is None,  # noqa: B023
                 timeout=90, message=f"a tick after restart {restart + 1}")
    log = worker.log()
    assert "Unrecoverable error" not in log
    assert worker.process.poll() is None
