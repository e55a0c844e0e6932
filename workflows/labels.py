"""Workflow labels and tags with the database: the admin's label policy, the label rows that listings
select by, the tags an admin defines and users put on their workflows (docs/design.md §7, "Labels and
tags"). The pure half (syntax, selectors, the policy's rules) is :mod:`workflows.spec.labels`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from django.db import connection, transaction
from django.db.models import Exists, OuterRef, Q, QuerySet

from osmo.bulk import bulk_insert
from osmo.types import User
from workflows import sql
from workflows.errors import TagUnknownError, WorkflowTagForbiddenError
from workflows.models import LabelPolicySetting, LabelValue, Tag, Workflow, WorkflowLabel
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
    """The rows a listing's ``?label=`` finds ``workflow`` by (in the submission's transaction), each with
    the workflow's owner, and the values not seen before (in one order, so that concurrent submissions
    wait on each other's new values rather than deadlock)."""
    if labels:
        bulk_insert(WorkflowLabel, [WorkflowLabel(workflow=workflow, submitted_by_id=workflow.submitted_by_id,
                                                  key=key, value=value) for key, value in labels.items()])
        LabelValue.objects.bulk_create([LabelValue(key=key, value=value) for key, value in sorted(labels.items())],
                                       ignore_conflicts=True)


def _glob_regex(pattern: str) -> str:
    """An anchored regular expression for a selector's glob (PostgreSQL reads its fixed prefix off
    the key-and-value index)."""
    return "^" + ".*".join(re.escape(part) for part in pattern.split("*")) + "$"


def _prefix_only(pattern: str) -> bool:
    """A glob whose one ``*`` ends it (``sim_*``): every value from its prefix on matches."""
    return pattern.find("*") == len(pattern) - 1


def _value_condition(selector: LabelSelector) -> Q:
    """The label rows whose value matches one of the selector's patterns (any value for ``*``): a prefix
    wildcard as ``LIKE 'prefix%'``, any other as a regular expression, each reading its fixed prefix's
    range of the label indexes."""
    if "*" in selector.patterns:
        return Q()
    condition = Q(value__in=selector.literals) if selector.literals else Q(pk__in=[])
    for pattern in selector.globs:
        prefix_only = _prefix_only(pattern)
        condition |= Q(value__startswith=pattern[:-1]) if prefix_only else Q(value__regex=_glob_regex(pattern))
    return condition


#: A wildcard matching at most this many distinct values is selected as those values (containment).
GLOB_VALUES_MAX = 256

#: At most this many distinct values of a key are read to find the ones a wildcard matches.
GLOB_WALK_MAX = 2048


def _glob_values(key: str, globs: Sequence[str]) -> list[str] | None:
    """The distinct values of ``key`` that any of ``globs`` matches, read off the key's known values
    (:class:`workflows.models.LabelValue`) in each glob's fixed prefix's range of their index, rather
    than off the label rows; ``None`` when they are more than :data:`GLOB_VALUES_MAX` or a glob's range
    holds :data:`GLOB_WALK_MAX` values or more. A prefix wildcard reads at most one value past
    :data:`GLOB_VALUES_MAX`, as each of them matches."""
    found: dict[str, None] = {}
    for pattern in globs:
        prefix = pattern.split("*", 1)[0]
        walk = GLOB_VALUES_MAX + 1 if _prefix_only(pattern) else GLOB_WALK_MAX
        known = LabelValue.objects.filter(key=key, value__startswith=prefix) if prefix else \
            LabelValue.objects.filter(key=key)
        walked = list(known.order_by().values_list("value", flat=True)[:walk])  # (any order: all, or too many)
        if len(walked) >= walk:
            return None
        matches = re.compile(_glob_regex(pattern), re.DOTALL).match
        found.update(dict.fromkeys(sorted(value for value in walked if matches(value))))
        if len(found) > GLOB_VALUES_MAX:
            return None
    return list(found)


#: A selector of known values that at most this many workflows have selects them by their keys.
FEW_WORKFLOWS_MAX = 256


@dataclass(frozen=True, slots=True)
class LabelMatch:
    """A selector with the distinct values it matches when they are few enough to select by
    (``values``; ``None``: many, or any value, or not looked up off PostgreSQL), and the workflows
    having them when they are few (``workflows``, their keys, of every owner; else ``None``)."""

    selector: LabelSelector
    values: tuple[str, ...] | None
    workflows: tuple[int, ...] | None = None


