"""Workflow labels and tags with the database: the admin's label policy, the label rows that listings
select by, the tags an admin defines and users put on their workflows (docs/design.md §7, "Labels and
tags"). The pure half (syntax, selectors, the policy's rules) is :mod:`workflows.spec.labels`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from django.db import connection, transaction
from django.db.models import Exists, OuterRef, Q, QuerySet

from osmo.bulk import bulk_insert
from osmo.types import User
from workflows import sql
from workflows.errors import TagUnknownError, WorkflowTagForbiddenError
from workflows.models import LabelPolicySetting, Tag, Workflow, WorkflowLabel
from workflows.spec.labels import LabelPolicy, LabelSelector


def policy_from_row(row: LabelPolicySetting | None) -> LabelPolicy:
    """The policy an admin wrote as the pure value (the defaults when there is none)."""
    if row is None:
        return LabelPolicy()
    metric = row.metric_values if isinstance(row.metric_values, dict) else {}
    return LabelPolicy(
        allowed_keys=tuple(str(key) for key in row.allowed_keys or ()),
        required_keys=tuple(str(key) for key in row.required_keys or ()),
        max_labels=row.max_labels,
        pod_label_keys=tuple(str(key) for key in (row.pod_label_keys or ())),
        pod_label_prefix=row.pod_label_prefix,
        metric_values=tuple((str(key), tuple(str(v) for v in values or ())) for key, values in sorted(metric.items())),
    )


def label_policy() -> LabelPolicy:
    """The admin's label policy (one query)."""
    return policy_from_row(LabelPolicySetting.objects.order_by("pk").first())


def label_rows_write(workflow: Workflow, labels: Mapping[str, str]) -> None:
    """The rows a listing's ``?label=`` finds ``workflow`` by (in the submission's transaction)."""
    if labels:
        bulk_insert(WorkflowLabel, [WorkflowLabel(workflow=workflow, key=key, value=value)
                                    for key, value in labels.items()])


def _glob_regex(pattern: str) -> str:
    """An anchored regular expression for a selector's glob (PostgreSQL reads its fixed prefix off
    the key-and-value index)."""
    return "^" + ".*".join(re.escape(part) for part in pattern.split("*")) + "$"


def _value_condition(selector: LabelSelector) -> Q:
    """The label rows whose value matches one of the selector's patterns (any value for ``*``)."""
    if "*" in selector.patterns:
        return Q()
    condition = Q(value__in=selector.literals) if selector.literals else Q(pk__in=[])
    for pattern in selector.globs:
        condition |= Q(value__regex=_glob_regex(pattern))
    return condition


#: A wildcard matching at most this many distinct values is selected as those values (containment).
GLOB_VALUES_MAX = 256

#: At most this many distinct values of a key are stepped through to find the ones a wildcard matches.
GLOB_WALK_MAX = 2048

def _glob_values(key: str, globs: Sequence[str]) -> list[str] | None:
    """The distinct values of ``key`` that any of ``globs`` matches, read by stepping through the key's
    distinct values on the label index (from each glob's fixed prefix on), rather than reading every
    row of the key; ``None`` when a glob's range holds more than :data:`GLOB_WALK_MAX` distinct values."""
    found: dict[str, None] = {}
    for pattern in globs:
        walked = sql.label_values_walk(key, pattern.split("*", 1)[0], GLOB_WALK_MAX)
        if len(walked) >= GLOB_WALK_MAX:
            return None
        matches = re.compile(_glob_regex(pattern), re.DOTALL).match
        found.update(dict.fromkeys(value for value in walked if matches(value)))
    return list(found)


def _selector_condition(selector: LabelSelector) -> Q | Exists:
    """The workflows a selector keeps. On PostgreSQL, exact values (and ``KEY=*``) are containment on the
    ``labels`` JSONB column's GIN index (a bitmap of the matches, counted without a join); a wildcard
    is first turned into the values it matches (:func:`_glob_values`, off the label rows' (key, value,
    workflow) index) and selected the same way when there are at most :data:`GLOB_VALUES_MAX`; else it
    is a semi-join on the label rows with those values (and with the pattern itself when the wildcard's
    range holds too many distinct values, and on SQLite)."""
    semi_join = Exists(WorkflowLabel.objects.filter(_value_condition(selector), workflow=OuterRef("pk"),
                                                    key=selector.key))
    if connection.vendor != "postgresql":
        return semi_join
    if "*" in selector.patterns:
        return Q(labels__has_key=selector.key)
    values = list(selector.literals)
    if selector.globs:
        globbed = _glob_values(selector.key, selector.globs)
        if globbed is None:
            return semi_join
        values = list(dict.fromkeys([*values, *globbed]))
        if len(values) > GLOB_VALUES_MAX:  # the semi-join on the values found: a hashed list, no regex per row
            return Exists(WorkflowLabel.objects.filter(workflow=OuterRef("pk"), key=selector.key, value__in=values))
    condition = Q(pk__in=[])
    for value in values:
        condition |= Q(labels__contains={selector.key: value})
    return condition


def workflows_with_labels(queryset: QuerySet[Workflow], selectors: Sequence[LabelSelector]) -> QuerySet[Workflow]:
    """The workflows of ``queryset`` matching every selector (:func:`_selector_condition`)."""
    for selector in selectors:
        queryset = queryset.filter(_selector_condition(selector))
    return queryset


def workflows_with_tags(queryset: QuerySet[Workflow], names: Iterable[str]) -> QuerySet[Workflow]:
    """The workflows of ``queryset`` carrying every tag of ``names``."""
    through = Workflow.tags.through
    for name in names:
        queryset = queryset.filter(Exists(through.objects.filter(workflow=OuterRef("pk"), tag__name=name)))
    return queryset


def tag_names() -> list[str]:
    """The tags an admin defined, by name (the ones one may put on a workflow)."""
    return list(Tag.objects.order_by("name").values_list("name", flat=True))


def tags_known(names: Iterable[str], *, field: str) -> list[Tag]:
    """The tags named, each defined by an admin; raises ``TagUnknownError`` naming ``field`` otherwise."""
    wanted = list(dict.fromkeys(names))
    tags = {tag.name: tag for tag in Tag.objects.filter(name__in=wanted)}
    unknown = [name for name in wanted if name not in tags]
    if unknown:
        raise TagUnknownError(field, unknown, list(Tag.objects.values_list("name", flat=True)))
    return [tags[name] for name in wanted]


@transaction.atomic
def workflow_tag(*, workflow: Workflow, user: User, add: Sequence[str], remove: Sequence[str]) -> list[str]:
    """Remove then add tags on ``workflow`` (OSMO's order); only its owner or staff may. Every name is
    checked before anything changes. Returns the workflow's tags after."""
    if workflow.submitted_by_id != user.pk and not user.is_staff:
        raise WorkflowTagForbiddenError(workflow.workflow_id)
    removed = tags_known(remove, field="remove")
    added = tags_known(add, field="add")
    if removed:
        workflow.tags.remove(*removed)
    if added:
        workflow.tags.add(*added)
    return sorted(workflow.tags.values_list("name", flat=True))
