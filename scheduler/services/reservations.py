"""Capacity reservations: a task's requests held on its node from placement until the task ends."""

from __future__ import annotations

from collections.abc import Iterable

from django.utils import timezone

from scheduler.models import Reservation


def reservations_release(*, task_ids: Iterable[int]) -> int:
    """Release the active reservations of these tasks (idempotent). Returns how many were released."""
    ids = list(task_ids)
    if not ids:
        return 0
    return Reservation.objects.filter(task_id__in=ids, released_at__isnull=True).update(released_at=timezone.now())
