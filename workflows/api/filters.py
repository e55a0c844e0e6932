from datetime import datetime, time
from typing import Any

import django_filters
from django import forms
from django.db.models import QuerySet
from django.utils import timezone
from django_filters.constants import EMPTY_VALUES
from django_filters.rest_framework import DjangoFilterBackend
from django_filters.widgets import QueryArrayWidget
from drf_spectacular.utils import extend_schema_field

from osmo.types import Viewer
from workflows import selectors
from workflows.choices import Priority, WorkflowStatus
from workflows.labels import LabelMatch, label_matches, workflows_matching, workflows_with_tags
from workflows.models import Workflow
from workflows.spec.labels import SELECTORS_MAX, SelectorError, label_key_problem, selector_parse


def refused(message: str) -> forms.ValidationError:
    """A filter value's refusal whose words may hold the value itself: django-filter formats a message with
    its params (``message % params``), so the words go in as a param, never as the format."""
    return forms.ValidationError("%(message)s", params={"message": message})


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
                raise refused(f"{item[:80]!r}: {exc}") from exc
        return selectors


class NamesField(forms.Field):
    widget = QueryArrayWidget

    def to_python(self, value: Any) -> list[str]:
        items = [str(item) for item in (value or []) if str(item)]
        if len(items) > SELECTORS_MAX:
            raise forms.ValidationError(f"at most {SELECTORS_MAX} tags")
        return items


class LabelKeysField(forms.Field):
    """Repeated label keys, each of Kubernetes label key syntax."""

    widget = QueryArrayWidget

    def to_python(self, value: Any) -> list[str]:
        items = [str(item) for item in (value or []) if str(item)]
        if len(items) > SELECTORS_MAX:
            raise forms.ValidationError(f"at most {SELECTORS_MAX} label keys")
        for item in items:
            problem = label_key_problem(item)
            if problem:
                raise refused(problem)
        return items


class AnyOfField(forms.Field):
    """Repeated names (``?pool=a&pool=b``), at most :data:`ANY_OF_MAX`, none holding a NUL character."""

    widget = QueryArrayWidget

    def to_python(self, value: Any) -> list[str]:
        items = [str(item) for item in (value or []) if str(item)]
        if len(items) > ANY_OF_MAX or any("\x00" in item for item in items):
            raise forms.ValidationError(f"at most {ANY_OF_MAX} names, none with a NUL character")
        return items


ANY_OF_MAX = 100


@extend_schema_field({"type": "array", "items": {"type": "string"}})
class AnyOfFilter(django_filters.Filter):
    """A repeatable name (``?pool=a&pool=b``): the workflows with any of them."""

    field_class = AnyOfField

    def filter(self, qs: QuerySet[Workflow], value: Any) -> QuerySet[Workflow]:
        return qs.filter(**{f"{self.field_name}__in": value}) if value else qs


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


@extend_schema_field({"type": "array", "items": {"type": "string"}})
class NoLabelFilter(django_filters.Filter):
    """``?no_label=KEY`` (repeat: every key must be absent): workflows without that label."""

    field_class = LabelKeysField

    def filter(self, qs: QuerySet[Workflow], value: Any) -> QuerySet[Workflow]:
        for key in value or []:
            qs = qs.exclude(labels__has_key=key)
        return qs


class DayField(forms.DateField):
    """A day; given empty (``?submitted_before=``) it is refused, as the schema's ``date`` format says."""

    def clean(self, value: Any) -> Any:
        if value == "":
            raise forms.ValidationError("a day (YYYY-MM-DD), not an empty value")
        return super().clean(value)


class DayFilter(django_filters.DateFilter):
    """A day (``YYYY-MM-DD``) compared with a moment from its start in the service's time zone (``lookup_expr``
    ``gte``: on or after the day; ``lt``: before it)."""

    field_class = DayField

    def filter(self, qs: QuerySet[Workflow], value: Any) -> QuerySet[Workflow]:
        if not value:
            return qs
        start = timezone.make_aware(datetime.combine(value, time.min))
        return qs.filter(**{f"{self.field_name}__{self.lookup_expr}": start})


class AppField(forms.Field):
    """``NAME`` or ``NAME:VERSION`` of an app."""

    def to_python(self, value: Any) -> tuple[str, int | None] | None:
        text = str(value or "").strip()
        if not text:
            return None
        name, sep, version = text.partition(":")
        if not name or "\x00" in name or (sep and not (version.isdigit() and len(version) <= 9)):
            raise refused(f"{text[:80]!r}: write NAME or NAME:VERSION (a version number)")
        return name, int(version) if sep else None


@extend_schema_field(str)
class AppFilter(django_filters.Filter):
    """``?app=NAME`` (``NAME:VERSION``): workflows started from that app (the name it had then)."""

    field_class = AppField

    def filter(self, qs: QuerySet[Workflow], value: Any) -> QuerySet[Workflow]:
        if not value:
            return qs
        name, version = value
        qs = qs.filter(app_name=name)
        return qs if version is None else qs.filter(app_version=version)


class WorkflowFilterSet(django_filters.FilterSet):
    # distinct=False: status is a column of the workflow itself (no join can repeat a row), and a
    # DISTINCT over every column made the first page of a deep queue cost two full sorts.
    status = django_filters.MultipleChoiceFilter(choices=WorkflowStatus.choices, distinct=False)
    pool = AnyOfFilter(field_name="pool__name", help_text="A pool name; repeat for any of several.")
    user = AnyOfFilter(field_name="submitted_by__username", help_text="A submitter; repeat for any of several.")
    name = django_filters.CharFilter(field_name="name", lookup_expr="icontains")
    label = LabelSelectorFilter(help_text="KEY=SELECTOR: an exact value, * wildcards or (a|b) alternatives, "
                                          "e.g. project=sim_* or team=(a|b); repeat to require all.")
    no_label = NoLabelFilter(help_text="A label key the workflow does not have; repeat to require all absent.")
    tag = TagFilter(help_text="A tag name; repeat to require all.")
    priority = django_filters.MultipleChoiceFilter(choices=Priority.choices, distinct=False)
    submitted_after = DayFilter(field_name="submitted_at", lookup_expr="gte",
                                help_text="Submitted on or after this day (YYYY-MM-DD).")
    submitted_before = DayFilter(field_name="submitted_at", lookup_expr="lt",
                                 help_text="Submitted before this day (YYYY-MM-DD).")
    app = AppFilter(help_text="Started from this app: NAME, or NAME:VERSION.")

    class Meta:
        model = Workflow
        fields = ["status", "pool", "user", "name", "label", "no_label", "tag", "priority", "submitted_after",
                  "submitted_before", "app"]

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
