"""Encryption at rest of credential values: ``cryptography``'s Fernet, several keys through MultiFernet
(the first encrypts, every one decrypts: key rotation, docs/operations.md "Credentials"). Pure: no
Django; the settings hand the keys in."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Sequence
from typing import Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet

DERIVATION_LABEL = b"osmo-credentials-key:"
#: ``osmo.settings.local``'s fixed secret key before it made one per installation (docs/operations.md
#: "Secrets"). Printed here, so it signs nothing; the credential key derived from it is kept to decrypt
#: only, for the credentials an embedded default stored before the upgrade.
LEGACY_LOCAL_SECRET_KEY = "django-insecure-local-only-do-not-deploy"
KEY_RECIPE = "`python -c 'from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())'`"


class BadKeyError(ValueError):
    """A configured key is not a Fernet key (32 url-safe base64-encoded bytes)."""


class DecryptError(Exception):
    """A stored value cannot be read with any configured key, or belongs to another row."""


def derived_key(secret: str) -> str:
    """A Fernet key derived from ``secret`` (the embedded default and tests only: SECRET_KEY)."""
    return base64.urlsafe_b64encode(hashlib.sha256(DERIVATION_LABEL + secret.encode()).digest()).decode()


def local_keys(secret: str) -> list[str]:
    """The embedded default's credential keys: derived from ``secret`` (encrypts), then from
    :data:`LEGACY_LOCAL_SECRET_KEY` (decrypts what was stored before the upgrade)."""
    keys = [derived_key(secret)]
    legacy = derived_key(LEGACY_LOCAL_SECRET_KEY)
    return keys if legacy in keys else [*keys, legacy]


def parse_keys(keys: Sequence[str]) -> list[Fernet]:
    """Fernet objects of ``keys`` in order; raises :class:`BadKeyError` naming the position of a bad one."""
    fernets = []
    for index, key in enumerate(keys):
        try:
            fernets.append(Fernet(key.strip().encode()))
        except (ValueError, TypeError) as exc:
            raise BadKeyError(f"OSMO_CREDENTIALS_KEYS item {index + 1} is not a Fernet key "
                              f"(32 url-safe base64-encoded bytes; make one with {KEY_RECIPE})") from exc
    if not fernets:
        raise BadKeyError("OSMO_CREDENTIALS_KEYS is empty")
    return fernets


class Keyring:
    """Seals a credential's values together with who owns it and its name, so a ciphertext copied to
    another row does not open there."""

    def __init__(self, keys: Sequence[str]) -> None:
        self._multi = MultiFernet(parse_keys(keys))

    def seal(self, *, owner_id: int, name: str, values: dict[str, str]) -> str:
        plain = json.dumps({"owner": owner_id, "name": name, "values": values}, sort_keys=True)
        return self._multi.encrypt(plain.encode()).decode()

    def open(self, token: str, *, owner_id: int, name: str) -> dict[str, str]:
        try:
            plain: Any = json.loads(self._multi.decrypt(token.encode()))
        except InvalidToken as exc:
            raise DecryptError(f"credential {name!r} cannot be decrypted with the configured keys") from exc
        if plain.get("owner") != owner_id or plain.get("name") != name:
            raise DecryptError(f"credential {name!r}: the stored value belongs to another credential")
        values: dict[str, str] = plain["values"]
        return values

    def rotate(self, token: str) -> str:
        """``token`` encrypted again with the first key (readable with any configured key)."""
        return self._multi.rotate(token.encode()).decode()


__all__ = ["LEGACY_LOCAL_SECRET_KEY", "BadKeyError", "DecryptError", "Keyring", "derived_key", "local_keys",
           "parse_keys"]
