"""Production: no defaults for secrets, so a missing key stops startup instead of running unsafely."""

from django.core.exceptions import ImproperlyConfigured

from credentials.crypto import BadKeyError, parse_keys
from osmo.settings.base import *  # noqa: F403
from osmo.settings.base import OSMO_CREDENTIALS_KEYS, SECRET_KEY, env

if not SECRET_KEY:
    raise ImproperlyConfigured("Set DJANGO_SECRET_KEY (or SECRET_KEY): production refuses to start without one.")
if not OSMO_CREDENTIALS_KEYS:
    raise ImproperlyConfigured("Set OSMO_CREDENTIALS_KEYS (one or more Fernet keys, comma-separated): production "
                               "refuses to start without the credential store's keys (docs/operations.md).")
try:
    parse_keys(OSMO_CREDENTIALS_KEYS)
except BadKeyError as exc:
    raise ImproperlyConfigured(str(exc)) from exc
DEBUG = env.bool("DEBUG", default=False)
SESSION_COOKIE_SECURE = env.bool("SESSION_COOKIE_SECURE", default=True)
CSRF_COOKIE_SECURE = env.bool("CSRF_COOKIE_SECURE", default=True)

# Static files: collected at image build (`collectstatic`), served by WhiteNoise with hashed names and
# far-future cache headers. A template asking for a file missing from the manifest gets the plain name
# instead of a 500 page.
STORAGES = {
    **STORAGES,  # noqa: F405
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}
WHITENOISE_MANIFEST_STRICT = False
