"""Reading rows into typed records by name: :func:`named_rows` reads a queryset's ``.values()`` into a
``NamedTuple``, each field from the column its ``columns`` map names (the field's own name when not
mapped), so a record's fields and the query's columns are matched by name, never by position."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, TypeVar

from django.db.models import QuerySet


class _Record(Protocol):
    _fields: tuple[str, ...]


R = TypeVar("R", bound=_Record)


def named_rows(queryset: QuerySet[Any], record: type[R], columns: Mapping[str, str] | None = None) -> list[R]:
    """The queryset's rows as ``record`` instances in one query: field ``name`` is read from column
    ``columns[name]`` (a lookup such as ``"workflow__pool_id"``), or from the column ``name``."""
    lookups = {name: (columns or {}).get(name, name) for name in record._fields}
    unknown = set(columns or ()) - set(lookups)
    if unknown:
        raise ValueError(f"columns name no field of {record.__name__}: {sorted(unknown)}")
    return [record(**{name: values[lookup] for name, lookup in lookups.items()})
            for values in queryset.values(*lookups.values())]
