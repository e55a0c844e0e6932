"""The workflow list (filters, sorting) and the workflow page: groups with their tasks, constraint
trees and reports, why a group waits, the status history, and the placement map.

The placement map is the pool's domain tree (:mod:`scheduler.reads.domains`) around this workflow's tasks,
in two queries whatever the pool's size (three once a task is placed): the domains its tasks touch
are expanded down to their nodes, with its tasks highlighted and other usage shaded; untouched
siblings are drawn small, or counted past :data:`COMPACT_SIBLING_LIMIT`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db.models import Q, QuerySet

from osmo.types import Viewer
from pages.viewmodels.common import status_colour
from pages.viewmodels.domains import DomainBox, DomainKey, domain_boxes, merge_chains
from parsing.natural import natural_sorted
from scheduler.models import TopologyKey
from scheduler.reads.domains import pool_domain_tree
from scheduler.selectors import pool_keys
from workflows.choices import TASK_ACTIVE_STATUSES, WORKFLOW_TERMINAL_STATUSES
from workflows.models import StatusTransition, Task, TaskGroup, Workflow
from workflows.selectors import (
    LabelSelector,
    task_domains,
    with_tags,
    workflow_list,
    workflow_waiting,
    workflows_with_labels,
    workflows_with_tags,
)

COMPACT_SIBLING_LIMIT = 12  # untouched siblings drawn as small boxes up to this many, else counted
HISTORY_LIMIT = 500

# Sortable columns of the workflow list: URL name -> ORM field.
WORKFLOW_SORTS: dict[str, str] = {
    "id": "workflow_id",
    "name": "name",
    "pool": "pool__name",
    "status": "status",
    "priority": "priority",
    "user": "submitted_by__username",
    "submitted": "submitted_at",
    "tasks": "task_count",
}


# ------------------------------------------------------------------------------------------------
# Workflow list
# ------------------------------------------------------------------------------------------------
def workflow_page_list(
    *, user: Viewer, status: str = "", pool: str = "", username: str = "", name: str = "", sort: str = "",
    labels: Sequence[LabelSelector] = (), tag: str = "",
) -> QuerySet[Workflow]:
    """The visible workflows filtered and sorted for the list page. ``status`` "FAILED" means any failure."""
    queryset = with_tags(workflow_list(user=user))
    if status == "FAILED":
        queryset = queryset.filter(status__startswith="FAILED")
    elif status == "ACTIVE":
        queryset = queryset.exclude(status__in=WORKFLOW_TERMINAL_STATUSES)
    elif status:
        queryset = queryset.filter(status=status)
    if pool:
        queryset = queryset.filter(pool__name=pool)
    if username:
        queryset = queryset.filter(submitted_by__username=username)
    if name:
        queryset = queryset.filter(Q(name__icontains=name) | Q(workflow_id__icontains=name))
    queryset = workflows_with_labels(queryset, labels)
    if tag:
        queryset = workflows_with_tags(queryset, [tag])
    field_name = WORKFLOW_SORTS.get(sort.lstrip("-"))
    if field_name:
        prefix = "-" if sort.startswith("-") else ""
        queryset = queryset.order_by(f"{prefix}{field_name}", "-pk")
    return queryset


# ------------------------------------------------------------------------------------------------
# Workflow page
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class TaskRow:
    task: Task
    domains: dict[str, str]  # key -> the task's node's value, empty before placement


@dataclass(frozen=True, slots=True)
class GroupRow:
    group: TaskGroup
    tasks: list[TaskRow]
    task_info: dict[str, dict[str, str]]  # task name -> status, node, colour (the tree's leaves)
    report: list[dict[str, Any]]
    preferred: list[dict[str, Any]]  # the report's preferred constraints
    waiting: bool  # queued with an unschedulable reason
    gpu: int
    waiting_lines: list[str]  # why it waits, in the words of the API and the CLI (SCHEDULING only)


@dataclass(slots=True)
class PlacementMap:
    root: DomainBox
    keys: list[str]
    placed_tasks: int
    unlabelled_nodes: int


@dataclass(frozen=True, slots=True)
class WorkflowDetail:
    workflow: Workflow
    keys: list[str]
    groups: list[GroupRow]
    waiting: list[GroupRow]
    transitions: list[StatusTransition]
    history_truncated: bool
    placement: PlacementMap
    can_cancel: bool
    task_count: int


def workflow_user_may_cancel(workflow: Workflow, user: Viewer) -> bool:
    """The owner and staff may cancel (whether the workflow still can is the model's guard)."""
    return bool(user.is_staff or workflow.submitted_by_id == user.pk)


def _group_rows(
    groups: Sequence[TaskGroup], key_pairs: list[tuple[str, str]], waiting: dict[int, dict[str, Any]]
) -> list[GroupRow]:
    rows = []
    for group in groups:
        tasks = natural_sorted(group.tasks_in_order, key=lambda task: task.name)  # shard2 before shard10
        report = group.placement_report or []
        rows.append(
            GroupRow(
                group=group,
                tasks=[TaskRow(task=task, domains=task_domains(task, key_pairs)) for task in tasks],
                task_info={
                    task.name: {"status": task.status, "node": task.node_shown,
                                "colour": status_colour(task.status)}
                    for task in tasks
                },
                report=report,
                preferred=[item for item in report if item.get("requirement") == "preferred"],
                waiting=bool(group.unschedulable_reason) and not group.is_terminal
                and group.status in ("SCHEDULING", "WAITING"),
                gpu=sum(task.gpu for task in tasks),
                waiting_lines=(waiting.get(group.pk) or {}).get("lines", []),
            )
        )
    return rows


def workflow_detail_build(workflow: Workflow, *, user: Viewer) -> WorkflowDetail:
    """The workflow page of a workflow from :func:`workflows.selectors.workflow_detail_queryset`."""
    keys = pool_keys(workflow.pool)
    groups = workflow.groups_in_order
    rows = _group_rows(groups, [(key.key, key.label) for key in keys], workflow_waiting(workflow, viewer=user))
    transitions = workflow.history_in_order[:HISTORY_LIMIT]  # prefetched by the detail queryset
    return WorkflowDetail(
        workflow=workflow,
        keys=[key.key for key in keys],
        groups=rows,
        waiting=[row for row in rows if row.waiting],
        transitions=transitions,
        history_truncated=len(transitions) == HISTORY_LIMIT,
        placement=workflow_placement_map(workflow, groups, keys),
        can_cancel=workflow.can_cancel() and workflow_user_may_cancel(workflow, user),
        task_count=sum(len(row.tasks) for row in rows),
    )


def workflow_placement_map(
    workflow: Workflow, groups: Sequence[TaskGroup], keys: Sequence[TopologyKey]
) -> PlacementMap:
    """The pool's hierarchy around this workflow's tasks (see the module docstring)."""
    key_pairs = [(key.key, key.label) for key in keys]
    by_node: dict[str, list[Task]] = {}
    task_paths: list[DomainKey] = []
    placed = 0
    for group in groups:
        for task in group.tasks_in_order:
            if task.node is None:
                continue
            placed += 1
            domains = task_domains(task, key_pairs)
            if any(key.key not in domains for key in keys):
                continue
            by_node.setdefault(task.node.name, []).append(task)
            task_paths.append(tuple(domains[key.key] for key in keys))
    finest = set(task_paths) if keys else set()  # a pool without keys has no domains to open
    tree = pool_domain_tree(workflow.pool, keys=keys, machines=finest)
    root, boxes = domain_boxes(tree)
    keep: set[DomainKey] = set()
    for path in task_paths:
        for depth in range(1, len(path) + 1):
            keep.add(path[:depth])
            if path[:depth] in boxes:
                boxes[path[:depth]].ours_tasks += 1
    for path in finest:
        box = boxes.get(path)
        for cell in (box.nodes or []) if box is not None else []:
            cell.tasks = natural_sorted(by_node.get(cell.name, []), key=lambda task: task.name)
            cell.ours = sum(task.gpu for task in cell.tasks if task.status in TASK_ACTIVE_STATUSES)
    _prune(root, keep)
    merge_chains(root)
    return PlacementMap(
        root=root, keys=[key.key for key in keys], placed_tasks=placed, unlabelled_nodes=tree.unlabelled_node_count
    )


def _prune(box: DomainBox, keep: set[DomainKey]) -> None:
    """Expand the boxes on ``keep`` paths; show untouched siblings small, or count them when many."""
    touched = [child for child in box.children if child.path in keep]
    untouched = [child for child in box.children if child.path not in keep]
    for child in touched:
        child.touched = True
        _prune(child, keep)
    if len(untouched) <= COMPACT_SIBLING_LIMIT:
        for child in untouched:
            child.compact = True
            child.children = []
    else:
        box.children = touched
        box.hidden_count = len(untouched)
        box.hidden_key = untouched[0].key
        box.hidden_capacity = sum(child.capacity for child in untouched)
        box.hidden_free = sum(child.free for child in untouched)
