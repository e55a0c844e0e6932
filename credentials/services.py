"""Writes and reads of the credential store (docs/design.md §15). Values go in through
:func:`credential_set` and come out only through :func:`task_secret_payload` (the dispatch); the API
never answers them and the log lines name a credential, never its values."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from functools import cache
from typing import Any

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction

from credentials.crypto import Keyring
from credentials.kinds import Kind, endpoint_covers, kind_of, name_problems, values_problems
from credentials.models import Credential
from credentials.secrets import CredentialRef, SecretPayload, docker_config, image_registry, registry_host
from osmo import config as osmo_config
from osmo.errors import NameTakenError, NotFoundError, OsmoError, ValidationFailedError
from osmo.types import User

logger = logging.getLogger(__name__)


@cache
def _keyring(keys: tuple[str, ...]) -> Keyring:
    return Keyring(keys)


def keyring() -> Keyring:
    """The keyring of ``osmo_config.security().credentials_keys`` (rebuilt when the setting changes)."""
    return _keyring(tuple(osmo_config.security().credentials_keys))


class CredentialNotFoundError(NotFoundError):
    code = "credential_not_found"

    def __init__(self, name: str) -> None:
        super().__init__(f"You have no credential named {name[:80]!r}.", details={"name": name[:80]})


def _check(name: object, kind: object, values: object) -> tuple[str, Kind, dict[str, str]]:
    problems = name_problems(name)
    parsed, kind_problems = kind_of(kind)
    problems += kind_problems
    if parsed is not None:
        problems += values_problems(parsed, values)
    if problems:
        raise ValidationFailedError([{"path": path, "message": message} for path, message in problems])
    assert isinstance(name, str) and parsed is not None and isinstance(values, dict)
    return name, parsed, values


def credential_set(*, owner: User, name: object, kind: object, values: object,
                   create_only: bool = False) -> tuple[Credential, bool]:
    """Create or replace ``owner``'s credential ``name``; ``(credential, created)``. Raises
    ``ValidationFailedError`` naming each bad field, ``NameTakenError`` for ``create_only`` and a taken name."""
    name, parsed, clean = _check(name, kind, values)
    sealed = keyring().seal(owner_id=owner.pk, name=name, values=clean)
    fields = {"kind": parsed.value, "keys": sorted(clean), "sealed": sealed}
    with transaction.atomic():
        existing = Credential.objects.select_for_update().filter(owner=owner, name=name).first()
        if existing is not None and create_only:
            raise NameTakenError([{"path": "name", "message": f"you already have a credential named {name!r}; "
                                                              "PUT /api/credentials/<name>/ replaces it"}])
        if existing is None:
            _room_for_one_more(owner)
            try:
                with transaction.atomic():
                    credential = Credential.objects.create(owner=owner, name=name, **fields)
            except IntegrityError as exc:  # a concurrent create of the same name
                raise NameTakenError([{"path": "name", "message": f"credential {name!r} was just created"}]) from exc
            created = True
        else:
            for field, value in fields.items():
                setattr(existing, field, value)
            existing.save(update_fields=[*fields, "updated_at"])
            credential, created = existing, False
    logger.info("credential.set", extra={"user": owner.username, "credential": name, "kind": parsed.value,
                                         "keys": sorted(clean), "new": created})
    return credential, created


class CredentialLimitError(OsmoError):
    """The owner already keeps ``OSMO_MAX_CREDENTIALS_PER_USER`` credentials (docs/design.md §15): 409
    until one is deleted. Replacing an existing credential is always allowed."""

    http_status = 409
    code = "credential_limit"

    def __init__(self, limit: int) -> None:
        super().__init__(f"You keep {limit} credentials, the limit per user; delete one you no longer need "
                         "(osmo credential delete <name>) before creating another.", details={"limit": limit})


def user_row_lock(user: User) -> None:
    """Lock ``user``'s row to the end of the transaction, before counting what the user keeps: two
    creates at once cannot both take the last place under a per-user limit (a no-op on SQLite, which
    writes one at a time anyway)."""
    # (the user model, not type(user): a session's request.user is Django's SimpleLazyObject around the user)
    list(get_user_model().objects.select_for_update().filter(pk=user.pk).values_list("pk"))


def _room_for_one_more(owner: User) -> None:
    """Refuse a new credential past the owner's limit (counted under :func:`user_row_lock`)."""
    limit = osmo_config.security().max_credentials_per_user
    if limit <= 0:
        return
    user_row_lock(owner)
    if Credential.objects.filter(owner=owner).count() >= limit:
        raise CredentialLimitError(limit)


def credential_delete(*, owner: User, name: str) -> None:
    deleted, _ = Credential.objects.filter(owner=owner, name=name).delete()
    if not deleted:
        raise CredentialNotFoundError(name)
    logger.info("credential.delete", extra={"user": owner.username, "credential": name})


def credential_get(*, owner: User, name: str) -> Credential:
    credential = Credential.objects.filter(owner=owner, name=name).first()
    if credential is None:
        raise CredentialNotFoundError(name)
    return credential


def credentials_missing(*, owner: User | None, names: Iterable[str]) -> set[str]:
    """Which of ``names`` ``owner`` has no credential of (all of them for nobody); one query."""
    wanted = set(names)
    if not wanted or owner is None:
        return wanted
    have = set(Credential.objects.filter(owner=owner, name__in=wanted).values_list("name", flat=True))
    return wanted - have


