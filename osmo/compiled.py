"""ORM queries compiled to SQL once per process, then run with each call's values.

Django turns a QuerySet into SQL every time it runs one. For the short reads of the hot paths (a
submission's, a placement cycle's) that costs 0.5-1.3 ms of CPU each, several times what PostgreSQL
spends answering them (docs/benchmarks.md, "Compiled queries"). :class:`CompiledQuery` keeps the
query written with the ORM: it builds it once with stand-in values, keeps the SQL and where the
stand-ins landed among the parameters, and from then on only substitutes the call's values, runs
the SQL and turns the rows into what the QuerySet gives (model instances with their annotations,
``values_list`` tuples or ``values`` dicts) through the compiler's own converters. The one library
that did this (``django-prepared-queries``) stopped at Django 2.1.

A query is compiled only if every stand-in reached the parameters unchanged, as a parameter of its
own; otherwise (a list for ``__in``, a value the ORM rewrites such as ``__contains``, a database
whose adapter converts the type) the query runs through the ORM every time, as written, and
:meth:`CompiledQuery.compiled` says so (the tests pin which queries must compile on PostgreSQL).
``select_related`` and ``prefetch_related`` are not supported (refused when built).

A parameter declared ``list`` (of ints) is given to ``__in`` as a list: on PostgreSQL the compiled SQL
reads ``= ANY(%s)`` with the list as one array parameter, so one statement serves every length (and
is prepared once); an empty list returns nothing without a query, as the ORM does. Elsewhere such a
query runs through the ORM.

Usage::

    _POOL_BY_NAME = CompiledQuery(lambda name: Pool.objects.filter(name=name), name=str)
    pool = _POOL_BY_NAME.first(name="nvl72")
"""

from __future__ import annotations

import datetime
import itertools
import logging
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import QuerySet
from django.db.models.query import FlatValuesListIterable, ModelIterable, ValuesIterable, ValuesListIterable

logger = logging.getLogger(__name__)

_counter = itertools.count(1)


def _stand_in(kind: type) -> Any:
    """A value of ``kind`` that no real call passes and no query contains by itself."""
    index = next(_counter)
    if kind is list:
        return [_stand_in(int)]
    if kind is int:
        return -7_306_942_000_000_000 - index * 7_919
    if kind is str:
        return f"osmo-compiled-{index}-{uuid.uuid4().hex}"
    if kind is datetime.datetime:
        return datetime.datetime(1901, 2, 3, 4, 5, 6, index % 1_000_000, tzinfo=datetime.UTC)
    raise TypeError(f"a compiled query's parameter must be int, str, datetime or list, not {kind.__name__}")


def _any_arrays(sql: str, lists: list[str | None]) -> str | None:
    """``sql`` with each ``IN (%s)`` whose placeholder is a list parameter's (``lists``: per placeholder,
    the list parameter's name or None) written ``= ANY(%s)``; None if such a placeholder is not alone
    in an ``IN (...)``."""
    pieces = sql.split("%s")
    if len(pieces) != len(lists) + 1 or "%%" in sql:
        return None
    out = [pieces[0]]
    for index, name in enumerate(lists):
        before, after = out[-1], pieces[index + 1]
        if name is not None:
            if not (before.endswith(" IN (") and after.startswith(")")):
                return None
            out[-1] = before[: -len(" IN (")] + " = ANY("
        out.append("%s")
        out.append(after)
    return "".join(out)


@dataclass(frozen=True)
class _Plan:
    """One query compiled for one database: its SQL, the parameters (a name where a call's value goes,
    else the constant), and how rows become results."""

    sql: str
    params: tuple[tuple[str | None, Any], ...]
    shape: str  # "model", "tuples", "flat", "dicts"
    converters: tuple[tuple[int, tuple[Any, ...], Any], ...]
    col_count: int
    model: Any = None
    init_list: tuple[str, ...] = ()
    model_slice: slice = field(default_factory=lambda: slice(0))
    annotations: tuple[tuple[str, int], ...] = ()
    names: tuple[str, ...] = ()


