"""Tests: fast hashing, a fixed key. Database and broker come from the environment (make test
sets DATABASE_URL and REDIS_URL to throwaway PostgreSQL and Redis servers).

Under pytest-xdist (``make test`` runs two workers) each worker has its own test database
(pytest-django's ``_gwN`` suffix), its own Redis database (``/N+1`` of the run's Redis: Celery's queues,
the cache, and the flush a test makes before it starts workers) and its own data folder (metrics,
artifacts), so that one worker's processes never take another's messages or counters. The environment
is changed here, before the base settings read it, so that the servers and workers a test starts
(``tests/conftest.py::worker_env``) inherit the same."""

import os
import re

_XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
if re.fullmatch(r"gw\d+", _XDIST_WORKER) and not os.environ.get("OSMO_TEST_WORKER_ISOLATED"):
    os.environ["OSMO_TEST_WORKER_ISOLATED"] = _XDIST_WORKER
    if os.environ.get("REDIS_URL"):
        os.environ["REDIS_URL"] = re.sub(r"(/\d*)?$", f"/{int(_XDIST_WORKER[2:]) % 15 + 1}",
                                         os.environ["REDIS_URL"], count=1)
    if os.environ.get("OSMO_DATA_DIR"):
        os.environ["OSMO_DATA_DIR"] = os.path.join(os.environ["OSMO_DATA_DIR"], _XDIST_WORKER)

from credentials.crypto import derived_key  # noqa: E402
from osmo.settings.base import *  # noqa: E402, F403

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
