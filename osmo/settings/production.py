"""Production: no defaults for secrets, so a missing key stops startup instead of running unsafely."""

from django.core.exceptions import ImproperlyConfigured

from credentials.crypto import BadKeyError, parse_keys
from osmo.settings.base import *  # noqa: F403
from osmo.settings.base import CONFIG, SECRET_KEY, env

if not SECRET_KEY:
    raise ImproperlyConfigured("Set DJANGO_SECRET_KEY (or SECRET_KEY): production refuses to start without one.")
# Sessions, password-reset links and the task runtime's tokens are signed with it: a key printed in the
# repository's examples (or Django's development prefix, or a short one) lets anyone forge them.
SECRET_KEY_PLACEHOLDERS = ("change-me", "replace-with-", "django-insecure-")
SECRET_KEY_MIN_LENGTH = 32
if len(SECRET_KEY) < SECRET_KEY_MIN_LENGTH or SECRET_KEY.startswith(SECRET_KEY_PLACEHOLDERS):
    raise ImproperlyConfigured(
        f"DJANGO_SECRET_KEY is a placeholder or shorter than {SECRET_KEY_MIN_LENGTH} characters: production refuses "
        "to start with a key anyone can know. Generate one: python -c 'import secrets; "
        "print(secrets.token_urlsafe(50))'")
if not CONFIG.security.credentials_keys:
    raise ImproperlyConfigured("Set OSMO_CREDENTIALS_KEYS (one or more Fernet keys, comma-separated): production "
                               "refuses to start without the credential store's keys (docs/operations.md).")
try:
    parse_keys(list(CONFIG.security.credentials_keys))
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
