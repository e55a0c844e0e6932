"""Local development and `make run`: debug on, a secret key of this installation's own.

Without DJANGO_SECRET_KEY the key is random, made on the first start and kept in the data folder
(:mod:`osmo.secret_file`; docs/operations.md "Secrets"): sessions, password-reset links and the task
runtime's tokens are signed with it, and the credential store's key is derived from it."""

from credentials.crypto import local_keys
from osmo.secret_file import secret_key_load_or_create
from osmo.settings.base import *  # noqa: F403
from osmo.settings.base import CONFIG, DATA_DIR, env

DEBUG = env.bool("DEBUG", default=True)
SECRET_KEY = SECRET_KEY or secret_key_load_or_create(DATA_DIR)  # noqa: F405
# Without OSMO_CREDENTIALS_KEYS, a credential key derived from SECRET_KEY (never in production), then the
# one derived from the fixed key of earlier versions, to decrypt only: `make run` re-encrypts what it
# still opens with the new key at start (credentials_rotate).
OSMO_CREDENTIALS_KEYS = list(CONFIG.security.credentials_keys) or local_keys(SECRET_KEY)  # noqa: F405
