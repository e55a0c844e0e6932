from typing import Any

import django_filters
from django import forms
from django.db.models import QuerySet
from django_filters.constants import EMPTY_VALUES
from django_filters.rest_framework import DjangoFilterBackend
from django_filters.widgets import QueryArrayWidget
from drf_spectacular.utils import extend_schema_field

from osmo.types import Viewer
from workflows import selectors
from workflows.choices import WorkflowStatus
from workflows.labels import LabelMatch, label_matches, workflows_matching, workflows_with_tags
from workflows.models import Workflow
from workflows.spec.labels import SELECTORS_MAX, SelectorError, selector_parse


class SelectorsField(forms.Field):
    """Repeated ``KEY=SELECTOR`` values, each parsed (a form error saying which one and why)."""

    widget = QueryArrayWidget

    def to_python(self, value: Any) -> list[Any]:
        items = [str(item) for item in (value or []) if str(item)]
        if len(items) > SELECTORS_MAX:
            raise forms.ValidationError(f"at most {SELECTORS_MAX} label selectors")
        selectors = []
        for item in items:
            try:
                selectors.append(selector_parse(item))
            except SelectorError as exc:
                raise forms.ValidationError(f"{item[:80]!r}: {exc}") from exc
        return selectors


class NamesField(forms.Field):
    widget = QueryArrayWidget

    def to_python(self, value: Any) -> list[str]:
        items = [str(item) for item in (value or []) if str(item)]
        if len(items) > SELECTORS_MAX:
            raise forms.ValidationError(f"at most {SELECTORS_MAX} tags")
        return items


@extend_schema_field({"type": "array", "items": {"type": "string"}})
class LabelSelectorFilter(django_filters.Filter):
    """``?label=KEY=SELECTOR`` (repeat: all must match): OSMO's exact values, ``*`` wildcards, ``(a|b)``."""

    field_class = SelectorsField
    matches: list[LabelMatch] = []  # the selectors given, looked up (each filter set filters with a copy)

    def filter(self, qs: QuerySet[Workflow], value: Any) -> QuerySet[Workflow]:
        if not value:
            return qs
        self.matches = label_matches(value)
        return workflows_matching(qs, self.matches)


@extend_schema_field({"type": "array", "items": {"type": "string"}})
class TagFilter(django_filters.Filter):
    """``?tag=NAME`` (repeat: all must be on the workflow)."""

    field_class = NamesField

    def filter(self, qs: QuerySet[Workflow], value: Any) -> QuerySet[Workflow]:
        return workflows_with_tags(qs, value) if value else qs


class WorkflowFilterSet(django_filters.FilterSet):
    # distinct=False: status is a column of the workflow itself (no join can repeat a row), and a
    # DISTINCT over every column made the first page of a deep queue cost two full sorts.
    status = django_filters.MultipleChoiceFilter(choices=WorkflowStatus.choices, distinct=False)
    pool = django_filters.CharFilter(field_name="pool__name")
    user = django_filters.CharFilter(field_name="submitted_by__username")
    name = django_filters.CharFilter(field_name="name", lookup_expr="icontains")
    label = LabelSelectorFilter(help_text="KEY=SELECTOR: an exact value, * wildcards or (a|b) alternatives, "
                                          "e.g. project=sim_* or team=(a|b); repeat to require all.")
    tag = TagFilter(help_text="A tag name; repeat to require all.")

    class Meta:
        model = Workflow
        fields = ["status", "pool", "user", "name", "label", "tag"]

    def count_by_label(self, user: Viewer) -> int | None:
        """When the only filter given is one label selector, the filtered list's count read off the label
        rows alone (``workflows.selectors.workflow_count_by_label``: the filter set's queryset is
        ``workflow_list(user)``), else ``None``. After filtering (it reuses the selector's lookup)."""
        given = [name for name, value in self.form.cleaned_data.items() if value not in EMPTY_VALUES]
        matches = self.filters["label"].matches
        if given != ["label"] or len(matches) != 1:
            return None
        return selectors.workflow_count_by_label(user=user, match=matches[0])


class FilterSetKeepingBackend(DjangoFilterBackend):
    """django-filter's backend that leaves the filter set it filtered with on the view (``view.filterset``),
    so that the view can answer its list's count from what the filters found."""

    def get_filterset(self, request: Any, queryset: QuerySet[Any], view: Any) -> Any:
        filterset = super().get_filterset(request, queryset, view)
        view.filterset = filterset
        return filterset
