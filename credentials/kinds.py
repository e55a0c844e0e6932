"""What a credential of each kind holds (OSMO's GENERIC, REGISTRY and DATA credentials, docs/api.md
"Credentials"), and the checks of a name and values: pure, each problem as ``(field path, message)``."""

from __future__ import annotations

import re
from enum import StrEnum
from urllib.parse import urlsplit

from parsing.errors import join_path

# The spec's credential names (workflows.spec.fields.CREDENTIAL_NAME), at most 63 characters.
NAME = re.compile(r"[a-zA-Z0-9]([a-zA-Z0-9_.-]*[a-zA-Z0-9])?")
NAME_MAX = 63
KEY = re.compile(r"[a-zA-Z_][a-zA-Z0-9_.-]*")
KEY_MAX = 63
MAX_KEYS = 32
# One value, and all of a credential's values together: well under a Kubernetes Secret's 1 MiB.
VALUE_MAX_BYTES = 16 * 1024
TOTAL_MAX_BYTES = 64 * 1024
DATA_SCHEMES = ("s3", "gs", "azure", "tos", "swift", "http", "https")


class Kind(StrEnum):
    GENERIC = "generic"
    REGISTRY = "registry"
    DATA = "data"


# Required and optional keys per kind (OSMO's payload names); a generic credential takes any keys.
REQUIRED: dict[Kind, tuple[str, ...]] = {
    Kind.GENERIC: (),
    Kind.REGISTRY: ("registry", "username", "auth"),
    Kind.DATA: ("endpoint", "access_key_id", "access_key"),
}
# override_url: the HTTP endpoint of an S3-compatible store that is not AWS (MinIO, Ceph), OSMO's key.
OPTIONAL: dict[Kind, tuple[str, ...]] = {Kind.GENERIC: (), Kind.REGISTRY: (), Kind.DATA: ("region", "override_url")}

Problem = tuple[str, str]


def name_problems(name: object, path: str = "name") -> list[Problem]:
    if not isinstance(name, str) or not name:
        return [(path, "required: a credential name")]
    if len(name) > NAME_MAX or not NAME.fullmatch(name):
        return [(path, f"invalid credential name {name[:80]!r}: 1-{NAME_MAX} letters, digits, '_', '-', '.', "
                       "starting and ending with a letter or digit")]
    return []


def kind_of(kind: object, path: str = "kind") -> tuple[Kind | None, list[Problem]]:
    choices = ", ".join(item.value for item in Kind)
    if not isinstance(kind, str) or not kind:
        return None, [(path, f"required: one of {choices}")]
    try:
        return Kind(kind.lower()), []
    except ValueError:
        return None, [(path, f"unknown kind {kind[:40]!r}; one of {choices}")]


def values_problems(kind: Kind, values: object, path: str = "values") -> list[Problem]:
    """Problems of ``values`` (a mapping of key to text) for a credential of ``kind``."""
    if not isinstance(values, dict):
        return [(path, "must be a mapping of keys to text values")]
    problems: list[Problem] = []
    if not values:
        problems.append((path, "at least one key"))
    if len(values) > MAX_KEYS:
        # said once: a problem per key made a 2 MB request of 100,000 keys a 10.8 MB answer
        return [(path, f"at most {MAX_KEYS} keys, got {len(values)}")]
    total = 0
    for key, value in values.items():
        item = join_path(path, str(key)[:KEY_MAX + 1])  # values.user, values["1a"]: the paths of every error
        if not isinstance(key, str) or len(key) > KEY_MAX or not KEY.fullmatch(key):
            problems.append((item, f"invalid key: 1-{KEY_MAX} letters, digits, '_', '-', '.', not starting with "
                                   "a digit"))
            continue
        if not isinstance(value, str):
            problems.append((item, f"must be text, not {type(value).__name__}"))
            continue
        size = len(value.encode())
        total += size
        if size > VALUE_MAX_BYTES:
            problems.append((item, f"the value is {size} bytes; at most {VALUE_MAX_BYTES}"))
        elif not value:
            problems.append((item, "must not be empty"))
    if total > TOTAL_MAX_BYTES:
        problems.append((path, f"the values are {total} bytes together; at most {TOTAL_MAX_BYTES}"))
    if kind is Kind.GENERIC:
        return problems
    allowed = REQUIRED[kind] + OPTIONAL[kind]
    problems += [(join_path(path, key), f"required for a {kind.value} credential") for key in REQUIRED[kind]
                 if key not in values]
    problems += [(join_path(path, key), f"not a key of a {kind.value} credential; its keys: {', '.join(allowed)}")
                 for key in values if isinstance(key, str) and key not in allowed]
    endpoint = values.get("endpoint")
    if kind is Kind.DATA and isinstance(endpoint, str) and endpoint:
        parts = urlsplit(endpoint)
        if parts.scheme not in DATA_SCHEMES or not parts.netloc:
            problems.append((f"{path}.endpoint", f"must be a storage URL like s3://bucket; schemes: "
                                                 f"{', '.join(DATA_SCHEMES)}"))
    override = values.get("override_url")
    if kind is Kind.DATA and isinstance(override, str) and override:
        try:
            parts = urlsplit(override)
        except ValueError:  # an unclosed IPv6 bracket
            parts = urlsplit("")
        if parts.scheme not in ("http", "https") or not parts.netloc:
            problems.append((f"{path}.override_url", "must be an http(s) URL like http://minio:9000"))
    return problems


def endpoint_covers(endpoint: str, url: str) -> bool:
    """Whether a data credential's ``endpoint`` (``s3://bucket``, ``s3://bucket/prefix``) is the storage
    URL ``url`` or a prefix of it at a ``/``: same scheme and place, compared as written (schemes without case)."""
    def split(text: str) -> tuple[str, str]:
        scheme, _, rest = text.partition("://")
        return scheme.lower(), rest.strip("/")

    (e_scheme, e_rest), (u_scheme, u_rest) = split(endpoint), split(url)
    return bool(e_rest) and e_scheme == u_scheme and (u_rest == e_rest or u_rest.startswith(e_rest + "/"))


__all__ = ["DATA_SCHEMES", "Kind", "MAX_KEYS", "NAME", "NAME_MAX", "OPTIONAL", "REQUIRED", "TOTAL_MAX_BYTES",
           "VALUE_MAX_BYTES", "endpoint_covers", "kind_of", "name_problems", "values_problems"]
