"""Writing many rows in one statement, for the hot paths (placement cycle, pod sync).

:func:`bulk_set` writes different values to many rows: ``UPDATE t ... FROM (the rows' values) v``.
Django's ``bulk_update`` writes one ``CASE WHEN pk = ... THEN ...`` branch per row and field, and the
database evaluates every branch for every row: with a thousand rows (a placement cycle placing a
thousand gangs) that took seconds. A join against the values costs one lookup per row.

:func:`bulk_insert` inserts new rows as ``bulk_create`` does, without its per-object and per-field
steps (``pre_save`` and value preparation for every field of every object, the RETURNING of new
keys): for the history rows a pod sync or a cycle writes, those cost more than the statement.

Both work on PostgreSQL and on SQLite 3.33+ (the embedded default). On PostgreSQL the values travel
as one array per column, unpacked by ``unnest`` (as Django's own ``bulk_create`` does there since
5.2): the statement's text is the same whatever the number of rows, so psycopg converts it once per
process and prepares it on the server like any repeated query, instead of parsing a new text with a
placeholder per value on every call (a ``VALUES`` list: most of the client's CPU for a few hundred
rows). Elsewhere a ``VALUES`` list. On PostgreSQL, values of fields psycopg adapts as they are
(integers, text, booleans, floats, aware datetimes, and keys to integer primary keys) skip Django's
preparation, which only returns them unchanged there.
"""

from __future__ import annotations

import functools
from collections import namedtuple
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from django.db import connection
from django.db.models import (
    BooleanField,
    CharField,
    DateTimeField,
    Field,
    FloatField,
    ForeignKey,
    IntegerField,
    Model,
    TextField,
)
from django.utils import timezone

# Fields whose get_db_prep_save returns the value unchanged on PostgreSQL (with psycopg 3).
_AS_IS = (IntegerField, CharField, TextField, BooleanField, FloatField, DateTimeField)


def _prepared_as_is(field: Field[Any, Any]) -> bool:
    if connection.vendor != "postgresql":
        return False
    if isinstance(field, ForeignKey):
        return _prepared_as_is(field.target_field)
    return type(field).get_db_prep_save is Field.get_db_prep_save and isinstance(field, _AS_IS)


def ids_match(column: str, ids: Sequence[int]) -> tuple[str, list[Any]]:
    """SQL matching ``column`` (quoted by the caller) against ``ids``, and its parameters: ``= ANY(%s)``
    with one array on PostgreSQL (one statement text for any number of ids, prepared once),
    ``IN (%s, ...)`` elsewhere."""
    if connection.vendor == "postgresql":
        return f"{column} = ANY(%s)", [list(ids)]
    return f"{column} IN ({', '.join(['%s'] * len(ids))})", list(ids)


def _unnest(fields: Sequence[Field[Any, Any]]) -> str | None:
    """``unnest(%s::type[], ...)`` of these fields' columns on PostgreSQL; None elsewhere, or when a
    field's type is not one of the backend's own (an array or a custom type may not travel as an
    element of an array), as Django's ``bulk_create`` decides."""
    if connection.vendor != "postgresql":
        return None
    types = []
    for field in fields:
        target = field.target_field if isinstance(field, ForeignKey) else field
        if target.get_internal_type() not in connection.data_types:
            return None
        types.append(cast(str, field.db_type(connection)).split("(")[0])  # varchar[], not varchar(32)[]
    return "unnest(" + ", ".join(f"%s::{db_type}[]" for db_type in types) + ")"


@dataclass(frozen=True, slots=True)
class _Statement:
    """A bulk statement of one model and set of fields, built once per process and database vendor:
    its SQL (``unnest``: the rows go as one array per column; otherwise ``row_sql`` is repeated per
    row of a ``VALUES`` list) and each field's attribute name, whether its value goes as it is, and
    the field."""

    sql: str
    unnest: bool
    row_sql: str
    plain: tuple[tuple[str, bool, Field[Any, Any]], ...]


@functools.lru_cache(maxsize=128)
def _insert_statement(model: type[Model], returning: bool, vendor: str) -> _Statement:
    meta = model._meta
    fields = [f for f in meta.concrete_fields if not f.primary_key]
    table = connection.ops.quote_name(meta.db_table)
    names = ", ".join(connection.ops.quote_name(field.column) for field in fields)
    back = f" RETURNING {connection.ops.quote_name(meta.pk.column)}" if returning and meta.pk is not None else ""
    unnest = _unnest(fields)
    sql = (f"INSERT INTO {table} ({names}) SELECT * FROM {unnest}{back}" if unnest is not None
           else f"INSERT INTO {table} ({names}) VALUES {{rows}}{back}")
    return _Statement(sql, unnest is not None, "(" + ", ".join(["%s"] * len(fields)) + ")",
                      tuple((field.attname, _prepared_as_is(field), field) for field in fields))


