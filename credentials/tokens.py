"""Personal access tokens (OSMO's ``osmo token set | list | delete``, docs/api.md "Access tokens"): named
API tokens with an expiry, for scripts and CI, beside the one API key each user has from
``drf_create_token`` or ``make run`` (:func:`api_key_create`; stored as a digest the same way).

A key is ``osmo_`` and 43 URL-safe random characters (256 bits). Only its SHA-256 digest is stored, so
the database, a backup or the admin never holds a usable key; the key is shown once, in the answer
that makes it. A key works through the last day of its ``expires_at`` date (UTC), while its user is
active, until it is deleted. Its names follow the credentials' rules.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from credentials.kinds import name_problems
from credentials.models import AccessToken, ApiKey
from credentials.services import user_row_lock
from osmo import config as osmo_config
from osmo.errors import NameTakenError, NotFoundError, OsmoError, ValidationFailedError
from osmo.types import User

logger = logging.getLogger(__name__)

PREFIX = "osmo_"
DEFAULT_DAYS = 31  # OSMO's default expiry
MAX_PER_USER = 100
DESCRIPTION_MAX = 200
#: ``expires_at`` not given: the default expiry (``None`` is a value, and not a date).
ABSENT: Any = object()


class AccessTokenNotFoundError(NotFoundError):
    def __init__(self, name: str) -> None:
        super().__init__(f"You have no access token named {name[:80]!r}.", details={"name": name})


class AccessTokenLimitError(OsmoError):
    http_status = 409
    code = "access_token_limit"

    def __init__(self) -> None:
        super().__init__(f"You have {MAX_PER_USER} access tokens, the limit per user; delete one you no longer "
                         "need (osmo token delete <name>) before making another.", details={"limit": MAX_PER_USER})


def digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


class ApiKeyExistsError(OsmoError):
    http_status = 409
    code = "api_key_exists"

    def __init__(self, username: str) -> None:
        super().__init__(f"{username} has an API key already; only its digest is stored, so it cannot be shown "
                         "again: replace it (the old key stops working at once).", details={"user": username})


def is_access_token(key: str) -> bool:
    """Whether ``key`` has the form of a personal access token (DRF's keys are 40 hex characters)."""
    return key.startswith(PREFIX)


def _expiry(expires_at: object, today: date) -> tuple[datetime | None, list[dict[str, str]]]:
    """The moment a token made ``today`` with this ``expires_at`` (``YYYY-MM-DD``, default 31 days on)
    stops working: the end of that day, UTC."""
    longest = osmo_config.security().access_token_max_days
    if expires_at is ABSENT:
        day = today + timedelta(days=min(DEFAULT_DAYS, longest))
    elif not isinstance(expires_at, str):
        return None, [{"path": "expires_at", "message": "must be a date, YYYY-MM-DD"}]
    else:
        try:
            day = date.fromisoformat(expires_at)
        except ValueError:
            return None, [{"path": "expires_at", "message": f"{expires_at[:40]!r} is not a date, YYYY-MM-DD"}]
        if day < today:
            return None, [{"path": "expires_at", "message": f"{day} is in the past (today is {today}, UTC)"}]
        if day > today + timedelta(days=longest):
            return None, [{"path": "expires_at", "message": f"at most {longest} days ahead: "
                                                            f"{today + timedelta(days=longest)} at the latest"}]
    return datetime.combine(day + timedelta(days=1), time.min, tzinfo=UTC), []


def token_create(*, user: User, name: object, expires_at: object = ABSENT,
                 description: object = "") -> tuple[AccessToken, str]:
    """Make one of ``user``'s access tokens; ``(row, key)``, the key for this answer only. Raises
    ``ValidationFailedError`` naming each bad field, ``NameTakenError`` for a name the user has,
    ``AccessTokenLimitError`` past :data:`MAX_PER_USER`."""
    problems = [{"path": path, "message": message} for path, message in name_problems(name)]
    expiry, expiry_problems = _expiry(expires_at, timezone.now().astimezone(UTC).date())
    problems += expiry_problems
    if not isinstance(description, str) or len(description) > DESCRIPTION_MAX:
        problems.append({"path": "description", "message": f"must be text of at most {DESCRIPTION_MAX} characters"})
    if problems:
        raise ValidationFailedError(problems)
    assert isinstance(name, str) and isinstance(description, str) and expiry is not None
    key = PREFIX + secrets.token_urlsafe(32)
    with transaction.atomic():
        user_row_lock(user)
        names = set(AccessToken.objects.filter(user=user).values_list("name", flat=True))  # at most MAX_PER_USER
        if name in names:
            raise NameTakenError([{"path": "name", "message": f"you already have an access token named {name!r}; "
                                                              "delete it first to make a new one"}])
        if len(names) >= MAX_PER_USER:
            raise AccessTokenLimitError()
        try:
            with transaction.atomic():
                token = AccessToken.objects.create(user=user, name=name, description=description,
                                                   digest=digest(key), expires_at=expiry)
        except IntegrityError as exc:  # a concurrent create of the same name
            raise NameTakenError([{"path": "name", "message": f"access token {name!r} was just made"}]) from exc
    logger.info("access_token.create", extra={"user": user.username, "token": name,
                                              "expires_at": expiry.isoformat()})
    return token, key


def token_delete(*, user: User, name: str) -> None:
    deleted, _ = AccessToken.objects.filter(user=user, name=name).delete()
    if not deleted:
        raise AccessTokenNotFoundError(name)
    logger.info("access_token.delete", extra={"user": user.username, "token": name})


def token_user(key: str) -> tuple[Any, AccessToken] | None:
    """The user of the token with this key and its row (expired or not: the caller says which), or
    None when no token has it (never made, or deleted). One query."""
    token = AccessToken.objects.select_related("user").filter(digest=digest(key)).first()
    return None if token is None else (token.user, token)


def api_key_create(*, user: User, replace: bool = False) -> str:
    """Make ``user``'s API key and return it (its digest is all that is stored, so this is the one
    chance to show it). ``replace`` drops the one the user has (it stops working at once); without
    it, a user who has one raises :class:`ApiKeyExistsError`."""
    key = secrets.token_hex(20)  # DRF's form: 40 hex characters, never PREFIX, never a ':'
    with transaction.atomic():
        user_row_lock(user)
        if ApiKey.objects.filter(user=user).exists():
            if not replace:
                raise ApiKeyExistsError(user.username)
            ApiKey.objects.filter(user=user).delete()
        ApiKey.objects.create(user=user, digest=digest(key))
    logger.info("api_key.create", extra={"user": user.username, "replaced": replace})
    return key


def expired(token: AccessToken) -> bool:
    return token.expires_at <= timezone.now()


__all__ = ["DEFAULT_DAYS", "MAX_PER_USER", "PREFIX", "AccessTokenLimitError", "AccessTokenNotFoundError",
           "ApiKeyExistsError", "api_key_create", "digest", "expired", "is_access_token", "token_create",
           "token_delete", "token_user"]
