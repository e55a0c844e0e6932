"""The provider's groups decide the user's teams (Django groups: pool grants and quotas,
scheduler.services.access). Groups map to existing teams by name, or through
``OSMO_OIDC_GROUP_TEAMS``; no team is ever created here."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractUser, Group
from django.db import transaction

from osmo import config as osmo_config
from osmo.sso import config


def missing_groups_notice() -> str:
    claim = osmo_config.sso().groups_claim
    return (f"The identity provider sent no '{claim}' claim, so you are in no team: pools granted to teams "
            f"are closed to you. Ask your administrator to release the '{claim}' claim to this service.")


def provider_groups(claims: dict) -> list[str] | None:
    """The group names of the claim (None: the claim is missing or not a list of names)."""
    value = claims.get(osmo_config.sso().groups_claim)
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        return None
    return value


class LocalAccountConflict(Exception):
    """The provider's username is a local account's (one with a password): never taken over."""


@transaction.atomic
def user_sync(claims: dict) -> tuple[AbstractUser, str | None]:
    """The local user of the claims, created on first sight, with teams (and staff, when
    ``OSMO_OIDC_STAFF_GROUP`` is set) as the provider says; and a notice when the groups claim is missing."""
    username = config.username_from(claims)
    if username is None:
        raise ValueError("the token names no user (no username claim and no sub)")
    user_model = get_user_model()
    user, created = user_model.objects.get_or_create(username=username)
    groups = provider_groups(claims)
    names = [osmo_config.sso().group_teams.get(name, name) for name in groups or []]
    if not created and user.has_usable_password():
        raise LocalAccountConflict(f"the username {username!r} belongs to a local account")
    changed = created
    if created:
        user.set_unusable_password()
    email = claims.get("email")
    if isinstance(email, str) and email != user.email:
        user.email, changed = email, True
    staff_group = osmo_config.sso().staff_group
    if staff_group and user.is_staff != (staff_group in (groups or [])):
        user.is_staff, changed = not user.is_staff, True
    if changed:
        user.save()
    wanted = set(Group.objects.filter(name__in=names).values_list("pk", flat=True))
    if set(user.groups.values_list("pk", flat=True)) != wanted:
        user.groups.set(wanted)
    return user, (missing_groups_notice() if groups is None else None)
