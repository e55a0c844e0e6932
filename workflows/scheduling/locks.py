"""The one lock order of every writer of a workflow's groups and tasks (placement cycle, pod sync,
cancel, backend failures): the pool's advisory lock, then the pool row, then the affected Workflow
rows in primary-key order; rows are re-read after that, so nothing decided rests on a row another
writer changed meanwhile. Two writers that follow it never deadlock."""

from __future__ import annotations

import zlib
from collections.abc import Iterable

from django.db import connection

from workflows import sql
from workflows.models import Workflow

# Neither the spec's text nor its JSON fields are read by a writer of status (they load when read).
_UNREAD = ("spec_text", "template_values", "labels", "pool_keys")

PLACEMENT_LOCK = zlib.crc32(b"osmo.placement") & 0x7FFFFFFF
SYNC_LOCK = 0x05170001


def pool_lock_try(pool_id: int, namespace: int = PLACEMENT_LOCK) -> bool:
    """Take the pool's transaction-scoped lock; False when another holder has it."""
    if connection.vendor != "postgresql":
        return True  # SQLite: the IMMEDIATE transaction holds the database write lock already
    return sql.advisory_xact_lock_try(namespace, pool_id)


def workflows_lock(workflow_ids: Iterable[int]) -> dict[int, Workflow]:
    """Lock these workflows' rows in primary-key order and return them by id."""
    ids = sorted(set(workflow_ids))
    if not ids:
        return {}
    return {w.pk: w for w in Workflow.objects.select_for_update().filter(pk__in=ids).defer(*_UNREAD).order_by("pk")}
