"""Capacity reservations (docs/design.md §8): the lifecycle's writes of the scheduler's
:class:`~scheduler.models.Reservation` rows, and the only ones. A task's requests are held on its
node from placement (:func:`reservations_create`) until it ends (:func:`reservations_release`) or its
gang is preempted and queued again (:func:`reservations_drop`). Releasing moves the pools' capacity
epoch on (:func:`scheduler.services.reservations.pool_epochs_bump`), so queued gangs proven
unschedulable are solved again."""

from __future__ import annotations

from collections.abc import Iterable

from django.db import connection
from django.utils import timezone

from osmo.bulk import ids_match
from scheduler.models import Reservation
from scheduler.services.reservation_rows import ReservationFacts, reservations_insert
from scheduler.services.reservations import pool_epochs_bump


def reservations_create(reservations: list[ReservationFacts]) -> None:
    """Hold placed tasks' requests on their nodes, with the facts the cluster side keeps of their
    holders (one bulk insert)."""
    reservations_insert(reservations)


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