def label_matches(selectors: Sequence[LabelSelector]) -> list[LabelMatch]:
    """Each selector with the values it matches: its exact values, and on PostgreSQL those its wildcards
    match (:func:`_glob_values`), up to :data:`GLOB_VALUES_MAX` in all; then the workflows having them,
    read off the label rows' (key, value, workflow) index, when at most :data:`FEW_WORKFLOWS_MAX`."""
    matches = []
    for selector in selectors:
        values: list[str] | None = None
        if connection.vendor == "postgresql" and "*" not in selector.patterns:
            values = list(selector.literals)
            if selector.globs:
                globbed = _glob_values(selector.key, selector.globs)
                values = None if globbed is None else list(dict.fromkeys([*values, *globbed]))
            if values is not None and len(values) > GLOB_VALUES_MAX:
                values = None
        if values is None:
            matches.append(LabelMatch(selector, None))
            continue
        having = WorkflowLabel.objects.filter(key=selector.key, value__in=values).order_by()
        workflows = list(having.values_list("workflow_id", flat=True)[:FEW_WORKFLOWS_MAX + 1])
        matches.append(LabelMatch(selector, tuple(values),
                                  tuple(workflows) if len(workflows) <= FEW_WORKFLOWS_MAX else None))
    return matches


def _match_condition(match: LabelMatch) -> Q | Exists:
    """The workflows a selector keeps. On PostgreSQL, a selector that few workflows match selects them
    by their keys (the planner cannot tell how few a containment finds: it walked 8,786 workflows
    newest first for 220); other exact values (and ``KEY=*``) are containment on the ``labels`` JSONB
    column's GIN index (a bitmap of the matches, counted without a join), and so are the values a
    wildcard matches when :func:`label_matches` found them; a wildcard matching more values is a
    semi-join on the label rows with the pattern (a page newest first probes each workflow's row of the
    key; on SQLite, every selector)."""
    selector = match.selector
    if match.workflows is not None:
        return Q(pk__in=match.workflows)
    if connection.vendor == "postgresql" and "*" in selector.patterns:
        return Q(labels__has_key=selector.key)
    if match.values is None:
        return Exists(WorkflowLabel.objects.filter(_value_condition(selector), workflow=OuterRef("pk"),
                                                   key=selector.key))
    condition = Q(pk__in=[])
    for value in match.values:
        condition |= Q(labels__contains={selector.key: value})
    return condition


def workflows_matching(queryset: QuerySet[Workflow], matches: Sequence[LabelMatch]) -> QuerySet[Workflow]:
    """The workflows of ``queryset`` matching every selector looked up (:func:`_match_condition`)."""
    for match in matches:
        queryset = queryset.filter(_match_condition(match))
    return queryset


def workflows_with_labels(queryset: QuerySet[Workflow], selectors: Sequence[LabelSelector]) -> QuerySet[Workflow]:
    """The workflows of ``queryset`` matching every selector (:func:`label_matches`, :func:`workflows_matching`)."""
    return workflows_matching(queryset, label_matches(selectors))


def _disjoint_patterns(selector: LabelSelector) -> bool:
    """Whether no value can match two of the selector's patterns (told by their fixed prefixes): its
    rows are then the sum of each pattern's."""
    prefixes = [pattern.split("*", 1)[0] for pattern in selector.globs]
    if any(a != b and b.startswith(a) for a in prefixes for b in prefixes) or len(set(prefixes)) < len(prefixes):
        return False
    return not any(literal.startswith(prefix) for literal in selector.literals for prefix in prefixes)


def _pattern_range(pattern: str) -> sql.ValueRange:
    """A wildcard as the label index's range of its fixed prefix, and the regular expression the rest of
    it asks for (``None`` when the prefix says it all)."""
    return sql.ValueRange(prefix=pattern.split("*", 1)[0],
                          regex=None if _prefix_only(pattern) else _glob_regex(pattern))


def label_rows_count(match: LabelMatch, *, owner_id: int | None) -> int | None:
    """How many workflows (of the user ``owner_id``; of everyone for ``None``) one selector keeps, counted
    on the label rows alone: a workflow has at most one row per key, and the rows carry its owner, so
    the (owner, key, value) index (or, for everyone, the (key, value) one) answers without reading the
    workflows: the values found, else each pattern's range of the index (an index-only scan of each,
    their counts added up, when no value can match two patterns). ``None`` off PostgreSQL."""
    if connection.vendor != "postgresql":
        return None
    selector = match.selector
    branches: list[sql.RowsBranch]
    if match.values is not None:
        branches = [sql.RowsBranch(values=tuple(match.values))]
    elif "*" in selector.patterns:
        branches = [sql.RowsBranch()]
    else:
        literals = [sql.RowsBranch(values=tuple(selector.literals))] if selector.literals else []
        ranges = tuple(_pattern_range(pattern) for pattern in selector.globs)
        if _disjoint_patterns(selector):
            branches = [*literals, *(sql.RowsBranch(ranges=(each,)) for each in ranges)]
        else:
            branches = [sql.RowsBranch(values=tuple(selector.literals) if selector.literals else None,
                                       ranges=ranges)]
    return sql.label_rows_count(selector.key, owner_id=owner_id, branches=branches)


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