class CredentialKeyMissingError(ValidationFailedError):
    code = "credential_key_missing"
    default_message = "A credential does not hold a key the task asks for."


def task_secret_payload(*, owner: User, refs: Iterable[CredentialRef]) -> SecretPayload:
    """The decrypted values a task's ``credentials`` give it (docs/kubernetes.md "Credentials"): one
    query for every credential named. Raises ``CredentialNotFoundError`` (deleted since submission)
    or ``CredentialKeyMissingError`` (a key the credential no longer holds)."""
    refs = list(refs)
    rows = {row.name: row for row in Credential.objects.filter(owner=owner, name__in={ref.name for ref in refs})}
    env: dict[str, str] = {}
    files: dict[str, str] = {}
    ring = keyring()
    for ref in refs:
        row = rows.get(ref.name)
        if row is None:
            raise CredentialNotFoundError(ref.name)
        values = ring.open(row.sealed, owner_id=owner.pk, name=row.name)
        for variable, key in ref.environment:
            if key not in values:
                raise CredentialKeyMissingError([{"path": f"credentials.{ref.name}.{variable}",
                                                  "message": f"credential {ref.name!r} has no key {key!r}; "
                                                             f"its keys: {', '.join(sorted(values))}"}])
            env[variable] = values[key]
        if ref.path is not None:
            for key, value in values.items():
                files[f"{ref.path.rstrip('/')}/{key}"] = value
    return SecretPayload(env=env, files=files)


class DataCredentialMissingError(ValidationFailedError):
    code = "data_credential_missing"
    default_message = "You have no data credential for this storage URL."


def data_credential_for(*, owner: User, url: str) -> tuple[str, dict[str, str]]:
    """The name and values of ``owner``'s data credential whose ``endpoint`` covers the storage URL ``url``
    (the longest such endpoint; equal ones by name), for the CLI's own transfers (``osmo data``): the values
    of the owner's own credential, to the owner. One query. Raises :class:`DataCredentialMissingError`
    naming ``url``."""
    ring = keyring()
    best: tuple[int, str, dict[str, str]] | None = None
    for row in Credential.objects.filter(owner=owner, kind=Kind.DATA.value).order_by("name"):
        values = ring.open(row.sealed, owner_id=owner.pk, name=row.name)
        endpoint = values.get("endpoint", "")
        if endpoint_covers(endpoint, url) and (best is None or len(endpoint) > best[0]):
            best = (len(endpoint), row.name, values)
    if best is None:
        scheme, _, rest = url.partition("://")
        place = f"{scheme}://{rest.split('/', 1)[0]}"
        raise DataCredentialMissingError([{"path": "url", "message": (
            f"you have no data credential for {url[:200]!r}: add one whose endpoint covers it, e.g. "
            f"osmo credential set NAME --type data --endpoint {place[:120]} --access-key-id ID "
            "--secret-access-key-stdin")}])
    logger.info("credential.data_read", extra={"user": owner.username, "credential": best[1],
                                               "place": url.split("://", 1)[0] + "://" + url.split("://", 1)[-1]
                                               .split("/", 1)[0]})
    return best[1], best[2]


def registry_pull_configs(*, owner_id: int, images: Iterable[str]) -> dict[str, str]:
    """The ``.dockerconfigjson`` of the owner's registry credential for each of ``images``' registries
    that has one, by registry host (OSMO picks a user's registry credential up by the image's host,
    docs/kubernetes.md "Credentials"). Several for one host: the one named first. One query."""
    hosts = {image_registry(image) for image in images}
    found: dict[str, str] = {}
    ring = keyring()
    for row in Credential.objects.filter(owner_id=owner_id, kind=Kind.REGISTRY.value).order_by("name"):
        values = ring.open(row.sealed, owner_id=owner_id, name=row.name)
        host = registry_host(values["registry"])
        if host in hosts and host not in found:
            found[host] = docker_config(host, values["username"], values["auth"])
    return found


def registry_pull_config(*, owner: User, image: str) -> str | None:
    """The ``.dockerconfigjson`` of ``owner``'s registry credential for ``image``'s registry, or None."""
    return registry_pull_configs(owner_id=owner.pk, images=[image]).get(image_registry(image))


def credentials_rotate() -> int:
    """Encrypt every stored credential again with the first key; the number of rows rewritten."""
    ring = keyring()
    count = 0
    for row in Credential.objects.only("pk", "sealed").iterator():
        Credential.objects.filter(pk=row.pk).update(sealed=ring.rotate(row.sealed))
        count += 1
    return count


def describe(credential: Credential) -> dict[str, Any]:
    """What may be said of a credential: no values."""
    return {"name": credential.name, "kind": credential.kind, "keys": list(credential.keys),
            "created_at": credential.created_at, "updated_at": credential.updated_at}


__all__ = ["CredentialKeyMissingError", "CredentialLimitError", "CredentialNotFoundError", "CredentialRef",
           "DataCredentialMissingError", "SecretPayload", "credential_delete", "credential_get", "credential_set",
           "credentials_missing", "credentials_rotate", "data_credential_for", "keyring", "registry_pull_config",
           "registry_pull_configs", "task_secret_payload", "user_row_lock"]
