"""Reads for the server-rendered status pages (dashboard, workflow list/detail, pools).

Everything here runs a fixed number of queries whatever the number of workflows, tasks or nodes:
domain totals come from :func:`scheduler.selectors.pool_capacity_summary` (one ``GROUP BY``), node
cells from :func:`scheduler.selectors.node_queryset_with_usage` restricted to the domains a page
draws, and workflow occupancy from one grouped query over the active reservations.

The hierarchy is drawn as nested :class:`DomainBox` values (zone > spine > rack > gpu-clique >
node). Big pools are pruned: a workflow page expands only the domains its tasks touch and folds
the rest into a count; a pool page stops drawing node cells past :data:`NODE_CELL_LIMIT` nodes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Count, Q, QuerySet, Sum
from django.db.models.functions import Cast

from scheduler.models import Pool, Reservation, TopologyKey
from scheduler.selectors import (
    label_text,
    node_queryset_with_usage,
    pool_capacity_summary,
    pool_keys,
    pool_list,
    pools_totals,
)
from workflows.choices import TASK_ACTIVE_STATUSES, WORKFLOW_TERMINAL_STATUSES, WorkflowStatus
from workflows.models import Task, TaskGroup, Workflow
from workflows.selectors import task_domains, workflow_list, workflow_visible_to

NODE_CELL_LIMIT = 600  # past this many nodes a pool page draws domains only
COMPACT_SIBLING_LIMIT = 12  # untouched siblings drawn as small boxes up to this many, else counted

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
# Dashboard
# ------------------------------------------------------------------------------------------------
@dataclass(slots=True)
class PoolRow:
    pool: Pool
    keys: list[str]
    node_count: int
    schedulable_node_count: int
    gpu_capacity: int
    gpu_in_use: int
    gpu_free: int

    @property
    def gpu_unavailable(self) -> int:
        """Capacity neither in use nor free: cordoned machines (or over-commitment)."""
        return max(self.gpu_capacity - self.gpu_in_use - self.gpu_free, 0)

    @property
    def used_percent(self) -> int:
        return _percent(self.gpu_capacity - self.gpu_free, self.gpu_capacity)

    @property
    def in_use_percent(self) -> int:
        return _percent(self.gpu_in_use, self.gpu_capacity)


def _percent(part: int, whole: int) -> int:
    return round(100 * part / whole) if whole > 0 else 0


def pool_rows(pools: Iterable[Pool] | None = None) -> list[PoolRow]:
    """Every pool with its GPU capacity / in use / free (four queries for any number of pools)."""
    pools = list(pools if pools is not None else pool_list())
    totals = pools_totals(pool.pk for pool in pools)
    rows = []
    for pool in pools:
        total = totals[pool.pk]
        rows.append(
            PoolRow(
                pool=pool,
                keys=[key.key for key in pool_keys(pool)],
                node_count=total.node_count,
                schedulable_node_count=total.schedulable_node_count,
                gpu_capacity=total.capacity["gpu"],
                gpu_in_use=total.used["gpu"] + total.reserved["gpu"],
                gpu_free=total.free["gpu"],
            )
        )
    return rows


def workflow_status_counts(*, user: AbstractBaseUser) -> dict[str, int]:
    """Visible workflows per status, every status present (one query)."""
    counts = dict.fromkeys(WorkflowStatus.values, 0)
    rows = workflow_visible_to(user).order_by().values("status").annotate(n=Count("pk"))
    for row in rows:
        counts[row["status"]] = row["n"]
    return counts


def dashboard_data(*, user: AbstractBaseUser, recent: int = 10) -> dict[str, Any]:
    counts = workflow_status_counts(user=user)
    failed = sum(n for status, n in counts.items() if status.startswith("FAILED"))
    cards = [
        {"status": "PENDING", "count": counts["PENDING"]},
        {"status": "RUNNING", "count": counts["RUNNING"]},
        {"status": "COMPLETED", "count": counts["COMPLETED"]},
        {"status": "FAILED", "count": failed},
    ]
    failures = [{"status": s, "count": n} for s, n in counts.items() if s.startswith("FAILED") and n]
    return {
        "cards": cards,
        "failures": failures,
        "total": sum(counts.values()),
        "pools": pool_rows(),
        "recent": list(workflow_list(user=user)[:recent]),
    }


# ------------------------------------------------------------------------------------------------
# Workflow list
# ------------------------------------------------------------------------------------------------
def workflow_page_list(
    *, user: AbstractBaseUser, status: str = "", pool: str = "", username: str = "", name: str = "", sort: str = ""
) -> QuerySet[Workflow]:
    """The visible workflows filtered and sorted for the list page. ``status`` "FAILED" means any failure."""
    queryset = workflow_list(user=user)
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
    field_name = WORKFLOW_SORTS.get(sort.lstrip("-"))
    if field_name:
        prefix = "-" if sort.startswith("-") else ""
        queryset = queryset.order_by(f"{prefix}{field_name}", "-pk")
    return queryset


# ------------------------------------------------------------------------------------------------
# Domain hierarchy (workflow placement map and pool heat map)
# ------------------------------------------------------------------------------------------------
@dataclass(slots=True)
class NodeCell:
    name: str
    gpu: int
    in_use: int  # external usage + every reservation (ours included)
    free: int
    schedulable: bool
    ours: int = 0  # GPUs this page's workflow holds here (active tasks)
    tasks: list[Task] = field(default_factory=list)  # this page's workflow's tasks placed here

    @property
    def others(self) -> int:
        return max(self.in_use - self.ours, 0)

    @property
    def used_percent(self) -> int:
        return _percent(self.gpu - max(self.free, 0), self.gpu) if self.schedulable else 100

    @property
    def heat(self) -> int:
        return heat_level(self.gpu - max(self.free, 0), self.gpu)

    @property
    def others_percent(self) -> int:
        return _percent(self.others, self.gpu)

    @property
    def ours_percent(self) -> int:
        return _percent(self.ours, self.gpu)


@dataclass(slots=True)
class Occupant:
    workflow_id: str
    username: str
    gpu: int
    tasks: int
    visible: bool = False


@dataclass(slots=True)
class DomainBox:
    """One domain (or the pool root) as drawn: totals, children, maybe node cells."""

    key: str
    value: str
    path: tuple[str, ...]
    capacity: int = 0
    in_use: int = 0
    free: int = 0
    node_count: int = 0
    schedulable_node_count: int = 0
    children: list[DomainBox] = field(default_factory=list)
    merged: list[tuple[str, str]] = field(default_factory=list)  # single-child chain folded into this box
    compact: bool = False
    touched: bool = False
    ours_tasks: int = 0
    hidden_count: int = 0
    hidden_capacity: int = 0
    hidden_free: int = 0
    hidden_key: str = ""
    nodes: list[NodeCell] | None = None
    occupants: list[Occupant] = field(default_factory=list)

    @property
    def labels(self) -> list[tuple[str, str]]:
        return [(self.key, self.value), *self.merged]

    @property
    def used_percent(self) -> int:
        return _percent(self.capacity - self.free, self.capacity)

    @property
    def heat(self) -> int:
        """0..5: the colour class of the heat map (0 idle, 5 full)."""
        return heat_level(self.capacity - self.free, self.capacity)

    @property
    def hidden_used_percent(self) -> int:
        return _percent(self.hidden_capacity - self.hidden_free, self.hidden_capacity)

    @property
    def dom_id(self) -> str:
        return "/".join(self.path)


def heat_level(used: int, capacity: int) -> int:
    if capacity <= 0:
        return 0
    fraction = used / capacity
    if fraction <= 0:
        return 0
    if fraction >= 1:
        return 5
    return min(4, 1 + int(fraction * 4))


def _summary_with_index(summary_keys: list[dict[str, Any]]) -> None:
    for index, level in enumerate(summary_keys):
        level["position_index"] = index + 1


def _label_annotations(keys: Sequence[TopologyKey], prefix: str = "labels") -> dict[str, Cast]:
    return {f"v{index}": label_text(key.label, prefix) for index, key in enumerate(keys)}


def _node_cells(pool: Pool, keys: Sequence[TopologyKey], paths: Iterable[tuple[str, ...]] | None) -> dict[
    tuple[str, ...], list[NodeCell]
]:
    """Node cells per finest domain path, for the given finest domains (all when ``paths`` is None). One query."""
    aliases = _label_annotations(keys)
    queryset = node_queryset_with_usage(pool).annotate(**aliases)
    if paths is not None:
        condition = Q()
        for path in paths:
            condition |= Q(**{f"v{index}": value for index, value in enumerate(path)})
        if not condition:
            return {}
        queryset = queryset.filter(condition)
    rows = queryset.order_by("name").values(
        "name", "schedulable", "gpu", "used_gpu", "reserved_gpu", "free_gpu", *aliases
    )
    cells: dict[tuple[str, ...], list[NodeCell]] = {}
    for row in rows:
        path = tuple(row[alias] for alias in aliases)
        if any(value is None for value in path):
            continue
        cells.setdefault(path, []).append(
            NodeCell(
                name=row["name"],
                gpu=row["gpu"],
                in_use=row["used_gpu"] + row["reserved_gpu"],
                free=row["free_gpu"],
                schedulable=row["schedulable"],
            )
        )
    return cells


def _merge_chains(box: DomainBox) -> None:
    """Fold a domain with exactly one child covering the same nodes into that child (rack r1 and its
    one gpu-clique become one box labelled with both)."""
    for child in box.children:
        _merge_chains(child)
    while box.path and len(box.children) == 1 and box.children[0].node_count == box.node_count:
        child = box.children[0]
        if child.compact != box.compact:
            break
        box.merged.append((child.key, child.value))
        box.merged.extend(child.merged)
        box.children = child.children
        box.nodes = child.nodes
        box.occupants = child.occupants
        box.hidden_count, box.hidden_capacity, box.hidden_free = (
            child.hidden_count, child.hidden_capacity, child.hidden_free)
        box.hidden_key = child.hidden_key
        box.ours_tasks = max(box.ours_tasks, child.ours_tasks)


def _prune(box: DomainBox, keep: set[tuple[str, ...]]) -> None:
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


@dataclass(slots=True)
class PlacementMap:
    root: DomainBox
    keys: list[str]
    placed_tasks: int
    unlabelled_nodes: int


def workflow_placement_map(
    workflow: Workflow, groups: Sequence[TaskGroup], keys: Sequence[TopologyKey]
) -> PlacementMap:
    """The pool's hierarchy around this workflow's tasks (two queries, whatever the pool's size):
    the domains its tasks touch are expanded down to their nodes, with its tasks highlighted and
    other usage shaded; the other domains are drawn small or counted."""
    root, boxes, unlabelled = _pool_boxes(workflow.pool, keys)
    key_pairs = [(key.key, key.label) for key in keys]
    by_node: dict[str, list[Task]] = {}
    finest: set[tuple[str, ...]] = set()
    keep: set[tuple[str, ...]] = set()
    placed = 0
    for group in groups:
        for task in group.tasks.all():
            if task.node is None:
                continue
            placed += 1
            domains = task_domains(task, key_pairs)
            path = tuple(domains.get(key.key) for key in keys)
            if any(value is None for value in path):
                continue
            by_node.setdefault(task.node.name, []).append(task)
            finest.add(path)  # type: ignore[arg-type]
            for depth in range(1, len(path) + 1):
                keep.add(path[:depth])  # type: ignore[arg-type]
                if path[:depth] in boxes:
                    boxes[path[:depth]].ours_tasks += 1  # type: ignore[index]
    cells = _node_cells(workflow.pool, keys, finest) if finest else {}
    for path, node_cells in cells.items():
        box = boxes.get(path)
        if box is None:
            continue
        for cell in node_cells:
            cell.tasks = by_node.get(cell.name, [])
            cell.ours = sum(task.gpu for task in cell.tasks if task.status in TASK_ACTIVE_STATUSES)
        box.nodes = node_cells
    _prune(root, keep)
    _merge_chains(root)
    return PlacementMap(root=root, keys=[key.key for key in keys], placed_tasks=placed, unlabelled_nodes=unlabelled)


def _pool_boxes(pool: Pool, keys: Sequence[TopologyKey]) -> tuple[DomainBox, dict[tuple[str, ...], DomainBox], int]:
    summary_keys = list(keys)
    if not summary_keys:
        summary = pool_capacity_summary(pool, keys=summary_keys)
        totals = summary["totals"]
        root = DomainBox(
            key="pool", value=pool.name, path=(), capacity=totals["capacity"]["gpu"],
            in_use=totals["used"]["gpu"] + totals["reserved"]["gpu"], free=totals["free"]["gpu"],
            node_count=totals["node_count"], schedulable_node_count=totals["schedulable_node_count"],
        )
        return root, {(): root}, 0
    return _domain_boxes_indexed(pool, summary_keys)


def _domain_boxes_indexed(pool: Pool, keys: Sequence[TopologyKey]) -> tuple[
    DomainBox, dict[tuple[str, ...], DomainBox], int
]:
    summary = pool_capacity_summary(pool, keys=keys)
    _summary_with_index(summary["keys"])
    totals = summary["totals"]
    root = DomainBox(
        key="pool",
        value=pool.name,
        path=(),
        capacity=totals["capacity"]["gpu"],
        in_use=totals["used"]["gpu"] + totals["reserved"]["gpu"],
        free=totals["free"]["gpu"],
        node_count=totals["node_count"],
        schedulable_node_count=totals["schedulable_node_count"],
    )
    boxes: dict[tuple[str, ...], DomainBox] = {(): root}
    for level in summary["keys"]:
        names = [key.key for key in keys[: level["position_index"]]]
        for domain in level["domains"]:
            path = tuple(domain["path"][name] for name in names)
            box = DomainBox(
                key=level["key"],
                value=domain["value"],
                path=path,
                capacity=domain["capacity"]["gpu"],
                in_use=domain["used"]["gpu"] + domain["reserved"]["gpu"],
                free=domain["free"]["gpu"],
                node_count=domain["node_count"],
                schedulable_node_count=domain["schedulable_node_count"],
            )
            boxes[path] = box
            parent = boxes.get(path[:-1])
            if parent is not None:
                parent.children.append(box)
    unlabelled = summary["keys"][-1]["unlabelled"]["node_count"]
    return root, boxes, unlabelled


# ------------------------------------------------------------------------------------------------
# Pool pages
# ------------------------------------------------------------------------------------------------
@dataclass(slots=True)
class PoolHeatMap:
    root: DomainBox
    keys: list[str]
    node_cells: bool
    unlabelled_nodes: int
    occupancy: list[dict[str, Any]]  # one row per workflow: id, user, gpu, tasks, domains


def pool_heat_map(pool: Pool, keys: Sequence[TopologyKey], *, user: AbstractBaseUser) -> PoolHeatMap:
    """Every domain with capacity / in use / free, node cells when the pool is small enough, and
    which workflows hold capacity in which finest domain (three queries)."""
    root, boxes, unlabelled = _pool_boxes(pool, keys)
    show_nodes = bool(keys) and root.node_count <= NODE_CELL_LIMIT
    if show_nodes:
        for path, cells in _node_cells(pool, keys, None).items():
            if path in boxes:
                boxes[path].nodes = cells
    occupancy = _pool_occupancy(pool, keys, boxes, user=user)
    _merge_chains(root)
    return PoolHeatMap(
        root=root, keys=[key.key for key in keys], node_cells=show_nodes, unlabelled_nodes=unlabelled,
        occupancy=occupancy,
    )


def _pool_occupancy(
    pool: Pool, keys: Sequence[TopologyKey], boxes: dict[tuple[str, ...], DomainBox], *, user: AbstractBaseUser
) -> list[dict[str, Any]]:
    aliases = _label_annotations(keys, "node__labels")
    rows = (
        Reservation.objects.filter(pool=pool, released_at__isnull=True)
        .order_by()
        .annotate(**aliases)
        .values("task__workflow__workflow_id", "task__workflow__submitted_by_id",
                "task__workflow__submitted_by__username", *aliases)
        .annotate(gpu=Sum("gpu"), tasks=Count("pk"))
    )
    per_workflow: dict[str, dict[str, Any]] = {}
    for row in rows:
        workflow_id = row["task__workflow__workflow_id"]
        visible = bool(user.is_staff or row["task__workflow__submitted_by_id"] == user.pk)
        path = tuple(row[alias] for alias in aliases)
        entry = per_workflow.setdefault(
            workflow_id,
            {"workflow_id": workflow_id, "username": row["task__workflow__submitted_by__username"],
             "visible": visible, "gpu": 0, "tasks": 0, "domains": []},
        )
        entry["gpu"] += row["gpu"] or 0
        entry["tasks"] += row["tasks"]
        entry["domains"].append({"path": "/".join(v or "?" for v in path), "gpu": row["gpu"] or 0})
        box = boxes.get(path) if all(path) else None
        if box is not None:
            box.occupants.append(Occupant(workflow_id=workflow_id, username=entry["username"], gpu=row["gpu"] or 0,
                                          tasks=row["tasks"], visible=visible))
    result = sorted(per_workflow.values(), key=lambda e: (-e["gpu"], e["workflow_id"]))
    for entry in result:
        entry["domains"].sort(key=lambda d: d["path"])
    for box in boxes.values():
        box.occupants.sort(key=lambda o: (-o.gpu, o.workflow_id))
    return result


def pool_nodes_page_queryset(pool: Pool, keys: Sequence[TopologyKey]) -> QuerySet:
    """The pool's nodes for the paginated node list: usage and the value of every key."""
    return node_queryset_with_usage(pool).annotate(**_label_annotations(keys)).order_by("name", "pk")


__all__ = [
    "NODE_CELL_LIMIT",
    "WORKFLOW_SORTS",
    "DomainBox",
    "NodeCell",
    "PlacementMap",
    "PoolHeatMap",
    "PoolRow",
    "dashboard_data",
    "heat_level",
    "pool_heat_map",
    "pool_nodes_page_queryset",
    "pool_rows",
    "workflow_page_list",
    "workflow_placement_map",
    "workflow_status_counts",
]
