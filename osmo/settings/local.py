"""Local development and `make run`: debug on, an insecure key is acceptable."""

from osmo.settings.base import *  # noqa: F403
from osmo.settings.base import env

DEBUG = env.bool("DEBUG", default=True)
SECRET_KEY = SECRET_KEY or "django-insecure-local-only-do-not-deploy"  # noqa: F405