class CompiledQuery:
    """A query built by ``build(**values)`` (returning a QuerySet), compiled once per database.

    ``parameters`` name each argument of ``build`` with its type (int, str or datetime). Read it with
    :meth:`all` (a list) or :meth:`first` (the first result or None); order, slices and the shape
    (``values_list``, ``values``, ``only``) are part of what ``build`` returns."""

    def __init__(self, build: Callable[..., QuerySet[Any]], **parameters: type) -> None:
        self.build = build
        self.parameters = parameters
        self._plans: dict[str, _Plan | None] = {}
        self._lock = threading.Lock()

    def compiled(self, using: str = DEFAULT_DB_ALIAS) -> bool:
        """Whether this query runs from its cached SQL on database ``using`` (compiling it now)."""
        return self._plan(using) is not None

    def all(self, using: str = DEFAULT_DB_ALIAS, **values: Any) -> list[Any]:
        if set(values) != set(self.parameters):
            raise TypeError(f"expected the parameters {sorted(self.parameters)}, got {sorted(values)}")
        if any(kind is list and not values[name] for name, kind in self.parameters.items()):
            return []  # ``__in`` an empty list: nothing, and no query (the ORM's answer too)
        plan = self._plan(using)
        if plan is None:
            return list(self.build(**values).using(using))
        return self._run(plan, using, values)

    def first(self, using: str = DEFAULT_DB_ALIAS, **values: Any) -> Any:
        rows = self.all(using, **values)
        return rows[0] if rows else None

    # -- compiling ---------------------------------------------------------------------------------
    def _plan(self, using: str) -> _Plan | None:
        if using not in self._plans:
            with self._lock:
                if using not in self._plans:
                    self._plans[using] = self._compile(using)
        return self._plans[using]

    def _compile(self, using: str) -> _Plan | None:
        stand_ins = {name: _stand_in(kind) for name, kind in self.parameters.items()}
        queryset = self.build(**stand_ins).using(using)
        query = queryset.query
        if query.select_related or queryset._prefetch_related_lookups:  # type: ignore[attr-defined]
            raise TypeError("a compiled query cannot select_related or prefetch_related")
        compiler = query.get_compiler(using=using)
        sql, raw_params = compiler.as_sql()
        lists = {name for name, kind in self.parameters.items() if kind is list}
        if lists:
            if connections[using].vendor != "postgresql":
                self._refused(using, "list parameters need PostgreSQL")
                return None
            sql = _any_arrays(sql, [next((n for n in lists if value == stand_ins[n][0]), None)
                                    for value in raw_params])
            if sql is None:
                self._refused(using, "a list parameter did not reach the SQL as IN (%s)")
                return None
            stand_ins = {n: (s[0] if n in lists else s) for n, s in stand_ins.items()}
        params: list[tuple[str | None, Any]] = []
        seen: set[str] = set()
        for value in raw_params:
            name = next((n for n, s in stand_ins.items() if type(value) is type(s) and value == s), None)
            if name is None and isinstance(value, str) and any(
                    isinstance(s, str) and s in value for s in stand_ins.values()):
                name = "?"  # a stand-in rewritten by the ORM (LIKE patterns): not compilable
            if name == "?":
                self._refused(using, "a parameter was rewritten")
                return None
            params.append((name, None) if name else (None, value))
            if name:
                seen.add(name)
        if seen != set(self.parameters):
            self._refused(using, f"parameters {sorted(set(self.parameters) - seen)} did not reach the SQL as given")
            return None
        select = compiler.select[: compiler.col_count]
        converters = tuple((pos, tuple(convs), expression)
                           for pos, (convs, expression) in compiler.get_converters([s[0] for s in select]).items())
        iterable = queryset._iterable_class
        common = {"sql": sql, "params": tuple(params), "converters": converters, "col_count": compiler.col_count}
        if iterable is ModelIterable:
            klass_info = compiler.klass_info
            fields = klass_info["select_fields"]
            start, end = fields[0], fields[-1] + 1
            return _Plan(shape="model", model=klass_info["model"],
                         init_list=tuple(f[0].target.attname for f in compiler.select[start:end]),
                         model_slice=slice(start, end),
                         annotations=tuple((compiler.annotation_col_map or {}).items()), **common)
        if iterable is ValuesListIterable:
            return _Plan(shape="tuples", **common)
        if iterable is FlatValuesListIterable:
            return _Plan(shape="flat", **common)
        if iterable is ValuesIterable:
            names = (*query.extra_select, *query.values_select, *query.annotation_select)
            return _Plan(shape="dicts", names=names, **common)
        raise TypeError(f"a compiled query cannot return {iterable.__name__} results")

    def _refused(self, using: str, why: str) -> None:
        code = getattr(self.build, "__code__", None)
        where = f"{self.build.__module__}:{code.co_firstlineno}" if code is not None else repr(self.build)
        logger.info("compiled_query.refused", extra={"database": using, "reason": why, "query": where})

    # -- running -----------------------------------------------------------------------------------
    def _run(self, plan: _Plan, using: str, values: dict[str, Any]) -> list[Any]:
        connection = connections[using]
        params = [values[name] if name is not None else constant for name, constant in plan.params]
        with connection.cursor() as cursor:
            cursor.execute(plan.sql, params)
            rows = cursor.fetchall()
        if plan.converters or (rows and len(rows[0]) != plan.col_count):
            rows = [self._converted(row[: plan.col_count], plan, connection) for row in rows]
        if plan.shape == "model":
            results = []
            for row in rows:
                obj = plan.model.from_db(using, plan.init_list, row[plan.model_slice])
                for attr, pos in plan.annotations:
                    setattr(obj, attr, row[pos])
                results.append(obj)
            return results
        if plan.shape == "tuples":
            return [tuple(row) for row in rows]
        if plan.shape == "flat":
            return [row[0] for row in rows]
        return [dict(zip(plan.names, row, strict=True)) for row in rows]

    @staticmethod
    def _converted(row: Any, plan: _Plan, connection: Any) -> list[Any]:
        values = list(row)
        for pos, convs, expression in plan.converters:
            value = values[pos]
            for converter in convs:
                value = converter(value, expression, connection)
            values[pos] = value
        return values
