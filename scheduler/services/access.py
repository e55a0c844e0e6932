"""Who may use a pool, its status, and the teams' GPU quotas in it (docs/design.md §9).

- Access: a pool with no :class:`~scheduler.models.PoolGrant` is open to everyone (the demo pools of
  ``make run``); otherwise only staff, the granted users and members of the granted teams (Django
  groups) see it and submit to it. Others get 403 naming the pool, and do not see it in lists.
- Status: ONLINE places work; OFFLINE accepts submissions and places nothing; MAINTENANCE refuses
  submissions (409) and places nothing. Running work is never touched by a status change.
- Quotas: per pool and team, the GPUs the team's HIGH and NORMAL work may hold. The quotas of a pool
  may not add up to more than its GPUs. LOW work is not limited (it borrows idle GPUs and is the only
  preemptible work).
"""

from __future__ import annotations

from django.contrib.auth.models import Group
from django.db import transaction
from django.db.models import BooleanField, Exists, ExpressionWrapper, OuterRef, Q, QuerySet, Sum, Value

from osmo.errors import ConflictError, OsmoError, ValidationFailedError
from osmo.types import Viewer
from scheduler.choices import PoolStatus
from scheduler.models import Node, Pool, PoolGrant, TeamQuota
from scheduler.services.reservations import pool_capacity_changed


class PoolForbiddenError(OsmoError):
    http_status = 403
    code = "pool_forbidden"
    default_message = "You have no access to this pool."


class PoolUnavailableError(ConflictError):
    code = "pool_maintenance"
    default_message = "The pool is in maintenance and accepts no submissions."


def _access_condition(user: Viewer) -> Q | None:
    """Which pools the user may see and use, as a condition on pools (None: all of them, for staff)."""
    if user.is_staff:
        return None
    return _member_access(user.pk or None)


def _member_access(user_id: int | None) -> Q:
    """The pools a signed-in user who is not staff may see and use (with ``None``: nobody's)."""
    granted = PoolGrant.objects.filter(pool=OuterRef("pk"))
    mine = granted.filter(Q(user_id=user_id) | Q(team__user=user_id)) if user_id else granted.none()
    return Q(~Exists(granted) | Exists(mine))


def pools_visible(pools: QuerySet[Pool], *, user: Viewer) -> QuerySet[Pool]:
    """The pools of ``pools`` the user may see and use (one query, whatever the number of grants)."""
    condition = _access_condition(user)
    return pools if condition is None else pools.filter(condition)


def pool_with_access(name: str, *, user: Viewer) -> Pool | None:
    """The pool named ``name`` (None if there is none) with ``accessible`` set: whether the user may
    see and use it (:func:`_member_access`'s condition as a column). One query, where reading the pool
    and then :func:`pool_accessible` took two."""
    condition = _access_condition(user)
    accessible = Value(True) if condition is None else ExpressionWrapper(condition, output_field=BooleanField())
    return Pool.objects.filter(name=name).order_by().annotate(accessible=accessible).first()


def pool_accessible(pool: Pool, *, user: Viewer) -> bool:
    return pools_visible(Pool.objects.filter(pk=pool.pk), user=user).exists()


def pool_submit_check(pool: Pool, *, user: Viewer) -> None:
    """Raise unless the user may submit to the pool now: 403 without access, 409 in maintenance. A
    pool read by :func:`pool_with_access` carries the answer to the first question already."""
    accessible = getattr(pool, "accessible", None)
    if not (pool_accessible(pool, user=user) if accessible is None else accessible):
        raise PoolForbiddenError(
            f"You have no access to pool {pool.name!r}: ask an administrator to grant it to you or your team.",
            details={"pool": pool.name},
        )
    if pool.status == PoolStatus.MAINTENANCE:
        raise PoolUnavailableError(
            f"Pool {pool.name!r} is in maintenance and accepts no submissions; running work continues.",
            details={"pool": pool.name, "status": pool.status},
        )


