"""Capacity reservations (docs/design.md §8): the lifecycle's writes of the scheduler's
:class:`~scheduler.models.Reservation` rows, and the only ones. A task's requests are held on its
node from placement (:func:`reservations_create`) until it ends (:func:`reservations_release`) or its
gang is preempted and queued again (:func:`reservations_drop`). Releasing moves the pools' capacity
epoch on (:func:`scheduler.services.reservations.pool_epochs_bump`), so queued gangs proven
unschedulable are solved again."""

from __future__ import annotations

from collections.abc import Iterable

from django.utils import timezone

from scheduler.models import Reservation
from scheduler.services.reservation_rows import ReservationFacts, reservations_insert
from scheduler.services.reservations import pool_epochs_bump
from workflows import sql


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
    pools = sql.reservations_release_returning(ids, timezone.now())  # one UPDATE ... RETURNING
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
