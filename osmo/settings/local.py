"""Local development and `make run`: debug on, an insecure key is acceptable."""

from credentials.crypto import derived_key
from osmo.settings.base import *  # noqa: F403
from osmo.settings.base import env

DEBUG = env.bool("DEBUG", default=True)
SECRET_KEY = SECRET_KEY or "django-insecure-local-only-do-not-deploy"  # noqa: F405
# Without OSMO_CREDENTIALS_KEYS, a credential key derived from SECRET_KEY (never in production).
OSMO_CREDENTIALS_KEYS = OSMO_CREDENTIALS_KEYS or [derived_key(SECRET_KEY)]  # noqa: F405