def team_for_submission(pool: Pool, *, user: Viewer, team: str | None) -> Group | None:
    """The team a submission counts against. Named: the user must belong to it (staff may name any).
    Not named: the user's one team with a quota in this pool, else the user's one team, else none."""
    if team:
        found: Group | None = None
        if user.is_staff:
            found = Group.objects.filter(name=team).first()
        elif user.pk:
            found = Group.objects.filter(user=user.pk, name=team).order_by("pk").first()
        if found is None:
            raise ValidationFailedError(
                [{"path": "team", "message": f"you are not a member of team {team!r}"}],
                f"You are not a member of team {team!r}.",
            )
        return found
    if not user.pk:
        return None
    # One query: the user's teams, each marked whether it has a quota in the pool (a user belongs to
    # a handful of teams).
    mine = list(Group.objects.filter(user=user.pk).order_by("name").annotate(
        has_quota=Exists(TeamQuota.objects.filter(pool=pool.pk, team=OuterRef("pk")))))
    with_quota = [found for found in mine if getattr(found, "has_quota", False)]
    if len(with_quota) == 1:
        return with_quota[0]
    if len(with_quota) > 1:
        names = ", ".join(t.name for t in with_quota)
        raise ValidationFailedError(
            [{"path": "team", "message": f"you belong to several teams with a quota in pool {pool.name} "
                                         f"({names}): name one"}],
            f"Choose the team this workflow counts against: {names}.",
        )
    return mine[0] if len(mine) == 1 else None


def pool_gpu_capacity(pool: Pool) -> int:
    return int(Node.objects.filter(pool=pool).aggregate(total=Sum("gpu"))["total"] or 0)


@transaction.atomic
def team_quota_set(*, pool: Pool, team: Group, gpu: int | None) -> TeamQuota | None:
    """Set (or with ``gpu=None`` remove) a team's quota. Refuses quotas adding up to more than the
    pool's GPUs. A change may let waiting work start: the pool's epochs move on."""
    quotas_lock(pool)
    if gpu is None:
        TeamQuota.objects.filter(pool=pool, team=team).delete()
        pool_capacity_changed(pool.pk)
        return None
    quota_validate(pool=pool, team=team, gpu=gpu)
    quota, _created = TeamQuota.objects.update_or_create(pool=pool, team=team, defaults={"gpu": gpu})
    pool_capacity_changed(pool.pk)
    return quota


def quota_validate(*, pool: Pool, team: Group | None, gpu: int) -> None:
    if gpu < 0:
        raise ValidationFailedError([{"path": "gpu", "message": "must be 0 or more"}])
    others = TeamQuota.objects.filter(pool=pool).exclude(team=team).aggregate(total=Sum("gpu"))["total"] or 0
    quotas_total_validate(pool=pool, total=others + gpu)


def quotas_total_validate(*, pool: Pool, total: int) -> None:
    """The rule of docs/design.md §9: a pool's team quotas add up to at most its GPUs. A pool whose
    machines were removed after its quotas were set may have less: then a change that does not raise
    the total is accepted (lowering a quota, or saving the pool unchanged), one that raises it is not.
    The caller holds the pool's row lock (:func:`quotas_lock`), so that two writers cannot both pass it."""
    capacity = pool_gpu_capacity(pool) if pool.pk is not None else 0
    if total > capacity and (pool.pk is None or total > quotas_total(pool)):
        raise ValidationFailedError(
            [{"path": "gpu", "message": f"quotas in pool {pool.name} would add up to {total} GPUs; "
                                        f"the pool has {capacity}"}],
            f"Quotas in pool {pool.name} may add up to at most its {capacity} GPUs.",
        )


def quotas_total(pool: Pool) -> int:
    """The GPUs the pool's quotas add up to now."""
    return int(TeamQuota.objects.filter(pool=pool).aggregate(total=Sum("gpu"))["total"] or 0)


def quotas_lock(pool: Pool) -> None:
    """Serialise quota changes of ``pool`` until the transaction ends (its row lock)."""
    if pool.pk is not None:
        Pool.objects.select_for_update().filter(pk=pool.pk).first()


@transaction.atomic
def pool_status_set(*, pool: Pool, status: str) -> Pool:
    """Set the pool's status. Going ONLINE again lets the queue be placed at once."""
    if status not in PoolStatus.values:
        raise ValidationFailedError(
            [{"path": "status", "message": f"must be one of {', '.join(PoolStatus.values)}"}]
        )
    locked = Pool.objects.select_for_update().get(pk=pool.pk)
    if locked.status != status:
        locked.status = status
        locked.save(update_fields=["status", "updated_at"])
        if status == PoolStatus.ONLINE:
            pool_capacity_changed(locked.pk)
    return locked
