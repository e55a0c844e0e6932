"""The workflows app's SQL that the ORM cannot say, one function per statement, each with the reason:
PostgreSQL's advisory locks, an UPDATE that returns the rows it wrote, and a recursive walk over an
index. Everything else of the app reads and writes through the ORM (``tests/test_architecture.py``
fails on raw SQL outside the apps' ``sql`` modules, ``osmo/bulk.py`` and ``osmo/beat.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from django.db import connection

from osmo.bulk import ids_match
from scheduler.models import Reservation
from workflows.models import WorkflowLabel


def advisory_xact_lock_try(namespace: int, key: int) -> bool:
    """Take the transaction-scoped advisory lock ``(namespace, key)`` unless another transaction holds
    it; True when taken. Raw: the ORM has no advisory locks (``select_for_update`` locks rows).
    PostgreSQL only."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_xact_lock(%s, %s)", [namespace, key])
        return bool(cursor.fetchone()[0])


def advisory_xact_lock(namespace: int, key: int) -> None:
    """Wait for and take the transaction-scoped advisory lock ``(namespace, key)``. Raw: the ORM has
    no advisory locks, and a lock on a key that is not a row (an owner's workflow name before its
    first row exists) cannot be a row lock. PostgreSQL only."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [namespace, key])


def reservations_release_returning(task_ids: Sequence[int], at: datetime) -> list[int]:
    """Set ``released_at`` on the active reservations of these tasks and return the pool of each row
    released (one per row). One ``UPDATE ... RETURNING``. Raw: the ORM's ``update()`` returns a count,
    not the rows; reading the pools first is a second query, and a release by a concurrent
    transaction between the two would count its pools twice. SQLite has RETURNING since 3.35."""
    table = Reservation._meta.db_table
    where, params = ids_match("task_id", task_ids)
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {table} SET released_at = %s WHERE {where} AND released_at IS NULL RETURNING pool_id",
                       [connection.ops.adapt_datetimefield_value(at), *params])
        return [pool_id for (pool_id,) in cursor.fetchall()]


# The distinct values of a key from a prefix on, one index probe each (a "loose index scan": PostgreSQL
# has no skip scan), in the order of the label index's pattern operator class; it stops at the first
# value past the prefix or after ``limit`` of them.
_LABEL_VALUES_WALK = """
WITH RECURSIVE walk(value, n) AS (
  (SELECT value, 1 FROM {table} WHERE key = %(key)s AND value ~>=~ %(prefix)s ORDER BY value USING ~<~ LIMIT 1)
  UNION ALL
  SELECT (SELECT l.value FROM {table} l WHERE l.key = %(key)s AND l.value ~>~ walk.value
          ORDER BY l.value USING ~<~ LIMIT 1), walk.n + 1
  FROM walk WHERE walk.value IS NOT NULL AND starts_with(walk.value, %(prefix)s) AND walk.n < %(walk)s
)
SELECT value FROM walk WHERE value IS NOT NULL AND starts_with(value, %(prefix)s)
"""


def label_values_walk(key: str, prefix: str, limit: int) -> list[str]:
    """The distinct values of label ``key`` that start with ``prefix``, up to ``limit`` of them, in
    the order of the label index's pattern operator class: one index probe per value. Raw: a
    recursive query (the ORM has no ``WITH RECURSIVE``) and ordering by an operator class
    (``USING ~<~``), which the ORM cannot say; ``distinct()`` reads every row of the key instead.
    PostgreSQL only."""
    table = connection.ops.quote_name(WorkflowLabel._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(_LABEL_VALUES_WALK.format(table=table), {"key": key, "prefix": prefix, "walk": limit})
        return [row[0] for row in cursor.fetchall()]
