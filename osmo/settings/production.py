"""Production: no defaults for secrets, so a missing key stops startup instead of running unsafely."""

from django.core.exceptions import ImproperlyConfigured

from osmo.settings.base import *  # noqa: F403
from osmo.settings.base import SECRET_KEY, env

if not SECRET_KEY:
    raise ImproperlyConfigured("Set DJANGO_SECRET_KEY (or SECRET_KEY): production refuses to start without one.")
DEBUG = env.bool("DEBUG", default=False)
SESSION_COOKIE_SECURE = env.bool("SESSION_COOKIE_SECURE", default=True)
CSRF_COOKIE_SECURE = env.bool("CSRF_COOKIE_SECURE", default=True)
