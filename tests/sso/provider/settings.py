"""A real OpenID Connect provider for the single sign-on tests: django-oauth-toolkit's, in a Django
project of its own, run in its own process by tests/sso/conftest.py (never imported by osmo).

Everything it needs comes from the environment the fixture sets: its SQLite file, the issuer URL,
the RSA key that signs ID and access tokens, and the access token lifetime. Access tokens are JWTs
signed with the same key as the ID tokens (``tokens.signed_access_token``), as Keycloak, Okta and
Entra ID issue them, so osmo checks them against the provider's JWKS."""

import os
from pathlib import Path

HERE = Path(__file__).resolve().parent
SECRET_KEY = "test-provider-only"
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
ROOT_URLCONF = "tests.sso.provider.urls"
INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "oauth2_provider",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
TEMPLATES = [{
    "BACKEND": "django.template.backends.django.DjangoTemplates",
    "DIRS": [HERE / "templates"],
    "APP_DIRS": True,
    "OPTIONS": {"context_processors": [
        "django.template.context_processors.request",
        "django.contrib.auth.context_processors.auth",
        "django.contrib.messages.context_processors.messages",
    ]},
}]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": os.environ["PROVIDER_DB"]}}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
STATIC_URL = "static/"
LOGIN_URL = "/accounts/login/"
# The provider's own session cookie must not collide with osmo's on 127.0.0.1 (cookies ignore ports).
SESSION_COOKIE_NAME = "provider_sessionid"
CSRF_COOKIE_NAME = "provider_csrftoken"
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

ISSUER = os.environ["PROVIDER_ISSUER"]
OAUTH2_PROVIDER = {
    "OIDC_ENABLED": True,
    "OIDC_ISS_ENDPOINT": ISSUER,
    "OIDC_RSA_PRIVATE_KEY": Path(os.environ["PROVIDER_KEY_FILE"]).read_text(),
    "OIDC_RP_INITIATED_LOGOUT_ENABLED": True,
    "OIDC_RP_INITIATED_LOGOUT_ALWAYS_PROMPT": False,
    "SCOPES": {"openid": "OpenID Connect", "profile": "Profile", "email": "Email", "groups": "Groups"},
    "ACCESS_TOKEN_EXPIRE_SECONDS": int(os.environ.get("PROVIDER_ACCESS_TOKEN_SECONDS", "300")),
    "ID_TOKEN_EXPIRE_SECONDS": int(os.environ.get("PROVIDER_ACCESS_TOKEN_SECONDS", "300")),
    "ACCESS_TOKEN_GENERATOR": "tests.sso.provider.tokens.signed_access_token",
    "REFRESH_TOKEN_GENERATOR": "oauthlib.oauth2.rfc6749.tokens.random_token_generator",
    "OAUTH2_VALIDATOR_CLASS": "tests.sso.provider.tokens.GroupsValidator",
    "OAUTH_DEVICE_VERIFICATION_URI": f"{ISSUER}/device/",
    "DEVICE_FLOW_INTERVAL": 1,
    "PKCE_REQUIRED": False,
}
# Errors of the provider go to its log (tests/sso/conftest.py keeps it beside its database).
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"django.request": {"handlers": ["console"], "level": "ERROR"}},
}
