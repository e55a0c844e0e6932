"""Reads of the workflows app, shared by the API and the status pages."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db.models import (
    Case,
    Count,
    IntegerField,
    OuterRef,
    Prefetch,
    Q,
    QuerySet,
    Subquery,
    Sum,
    Value,
    When,
)
from django.db.models.functions import Coalesce

from osmo.types import Viewer
from scheduler.models import Pool, Reservation
from scheduler.selectors import label_text
from workflows.errors import WorkflowAmbiguousError, WorkflowNotFoundError
from workflows.holders import held_by
from workflows.labels import LabelMatch, label_rows_count
from workflows.labels import tag_names as tag_names  # re-exported: the pages read them here
from workflows.labels import workflows_with_labels as workflows_with_labels
from workflows.labels import workflows_with_tags as workflows_with_tags
from workflows.models import GROUP_JSON_JOINED, StatusTransition, Tag, Task, TaskGroup, Workflow
from workflows.spec.labels import SELECTORS_MAX as SELECTORS_MAX
from workflows.spec.labels import LabelSelector as LabelSelector
from workflows.spec.labels import SelectorError as SelectorError
from workflows.spec.labels import selector_parse as selector_parse
from workflows.visibility import workflow_owner_visible as workflow_owner_visible
from workflows.waiting import workflow_waiting as workflow_waiting  # re-exported: the pages read it here


def workflow_visible_to(user: Viewer) -> QuerySet[Workflow]:
    """Users see their own workflows; staff see all (the API's rule; the pages follow it, and
    :func:`workflow_owner_visible` is the same rule for a row already read, and
    :func:`workflow_count_by_label` for the label rows)."""
    queryset = Workflow.objects.all()
    if not user.is_staff:
        queryset = queryset.filter(submitted_by_id=user.pk)
    return queryset


def workflow_count_by_label(*, user: Viewer, match: LabelMatch) -> int | None:
    """How many of the workflows :func:`workflow_list` shows ``user`` one selector keeps, counted on the
    label rows alone (they carry the owner: the rule of :func:`workflow_visible_to`); ``None`` where
    that is not done (off PostgreSQL)."""
    return label_rows_count(match, owner_id=None if user.is_staff else user.pk)


def workflow_list(*, user: Viewer) -> QuerySet[Workflow]:
    """Workflows newest first, with their task count. The count is a correlated subquery, evaluated
    for the rows of the page only (a join-and-group would count every task of every listed workflow
    before the page is cut, and pagination's COUNT would repeat it: slow with deep queues)."""
    tasks = (
        Task.objects.filter(workflow=OuterRef("pk")).order_by().values("workflow").annotate(n=Count("pk")).values("n")
    )
    return (
        workflow_visible_to(user)
        .select_related("pool", "submitted_by")
        .defer("spec_text", "pool_keys")
        .annotate(task_count=Coalesce(Subquery(tasks, output_field=IntegerField()), 0))
        .order_by("-submitted_at", "-pk")
    )


def with_tags(queryset: QuerySet[Workflow]) -> QuerySet[Workflow]:
    """``queryset`` with each workflow's ``tags_in_order`` filled (one query for a page)."""
    tags = Prefetch("tags", queryset=Tag.objects.order_by("name"), to_attr="tags_in_order")
    return queryset.prefetch_related(tags)  # type: ignore[no-redef]  # (the to_attr, declared on the model)


def workflow_detail_queryset(*, user: Viewer) -> QuerySet[Workflow]:
    """Everything the workflow body needs, in a fixed number of queries: ``groups_in_order`` (each
    with ``tasks_in_order``) and ``history_in_order`` filled (a new submission fills them itself, from
    the rows it has just written: :func:`workflows.services.workflow_submit`)."""
    # (django-stubs types a ``to_attr`` as a new attribute; the models declare these, hence the ignores)
    tasks = Task.objects.select_related("node").order_by("position")
    groups = TaskGroup.objects.order_by("position").prefetch_related(
        Prefetch("tasks", queryset=tasks, to_attr="tasks_in_order"))  # type: ignore[no-redef]
    history = StatusTransition.objects.select_related("group", "task").defer(*GROUP_JSON_JOINED).order_by("at", "pk")
    return (
        workflow_visible_to(user)  # type: ignore[no-redef]
        .select_related("pool", "submitted_by", "team")
        .prefetch_related(
            Prefetch("groups", queryset=groups, to_attr="groups_in_order"),
            "pool__topology_keys",
            Prefetch("transitions", queryset=history, to_attr="history_in_order"),
            Prefetch("tags", queryset=Tag.objects.order_by("name"), to_attr="tags_in_order"),
        )
        .order_by("-submitted_at", "-pk")
    )


# How many owners an ambiguous id's refusal names at most.
AMBIGUOUS_OWNERS_SHOWN = 20


def workflow_by_id(queryset: QuerySet[Workflow], workflow_id: str, *, viewer: Viewer,
                   owner: str | None = None) -> Workflow:
    """The workflow of ``queryset`` (what ``viewer`` may see) with the id ``workflow_id``. Ids count
    per owner (docs/design.md §7, "Workflow ids"), so several visible workflows (staff see all) may
    share one: ``owner`` (a username, the ``?user=`` parameter) picks among them; without it the
    viewer's own comes first, and otherwise the id must be the only one of its kind. One query when
    it resolves, as a lookup by a unique column was. Raises ``WorkflowNotFoundError`` and
    ``WorkflowAmbiguousError`` (409, naming the owners)."""
    if "\x00" in workflow_id or (owner is not None and "\x00" in owner):
        raise WorkflowNotFoundError(f"Workflow {workflow_id!r} not found.")
    matches = queryset.filter(workflow_id=workflow_id)
    if owner:
        found = matches.filter(submitted_by__username=owner).first()
        if found is None:
            raise WorkflowNotFoundError(f"Workflow {workflow_id!r} of user {owner!r} not found.")
        return found
    mine = Case(When(submitted_by_id=viewer.pk, then=Value(0)), default=Value(1), output_field=IntegerField())
    candidates = list(matches.annotate(not_mine=mine).order_by("not_mine", "pk")[:2])
    if not candidates:
        raise WorkflowNotFoundError(f"Workflow {workflow_id!r} not found.")
    if len(candidates) == 1 or candidates[0].submitted_by_id == viewer.pk:
        return candidates[0]
    owners = list(matches.order_by("submitted_by__username")
                  .values_list("submitted_by__username", flat=True)[:AMBIGUOUS_OWNERS_SHOWN])
    raise WorkflowAmbiguousError(workflow_id, owners)


def task_domains(task: Task, pool_keys: list[tuple[str, str]]) -> dict[str, str]:
    """The task's node's value for every pool key (key -> label value), empty before placement."""
    if task.node is None:
        return {}
    labels = task.node.labels or {}
    return {key: labels[label] for key, label in pool_keys if label in labels}


def workflow_count_by_status(*, user: Viewer) -> dict[str, int]:
    """The workflows ``user`` sees, counted per status (one query; statuses without any are absent)."""
    rows = workflow_visible_to(user).order_by().values("status").annotate(count=Count("pk"))
    return {row["status"]: row["count"] for row in rows}


def pool_occupancy_by_workflow(*, pool: Pool, labels: Sequence[str]) -> list[dict[str, Any]]:
    """The pool's active reservations summed per workflow and per combination of the reserved nodes'
    values of ``labels`` (two queries). Rows: ``workflow_id``, ``owner_id``, ``owner_username``,
    ``domain_value_<i>`` for ``labels[i]`` (None when the node misses it), ``gpu_total``, ``task_count``.

    The reservations with their nodes' values, then their tasks' workflows and owners by task id,
    summed here: grouping on the holders' columns in SQL (:func:`workflows.holders.held_by`, three
    correlated subqueries per reservation) took ~45 ms for 1,500 reservations."""
    aliases = {f"domain_value_{index}": label_text(label, "node__labels") for index, label in enumerate(labels)}
    active = Reservation.objects.filter(pool=pool, released_at__isnull=True).order_by()
    reserved = list(active.annotate(**aliases).values_list("task_id", "gpu", *aliases))
    holders = {
        pk: (workflow_id, owner_id, username)
        for pk, workflow_id, owner_id, username in Task.objects.filter(pk__in=active.values("task_id"))
        .order_by()
        .values_list("pk", "workflow__workflow_id", "workflow__submitted_by_id", "workflow__submitted_by__username")
    }
    rows: dict[tuple[Any, ...], dict[str, Any]] = {}
    for task_id, gpu, *values in reserved:
        holder = holders.get(task_id, (None, None, None))
        row = rows.get((*values, *holder))
        if row is None:
            row = rows[(*values, *holder)] = {
                **dict(zip(aliases, values, strict=True)), "workflow_id": holder[0], "owner_id": holder[1],
                "owner_username": holder[2], "gpu_total": 0, "task_count": 0,
            }
        row["gpu_total"] += gpu
        row["task_count"] += 1
    return list(rows.values())


def group_waiting(group: TaskGroup) -> dict[str, Any] | None:
    """Why a queued gang waits, as people ask it (docs/design.md §11), in three queries: its place in
    the pool's queue and what is ahead of it per priority, and — when the solver named the best
    domain of the constraint that failed — the workflows holding capacity there. ``None`` unless
    the gang is SCHEDULING.

    Returns ``{"position": n, "ahead": {"HIGH": a, "NORMAL": b, "LOW": c}, "domain": {"key", "path"} |
    None, "holders": [{"workflow", "gpu", "tasks"}]}`` (holders largest first, at most 10)."""
    from workflows.choices import PRIORITY_RANK, Priority, TaskStatus

    if group.status != TaskStatus.SCHEDULING:
        return None
    workflow = group.workflow
    rank = PRIORITY_RANK.get(Priority(workflow.priority), 9)
    queued = TaskGroup.objects.filter(workflow__pool_id=workflow.pool_id, status=TaskStatus.SCHEDULING)
    before = Q(workflow__submitted_at__lt=workflow.submitted_at) | Q(
        workflow__submitted_at=workflow.submitted_at, workflow_id__lt=workflow.pk
    ) | Q(workflow_id=workflow.pk, position__lt=group.position)
    higher = [name for name, value in PRIORITY_RANK.items() if value < rank]
    ahead_rows = (
        queued.filter(Q(workflow__priority__in=higher) | (Q(workflow__priority=workflow.priority) & before))
        .order_by()
        .values("workflow__priority")
        .annotate(n=Count("pk"))
    )
    ahead = {str(name): 0 for name in PRIORITY_RANK}
    for row in ahead_rows:
        ahead[row["workflow__priority"]] = row["n"]
    result: dict[str, Any] = {"position": sum(ahead.values()) + 1, "ahead": ahead, "domain": None, "holders": []}
    detail = ((group.unschedulable_reason or {}).get("reason") or {})
    best = (detail.get("best_domain") or {}).get("path")
    key = detail.get("key")
    if best and key:
        keys = list(workflow.pool.topology_keys.order_by("position").values_list("key", "label"))
        labels = [label for _key, label in keys[: len(best)]]
        aliases = {f"domain_value_{i}": label_text(label, "node__labels") for i, label in enumerate(labels)}
        matches = (
            Reservation.objects.filter(pool_id=workflow.pool_id, released_at__isnull=True)
            .annotate(**aliases)
            .filter(**{alias: value for alias, value in zip(aliases, best, strict=False)})
        )
        holders = (
            matches.order_by()
            .values(workflow_key=held_by("workflow__workflow_id"), workflow_global=held_by("workflow__global_id"))
            .annotate(gpu=Sum("gpu"), tasks=Count("pk"))
            .order_by("-gpu", "workflow_key", "workflow_global")[:10]
        )
        result["domain"] = {"key": key, "path": list(best)}
        result["holders"] = [{"workflow": row["workflow_key"], "gpu": row["gpu"], "tasks": row["tasks"]}
                             for row in holders]
    return result

