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

from collections.abc import Sequence
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


def _columns(objects: Sequence[Model], plain: Sequence[tuple[str, bool, Field[Any, Any]]]) -> list[list[Any]]:
    """One list of prepared values per field (``plain``: attribute name, whether the value goes as it
    is, the field), in the order of ``objects``."""
    columns: list[list[Any]] = []
    for attname, as_is, field in plain:
        values = [getattr(obj, attname) for obj in objects]
        columns.append(values if as_is else [field.get_db_prep_save(value, connection) for value in values])
    return columns


def bulk_insert(model: type[Model], objects: Sequence[Model], *, batch_size: int = 1000, keys: bool = False) -> None:
    """INSERT the unsaved ``objects`` of ``model`` (auto-incremented primary key, not set), one statement
    per batch. ``auto_now`` and ``auto_now_add`` fields get one time for the whole call. With ``keys``
    the new primary keys are read back (``RETURNING``, in the order of the rows, as ``bulk_create``
    relies on) and set on the objects, which then count as saved; otherwise they stay unset."""
    if not objects:
        return
    meta = model._meta
    fields = [f for f in meta.concrete_fields if not f.primary_key]
    now = timezone.now()
    for field in fields:
        if isinstance(field, DateTimeField) and (field.auto_now or field.auto_now_add):
            for obj in objects:
                setattr(obj, field.attname, now)
    plain = [(field.attname, _prepared_as_is(field), field) for field in fields]
    table = connection.ops.quote_name(meta.db_table)
    names = ", ".join(connection.ops.quote_name(field.column) for field in fields)
    row_sql = "(" + ", ".join(["%s"] * len(fields)) + ")"
    unnest = _unnest(fields)
    returning = f" RETURNING {connection.ops.quote_name(meta.pk.column)}" if keys and meta.pk is not None else ""
    with connection.cursor() as cursor:
        for start in range(0, len(objects), batch_size):
            batch = objects[start:start + batch_size]
            columns = _columns(batch, plain)
            if unnest is not None:
                cursor.execute(f"INSERT INTO {table} ({names}) SELECT * FROM {unnest}{returning}", columns)
            else:
                params = [value for row in zip(*columns, strict=True) for value in row]
                cursor.execute(f"INSERT INTO {table} ({names}) VALUES {', '.join([row_sql] * len(batch))}{returning}",
                               params)
            if returning:
                for obj, (pk,) in zip(batch, cursor.fetchall(), strict=True):
                    obj.pk = pk
                    obj._state.adding = False
                    obj._state.db = connection.alias


def bulk_set(model: type[Model], objects: Sequence[Model], fields: Sequence[str], *, batch_size: int = 1000) -> None:
    """Write ``fields`` of ``objects`` (saved instances of ``model``) to their rows."""
    if not objects:
        return
    meta = model._meta
    concrete = [cast("Field[Any, Any]", meta.get_field(name)) for name in fields]
    pk = meta.pk
    assert pk is not None
    columns = [pk.column] + [f.column for f in concrete]
    table = connection.ops.quote_name(meta.db_table)
    names = ", ".join(connection.ops.quote_name(c) for c in columns)
    sets = ", ".join(f"{connection.ops.quote_name(c)} = v.{connection.ops.quote_name(c)}" for c in columns[1:])
    where = f"{table}.{connection.ops.quote_name(pk.column)} = v.{connection.ops.quote_name(pk.column)}"
    plain = [(pk.attname, True, pk)] + [(field.attname, _prepared_as_is(field), field) for field in concrete]
    unnest = _unnest([pk, *concrete])
    # Without arrays: a VALUES list whose first row carries the columns' types (SQLite needs none).
    casts = [f"::{f.db_type(connection)}" if connection.vendor == "postgresql" else "" for f in [pk, *concrete]]
    row_sql = "(" + ", ".join(f"%s{cast}" for cast in casts) + ")"
    with connection.cursor() as cursor:
        for start in range(0, len(objects), batch_size):
            batch = objects[start:start + batch_size]
            values = _columns(batch, plain)
            if unnest is not None:
                cursor.execute(f"UPDATE {table} SET {sets} FROM {unnest} AS v({names}) WHERE {where}", values)
                continue
            params = [value for row in zip(*values, strict=True) for value in row]
            rows = ", ".join([row_sql] * len(batch))
            cursor.execute(f"WITH v({names}) AS (VALUES {rows}) UPDATE {table} SET {sets} FROM v WHERE {where}",
                           params)