@functools.lru_cache(maxsize=128)
def _update_statement(model: type[Model], fields: tuple[str, ...], guard: tuple[str, ...], returning: tuple[str, ...],
                      vendor: str) -> _Statement:
    meta = model._meta
    quote = connection.ops.quote_name
    pk = meta.pk
    assert pk is not None
    concrete = [cast("Field[Any, Any]", meta.get_field(name)) for name in fields]
    columns = [pk.column] + [f.column for f in concrete]
    table = quote(meta.db_table)
    names = ", ".join(quote(c) for c in columns)
    sets = ", ".join(f"{quote(c)} = v.{quote(c)}" for c in columns[1:])
    where = " AND ".join([f"{table}.{quote(pk.column)} = v.{quote(pk.column)}"]
                         + [f"{table}.{quote(cast('Field[Any, Any]', meta.get_field(name)).column)} = %s"
                            for name in guard])
    back = (" RETURNING " + ", ".join(f"{table}.{quote(cast('Field[Any, Any]', meta.get_field(name)).column)}"
                                      for name in returning)) if returning else ""
    unnest = _unnest([pk, *concrete])
    if unnest is not None:
        sql = f"UPDATE {table} SET {sets} FROM {unnest} AS v({names}) WHERE {where}{back}"
    else:  # a VALUES list, whose rows carry the columns' types on PostgreSQL (SQLite needs none)
        sql = f"WITH v({names}) AS (VALUES {{rows}}) UPDATE {table} SET {sets} FROM v WHERE {where}{back}"
    casts = [f"::{f.db_type(connection)}" if vendor == "postgresql" else "" for f in [pk, *concrete]]
    return _Statement(sql, unnest is not None, "(" + ", ".join(f"%s{cast}" for cast in casts) + ")",
                      ((pk.attname, True, pk),
                       *((field.attname, _prepared_as_is(field), field) for field in concrete)))


def _execute(cursor: Any, statement: _Statement, objects: Sequence[Model], extra: Sequence[Any] = ()) -> None:
    """Run ``statement`` for ``objects`` (``extra``: parameters after the rows' values)."""
    columns: list[list[Any]] = []
    for attname, as_is, field in statement.plain:
        values = [getattr(obj, attname) for obj in objects]
        columns.append(values if as_is else [field.get_db_prep_save(value, connection) for value in values])
    if statement.unnest:
        cursor.execute(statement.sql, [*columns, *extra])
        return
    params = [value for row in zip(*columns, strict=True) for value in row]
    cursor.execute(statement.sql.format(rows=", ".join([statement.row_sql] * len(objects))), [*params, *extra])


def bulk_insert(model: type[Model], objects: Sequence[Model], *, batch_size: int = 1000, keys: bool = False) -> None:
    """INSERT the unsaved ``objects`` of ``model`` (auto-incremented primary key, not set), one statement
    per batch. ``auto_now`` and ``auto_now_add`` fields get one time for the whole call. With ``keys``
    the new primary keys are read back (``RETURNING``, in the order of the rows, as ``bulk_create``
    relies on) and set on the objects, which then count as saved; otherwise they stay unset."""
    if not objects:
        return
    statement = _insert_statement(model, keys, connection.vendor)
    now = timezone.now()
    for _attname, _as_is, field in statement.plain:
        if isinstance(field, DateTimeField) and (field.auto_now or field.auto_now_add):
            for obj in objects:
                setattr(obj, field.attname, now)
    with connection.cursor() as cursor:
        for start in range(0, len(objects), batch_size):
            batch = objects[start:start + batch_size]
            _execute(cursor, statement, batch)
            if keys:
                for obj, (pk,) in zip(batch, cursor.fetchall(), strict=True):
                    obj.pk = pk
                    obj._state.adding = False
                    obj._state.db = connection.alias


def bulk_set(model: type[Model], objects: Sequence[Model], fields: Sequence[str], *, batch_size: int = 1000,
             only_if: Mapping[str, Any] | None = None, returning: Sequence[str] = ()) -> list[Any]:
    """Write ``fields`` of ``objects`` (saved instances of ``model``) to their rows; with ``only_if``
    (field name -> value) only to the rows that hold those values when written. With ``returning``
    (field names), returns a named tuple of those fields for each row written (in no set order),
    read as the statement wrote it; otherwise an empty list."""
    if not objects:
        return []
    guard = tuple((only_if or {}).items())
    statement = _update_statement(model, tuple(fields), tuple(name for name, _value in guard), tuple(returning),
                                  connection.vendor)
    row = _row_type(model, tuple(returning)) if returning else None
    written: list[Any] = []
    with connection.cursor() as cursor:
        for start in range(0, len(objects), batch_size):
            _execute(cursor, statement, objects[start:start + batch_size], [value for _name, value in guard])
            if row is not None:
                written += map(row._make, cursor.fetchall())
    return written


@functools.lru_cache(maxsize=64)
def _row_type(model: type[Model], fields: tuple[str, ...]) -> Any:
    """The named tuple of these fields of ``model``'s rows (one class per process)."""
    return namedtuple(f"{model.__name__}Row", fields)
