"""The pool epochs that tell the placement cycle when capacity may have grown (docs/design.md §8).
Reservations themselves are written by the workflows' lifecycle only
(:mod:`workflows.lifecycle.reservations`), which moves the epochs through :func:`pool_epochs_bump`."""

from __future__ import annotations

from collections.abc import Iterable

from django.dispatch import Signal

from scheduler import sql
from scheduler.models import PoolEpoch

#: Sent with ``pool_id`` when a pool's inventory changed, once its epochs moved on. The workflows app
#: receives it and asks for the pool's placement cycle (:mod:`workflows.receivers`): the scheduler app
#: says what changed and does not know who places on it.
capacity_changed = Signal()


def pool_epochs_bump(pool_ids: Iterable[int], *, inventory: bool = False) -> None:
    """Move the pools' capacity epoch on (and the inventory epoch, for inventory changes), so queued
    gangs proven unschedulable before are solved again. One upsert per pool, in pool order
    (:func:`scheduler.sql.pool_epochs_bump`); takes only the epoch row's lock, never the pool row's,
    so it never waits for a running placement cycle."""
    sql.pool_epochs_bump(sorted(set(pool_ids)), inventory=inventory)


def pool_epochs(pool_id: int) -> tuple[int, int]:
    """(capacity epoch, inventory epoch) of the pool; (0, 0) before anything moved them."""
    row = PoolEpoch.objects.filter(pool_id=pool_id).values_list("capacity_epoch", "inventory_epoch").first()
    return (row[0], row[1]) if row is not None else (0, 0)


def pool_capacity_changed(pool_id: int) -> None:
    """The pool's inventory changed (nodes added, resized, uncordoned, keys changed): what waits in its
    queue may fit now. Moves both epochs on and says so (:data:`capacity_changed`: the workflows app
    asks for a placement cycle once committed)."""
    pool_epochs_bump([pool_id], inventory=True)
    capacity_changed.send(sender=PoolEpoch, pool_id=pool_id)
