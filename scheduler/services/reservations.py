"""Capacity reservations and the pool epochs that tell the placement cycle when capacity may have
grown (docs/design.md §8). A task's requests are held on its node from placement until it ends."""

from __future__ import annotations

from collections.abc import Iterable

from django.db import connection
from django.utils import timezone

from osmo.bulk import ids_match
from osmo.compiled import CompiledQuery
from scheduler import jobs
from scheduler.models import PoolEpoch, Reservation


def reservations_release(*, task_ids: Iterable[int]) -> int:
    """Release the active reservations of these tasks (idempotent) and move their pools' capacity
    epoch on. Returns how many were released."""
    ids = list(task_ids)
    if not ids:
        return 0
    # One UPDATE ... RETURNING, written as SQL (the ORM's update returns no rows); SQLite has
    # RETURNING since 3.35.
    table = Reservation._meta.db_table
    where, params = ids_match("task_id", ids)
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {table} SET released_at = %s WHERE {where} AND released_at IS NULL RETURNING pool_id",
                       [connection.ops.adapt_datetimefield_value(timezone.now()), *params])
        pools = [pool_id for (pool_id,) in cursor.fetchall()]
    if pools:
        pool_epochs_bump(pools)
    return len(pools)


def reservations_drop(*, task_ids: Iterable[int]) -> int:
    """Release these tasks' reservations (moving the epoch on) and delete them: a task queued again
    (its gang was preempted) gets a new one when it is placed. Returns how many were active."""
    ids = list(task_ids)
    released = reservations_release(task_ids=ids)
    Reservation.objects.filter(task_id__in=ids).delete()
    return released


def pool_epochs_bump(pool_ids: Iterable[int], *, inventory: bool = False) -> None:
    """Move the pools' capacity epoch on (and the inventory epoch, for inventory changes), so queued
    gangs proven unschedulable before are solved again. One upsert per pool; takes only the epoch
    row's lock, never the pool row's, so it never waits for a running placement cycle."""
    table = PoolEpoch._meta.db_table
    sql = (
        f"INSERT INTO {table} (pool_id, capacity_epoch, inventory_epoch) VALUES (%s, 1, %s) "
        f"ON CONFLICT (pool_id) DO UPDATE SET capacity_epoch = {table}.capacity_epoch + 1, "
        f"inventory_epoch = {table}.inventory_epoch + excluded.inventory_epoch"
    )
    with connection.cursor() as cursor:
        for pool_id in sorted(set(pool_ids)):
            cursor.execute(sql, [pool_id, 1 if inventory else 0])


_EPOCHS = CompiledQuery(
    lambda pool_id: PoolEpoch.objects.filter(pool_id=pool_id).values_list("capacity_epoch", "inventory_epoch")
    .order_by("pool_id")[:1], pool_id=int)


def pool_epochs(pool_id: int) -> tuple[int, int]:
    """(capacity epoch, inventory epoch) of the pool; (0, 0) before anything moved them."""
    row: tuple[int, int] | None = _EPOCHS.first(pool_id=pool_id)
    return row if row is not None else (0, 0)


def pool_capacity_changed(pool_id: int) -> None:
    """The pool's inventory changed (nodes added, resized, uncordoned, keys changed): what waits in its
    queue may fit now. Moves both epochs on and asks for a placement cycle once committed."""
    pool_epochs_bump([pool_id], inventory=True)
    jobs.placement_cycle_request(pool_id)
