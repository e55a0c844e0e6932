"""Filters of ``GET /api/pools/{name}/nodes/``.

``label`` and ``topology`` take comma-separated ``name=value`` terms (label values cannot contain
commas), at most :data:`MAX_TERMS` each. ``topology`` uses the pool's key names (``zone=z1,rack=r01``);
``label`` uses raw label keys (``topology.kubernetes.io/zone=z1``); a term without ``=`` asks for the
label to be present.
"""

from __future__ import annotations

from django.db.models import Q, QuerySet
from django_filters import rest_framework as filters
from rest_framework.exceptions import ValidationError

from scheduler.models import Node
from scheduler.selectors import label_text


class CharCSVFilter(filters.BaseCSVFilter, filters.CharFilter):
    pass


class StrictBooleanFilter(filters.BooleanFilter):
    """``true`` or ``false``; any other value is a 400 naming the parameter (django-filter's own
    BooleanFilter ignores it, so ``?schedulable=null`` listed every node)."""

    def filter(self, qs: QuerySet[Node], value: bool | None) -> QuerySet[Node]:
        raw = self.parent.data.get(self.field_name) if self.parent is not None else None
        if raw not in (None, "") and value is None:
            raise ValidationError({self.field_name: [f"must be true or false, not {str(raw)[:40]!r}"]})
        return super().filter(qs, value)


#: Each term is one more condition on the node's labels: 4,000 of them (an 8 KB query string) made an
#: expression SQLite refuses as too deep, after 2 s of CPU building it. A pool has at most 32 keys.
MAX_TERMS = 32


def _terms(values: list[str], name: str) -> list[tuple[str, str | None]]:
    if len(values) > MAX_TERMS:
        raise ValidationError({name: [f"at most {MAX_TERMS} comma-separated terms, not {len(values)}"]})
    terms = []
    for term in values:
        term = term.strip()
        if not term:
            continue
        label, sep, value = term.partition("=")
        if not label:
            raise ValidationError({name: [f"{term!r}: expected name=value"]})
        terms.append((label, value if sep else None))
    return terms


def _filter_labels(queryset: QuerySet[Node], terms: list[tuple[str, str | None]]) -> QuerySet[Node]:
    for index, (label, value) in enumerate(terms):
        alias = f"label_filter_{index}"
        queryset = queryset.alias(**{alias: label_text(label)})
        condition: dict[str, object] = {f"{alias}__isnull": False} if value is None else {alias: value}
        queryset = queryset.filter(**condition)
    return queryset


class NodeFilter(filters.FilterSet):
    search = filters.CharFilter(method="filter_search", help_text="Substring of the node name or of a label value.")
    schedulable = StrictBooleanFilter(help_text="true: only schedulable nodes; false: only cordoned ones.")
    label = CharCSVFilter(method="filter_label", help_text="label=value[,label2=value2]: all must match.")
    topology = CharCSVFilter(
        method="filter_topology", help_text="key=value[,key2=value2] with the pool's key names, e.g. zone=z1,rack=r01."
    )

    class Meta:
        model = Node
        fields = ["search", "schedulable", "label", "topology"]

    def filter_search(self, queryset: QuerySet[Node], name: str, value: str) -> QuerySet[Node]:
        value = value.strip()
        if not value:
            return queryset
        return queryset.filter(Q(name__icontains=value) | Q(labels__icontains=value))

    def filter_label(self, queryset: QuerySet[Node], name: str, value: list[str]) -> QuerySet[Node]:
        return _filter_labels(queryset, _terms(value, name))

    def filter_topology(self, queryset: QuerySet[Node], name: str, value: list[str]) -> QuerySet[Node]:
        keys = {key.key: key.label for key in self.request.parser_context["view"].pool_keys}
        terms = []
        for key, key_value in _terms(value, name):
            if key not in keys:
                known = ", ".join(keys) or "none"
                raise ValidationError({name: [f"{key!r} is not a topology key of this pool (keys: {known})"]})
            terms.append((keys[key], key_value))
        return _filter_labels(queryset, terms)
