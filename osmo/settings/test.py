"""Tests: fast hashing, a fixed key. Database and broker come from the environment (make test
sets DATABASE_URL and REDIS_URL to throwaway PostgreSQL and Redis servers)."""

import os

from credentials.crypto import derived_key
from osmo.settings.base import *  # noqa: F403

SECRET_KEY = "test-secret-key-not-for-production"
OSMO_CREDENTIALS_KEYS = [derived_key(SECRET_KEY)]
DEBUG = False
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
# A test may start its worker processes with a longer interval (OSMO_PLACEMENT_TICK_SECONDS in their
# environment); beat's schedule below stays at one second.
OSMO_PLACEMENT_TICK_SECONDS = float(os.environ.get("OSMO_PLACEMENT_TICK_SECONDS", "1.0"))
OSMO_REDISPATCH_AFTER_SECONDS = 3
CELERY_BEAT_SCHEDULE = {
    "workflows-tick": {"task": "workflows.tick", "schedule": 1.0, "options": {"queue": "scheduler", "expires": 1.5}},
}
# Throttle counters live in Redis for the whole run and most tests come from 127.0.0.1: generous
# rates here; tests/ops/test_throttling.py sets small ones and uses its own client addresses.
REST_FRAMEWORK = {  # noqa: F405
    **REST_FRAMEWORK,  # noqa: F405
    "DEFAULT_THROTTLE_RATES": {"anon": "100000/min", "user": "100000/min", "auth_failure": "100000/min"},
}
# Parallel pytest workers (xdist) share the run's Redis and create the same user ids: each keeps its
# own cache keys so one worker's throttle counters never reach another's.
if "default" in CACHES and "KEY_PREFIX" in CACHES["default"]:  # noqa: F405
    CACHES["default"]["KEY_PREFIX"] += "-" + os.environ.get("PYTEST_XDIST_WORKER", "main")  # noqa: F405
