"""The workflows app's SQL that the ORM cannot say, one function per statement, each with the reason:
PostgreSQL's advisory locks, an UPDATE that returns the rows it wrote, the dispatch's record of its pods
(a hot path's UPDATE the query compiler cost more than) and the label rows' counts in the index's operator
class. Everything else of the app reads and writes through the ORM (``tests/test_architecture.py``
fails on raw SQL outside the apps' ``sql`` modules, ``osmo/bulk.py`` and ``osmo/beat.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from django.db import connection
from django.db.models import Field

from osmo.bulk import ids_match
from scheduler.models import Reservation
from workflows.models import Task, WorkflowLabel


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


def tasks_dispatched_record(task_ids: Sequence[int], at: datetime, *, statuses: Sequence[str]) -> int:
    """Set ``dispatched_at`` on those of these tasks that are in ``statuses`` and not recorded yet; how many
    were. One ``UPDATE`` on the dispatch's path, once per gang. Raw: the same statement through the ORM's
    ``update()`` cost 0.25–0.3 ms more CPU per gang in ``bench.dispatch_profile`` (its query compiler), more
    than the statement itself (docs/benchmarks-log.md, "The reshaped middle, second step")."""
    quote = connection.ops.quote_name
    column = {name: quote(cast("Field[Any, Any]", Task._meta.get_field(name)).column)
              for name in ("id", "dispatched_at", "status")}
    match, params = ids_match(column["id"], task_ids)
    marks = ", ".join(["%s"] * len(statuses))
    sql = (f"UPDATE {quote(Task._meta.db_table)} SET {column['dispatched_at']} = %s "
           f"WHERE {match} AND {column['status']} IN ({marks}) AND {column['dispatched_at']} IS NULL")
    with connection.cursor() as cursor:
        cursor.execute(sql, [connection.ops.adapt_datetimefield_value(at), *params, *statuses])
        return cursor.rowcount


@dataclass(frozen=True)
class ValueRange:
    """Label values from ``prefix`` on (the label index's range of it), matching ``regex`` when given."""

    prefix: str
    regex: str | None = None


@dataclass(frozen=True)
class RowsBranch:
    """Label rows whose value is one of ``values`` or in one of ``ranges``; every row of the key when
    neither is given."""

    values: tuple[str, ...] | None = None
    ranges: tuple[ValueRange, ...] = ()


def _range_condition(each: ValueRange) -> tuple[str, list[Any]]:
    # the pattern operator class's own operators: a LIKE is rechecked on every row read, which cost as
    # much as reading them; label values are ASCII: the range ends at the prefix's successor
    conditions: list[str] = []
    params: list[Any] = []
    if each.prefix:
        conditions.append('"value" ~>=~ %s AND "value" ~<~ %s')
        params += [each.prefix, each.prefix[:-1] + chr(ord(each.prefix[-1]) + 1)]
    if each.regex is not None:
        conditions.append('"value" ~ %s')
        params.append(each.regex)
    return " AND ".join(conditions) or "TRUE", params


def label_rows_count(key: str, *, owner_id: int | None, branches: Sequence[RowsBranch]) -> int:
    """The label rows of ``key`` (of the user ``owner_id``'s workflows; everyone's for ``None``) in each
    branch, added up: one statement of one index-only scan per branch. Raw: the ORM says one branch as a
    ``count()`` (one query each) but neither a sum of counts in one statement nor the range in the
    pattern operator class's operators (``~>=~``, ``~<~``), which the (key, value) index is built with.
    PostgreSQL only."""
    parts: list[tuple[str, list[Any]]] = []
    for branch in branches:
        conditions = [('"value" = ANY(%s)', [list(branch.values)])] if branch.values is not None else []
        conditions += [_range_condition(each) for each in branch.ranges]
        parts.append((" OR ".join(f"({condition})" for condition, _ in conditions) or "TRUE",
                      [param for _, params in conditions for param in params]))
    rows = '"key" = %s' if owner_id is None else '"submitted_by_id" = %s AND "key" = %s'
    rows_params: list[Any] = [key] if owner_id is None else [owner_id, key]
    table = connection.ops.quote_name(WorkflowLabel._meta.db_table)
    statement = " + ".join(f"(SELECT count(*) FROM {table} WHERE {rows} AND ({condition}))" for condition, _ in parts)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {statement}", [param for _, params in parts for param in (*rows_params, *params)])
        return int(cursor.fetchone()[0])
