"""Tests: fast hashing, a fixed key. Database and broker come from the environment (make test
sets DATABASE_URL and REDIS_URL to throwaway PostgreSQL and Redis servers)."""

from osmo.settings.base import *  # noqa: F403

SECRET_KEY = "test-secret-key-not-for-production"
DEBUG = False
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
OSMO_PLACEMENT_TICK_SECONDS = 1.0
OSMO_REDISPATCH_AFTER_SECONDS = 3
CELERY_BEAT_SCHEDULE = {
    "scheduler-tick": {"task": "scheduler.tick", "schedule": 1.0, "options": {"queue": "scheduler", "expires": 1.5}},
}
