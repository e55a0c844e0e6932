"""The pool list and the pool page: GPU totals per pool, the hierarchy heat map with the workflows
holding capacity in each finest domain, and the paginated node list.

Fixed query counts whatever the pool's size: the domain tree of :mod:`scheduler.reads.domains` (two
queries, one more for the node cells up to :data:`NODE_CELL_LIMIT` nodes; past that the nodes'
totals are kept and updated from the rows written, :mod:`scheduler.reads.domain_totals`), the occupancy
(the active reservations, then their holders) and the node page (names + page, in natural order).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.core.paginator import Page, Paginator
from django.db.models import BigIntegerField, Count, Func, Sum, TextField, Value
from django.db.models.functions import Cast, Coalesce, Concat
from django.utils import timezone

from osmo.process_cache import ProcessCache
from osmo.types import Viewer
from pages.links import workflow_urls
from pages.viewmodels.common import percent
from pages.viewmodels.domains import DomainBox, DomainKey, Occupant, domain_boxes, merge_chains
from parsing.natural import natural_key, natural_sorted
from scheduler.fairshare.usage import TeamUsage, pool_team_usage
from scheduler.inventory import sync_record_words
from scheduler.models import Node, Pool, TopologyKey
from scheduler.reads.domains import pool_domain_tree_cached, pool_state
from scheduler.selectors import (
    label_text,
    node_queryset_with_usage,
    pool_keys,
    pool_list,
    pool_quota_use,
    pools_totals,
)
from workflows.selectors import pool_occupancy_by_workflow, workflow_owner_visible

NODE_CELL_LIMIT = 600  # past this many nodes a pool page draws domains only
NODES_PER_PAGE = 25
NATURAL_NODE_ORDER_LIMIT = 5000  # off PostgreSQL, node lists up to this size are in natural name order
OCCUPANCY_ROWS = 50  # workflows listed under "Workflows holding capacity" (largest first); the rest summed
OCCUPANTS_PER_DOMAIN = 3  # workflows named in a domain box (largest first); the rest counted


# ------------------------------------------------------------------------------------------------
# Pool list (and the dashboard's pools)
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
        return percent(self.gpu_capacity - self.gpu_free, self.gpu_capacity)

    @property
    def in_use_percent(self) -> int:
        return percent(self.gpu_in_use, self.gpu_capacity)


def pool_rows(pools: Iterable[Pool] | None = None) -> list[PoolRow]:
    """Every pool with its GPU capacity / in use / free (four queries for any number of pools)."""
    pools = natural_sorted(pools if pools is not None else pool_list(), key=lambda pool: pool.name)
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


# ------------------------------------------------------------------------------------------------
# Pool page
# ------------------------------------------------------------------------------------------------
@dataclass(slots=True)
class OccupiedDomain:
    path: str  # finest domain, "z1/s1/r1/z1-s1-r1" ("?" for a missing label)
    gpu: int


@dataclass(slots=True)
class WorkflowOccupancy:
    """A workflow holding capacity in the pool: its GPUs and tasks, in total and per finest domain. The
    workflows the viewer may not see (the API's rule, :func:`workflows.selectors.workflow_owner_visible`)
    are one row together, without ids or owners: ``others`` of them."""

    workflow_id: str  # "" for the other users' workflows
    username: str  # "" for the other users' workflows
    visible: bool  # the viewer may see and open it
    url: str = ""  # its page, when visible (naming its owner when that is not the viewer)
    gpu: int = 0
    tasks: int = 0
    domains: list[OccupiedDomain] = field(default_factory=list)
    others: int = 0  # how many workflows the row of the other users' workflows stands for


@dataclass(slots=True)
class PoolHeatMap:
    root: DomainBox
    keys: list[str]
    node_cells: bool
    unlabelled_nodes: int
    occupancy: list[WorkflowOccupancy]  # the largest OCCUPANCY_ROWS holders
    occupancy_more: int = 0  # holders not listed
    occupancy_more_gpu: int = 0  # GPUs they hold


def pool_heat_map(pool: Pool, keys: Sequence[TopologyKey], *, user: Viewer,
                  fingerprint: tuple[Any, ...] | None,
                  node_buckets: dict[int, tuple[int, int]] | None = None) -> PoolHeatMap:
    """Every domain with capacity / in use / free, node cells when the pool is small enough, and
    which workflows hold capacity in which finest domain (three or four queries), for the pool's
    state ``fingerprint`` and its ``node_buckets`` (:func:`scheduler.reads.domains.pool_state`)."""
    tree = pool_domain_tree_cached(pool, keys=keys, fingerprint=fingerprint, machine_limit=NODE_CELL_LIMIT,
                                   node_buckets=node_buckets)
    root, boxes = domain_boxes(tree)
    occupancy = _pool_occupancy(pool, keys, boxes, user=user, fingerprint=fingerprint,
                                paths_version=tree.paths_version)
    merge_chains(root)
    # Thousands of small gangs can hold a big pool: a page lists the largest holders, not all of them.
    rest = occupancy[OCCUPANCY_ROWS:]
    return PoolHeatMap(
        root=root,
        keys=[key.key for key in keys],
        node_cells=tree.machines_loaded,
        unlabelled_nodes=tree.unlabelled_node_count,
        occupancy=occupancy[:OCCUPANCY_ROWS],
        occupancy_more=len(rest),
        occupancy_more_gpu=sum(entry.gpu for entry in rest),
    )


_occupancy_cache: ProcessCache[int, list[dict[str, Any]]] = ProcessCache("pool_occupancy", size=16)


def _occupancy_rows(
    pool: Pool, keys: Sequence[TopologyKey], fingerprint: tuple[Any, ...] | None, paths_version: int | None
) -> list[dict[str, Any]]:
    """The pool's active reservations per workflow and finest domain, kept per process while the
    pool's state fingerprint and keys stay the same (rows are read-only below). With the tree's
    ``paths_version`` (:attr:`scheduler.reads.domains.DomainTree.paths_version`) only the reservations'
    part of the fingerprint counts: a node write that moved no node to another domain leaves every
    reservation in its domain."""
    labels = [k.label for k in keys]
    if fingerprint is None:
        return list(pool_occupancy_by_workflow(pool=pool, labels=labels))
    nodes = fingerprint[:2] if paths_version is None else ("paths", paths_version)
    key = (nodes, fingerprint[2:], tuple(labels))
    rows = _occupancy_cache.get(pool.pk, key)
    if rows is None:
        rows = list(pool_occupancy_by_workflow(pool=pool, labels=labels))
        _occupancy_cache.put(pool.pk, rows, key)
    return rows


def _pool_occupancy(
    pool: Pool, keys: Sequence[TopologyKey], boxes: dict[DomainKey, DomainBox], *, user: Viewer,
    fingerprint: tuple[Any, ...] | None, paths_version: int | None,
) -> list[WorkflowOccupancy]:
    rows = _occupancy_rows(pool, keys, fingerprint, paths_version)
    # Keyed by id and owner: ids count per owner (docs/design.md §7, "Workflow ids": an id must say nothing
    # about other users' workflows). What the viewer may not see through the API is summed under OTHERS,
    # in the list and per domain: the page shows where capacity is held, not whose it is.
    per_workflow: dict[tuple[str, int], WorkflowOccupancy] = {}
    hidden: set[tuple[str, int]] = set()
    hidden_per_box: dict[DomainKey, set[tuple[str, int]]] = {}
    url_of = workflow_urls(viewer=user.get_username())
    for row in rows:
        workflow = (row["workflow_id"], row["owner_id"])
        visible = workflow_owner_visible(user, row["owner_id"])
        path = tuple(row[f"domain_value_{index}"] for index in range(len(keys)))
        gpu = row["gpu_total"] or 0
        key = workflow if visible else OTHERS
        entry = per_workflow.get(key)
        if entry is None:
            entry = per_workflow[key] = (
                WorkflowOccupancy(workflow_id=row["workflow_id"], username=row["owner_username"], visible=True,
                                  url=url_of(row["workflow_id"], row["owner_username"]))
                if visible else WorkflowOccupancy(workflow_id="", username="", visible=False))
        if not visible:
            hidden.add(workflow)
        entry.gpu += gpu
        entry.tasks += row["task_count"]
        entry.domains.append(OccupiedDomain(path="/".join(value or "?" for value in path), gpu=gpu))
        box = boxes.get(path) if all(path) else None
        if box is not None:
            _occupant_add(box, entry, gpu=gpu, tasks=row["task_count"], workflow=workflow,
                          hidden=hidden_per_box.setdefault(path, set()))
    if OTHERS in per_workflow:
        per_workflow[OTHERS].others = len(hidden)
        per_workflow[OTHERS].domains = _domains_summed(per_workflow[OTHERS].domains)
    result = sorted(per_workflow.values(), key=lambda entry: (-entry.gpu, entry.workflow_id, entry.username))
    for entry in result:
        entry.domains.sort(key=lambda domain: natural_key(domain.path))
    for box in boxes.values():
        if box.occupants:
            box.occupants.sort(key=lambda occupant: (-occupant.gpu, occupant.workflow_id))
            box.occupants_more = len(box.occupants) - OCCUPANTS_PER_DOMAIN
            del box.occupants[OCCUPANTS_PER_DOMAIN:]
    return result


OTHERS = ("", -1)  # the key of the other users' workflows, summed


def _occupant_add(box: DomainBox, entry: WorkflowOccupancy, *, gpu: int, tasks: int, workflow: tuple[str, int],
                  hidden: set[tuple[str, int]]) -> None:
    """Name a visible workflow in ``box``; add a hidden one to the box's one occupant of other users."""
    if entry.visible:
        box.occupants.append(Occupant(workflow_id=entry.workflow_id, username=entry.username, gpu=gpu, tasks=tasks,
                                      visible=True, url=entry.url))
        return
    others = next((occupant for occupant in box.occupants if not occupant.visible), None)
    if others is None:
        others = Occupant(workflow_id="", username="", gpu=0, tasks=0)
        box.occupants.append(others)
    hidden.add(workflow)
    others.gpu += gpu
    others.tasks += tasks
    others.others = len(hidden)


def _domains_summed(domains: list[OccupiedDomain]) -> list[OccupiedDomain]:
    summed: dict[str, int] = {}
    for domain in domains:
        summed[domain.path] = summed.get(domain.path, 0) + domain.gpu
    return [OccupiedDomain(path=path, gpu=gpu) for path, gpu in summed.items()]


@dataclass(frozen=True, slots=True)
class NodeRow:
    node: Node  # with the usage annotations of node_queryset_with_usage
    values: list[str]  # the node's value for every key, "—" when missing


@dataclass(frozen=True, slots=True)
class PoolDetail:
    pool: Pool
    keys: list[str]
    heat: PoolHeatMap
    page: Page
    nodes: list[NodeRow]
    quotas: list[dict[str, Any]]  # per team: quota_gpu (None: none), used_gpu (HIGH/NORMAL), low_gpu
    k8s_sync: str | None = None  # Kubernetes pools: what the last periodic sync changed (docs/kubernetes.md)
    # Fair share on (docs/design.md §9): each team's recent usage, least first (the order it gives).
    usage: list[TeamUsage] = field(default_factory=list)


# By pool, as of the node rows' version; and as of the (id, name) pairs' fingerprint.
_node_order_cache: ProcessCache[int, list[int]] = ProcessCache("node_order", size=16)
_node_order_by_names: ProcessCache[int, list[int]] = ProcessCache("node_order_by_names", size=16)


def _names_fingerprint(pool: Pool) -> tuple[Any, ...]:
    """The pool's (id, name) pairs as one aggregate: their count and the sum of PostgreSQL's 64-bit hash
    of each pair (a node renamed, added or removed changes it)."""
    pair = Concat(Cast("pk", TextField()), Value(":"), "name", output_field=TextField())
    hashed = Func(pair, Value(0), function="hashtextextended", output_field=BigIntegerField())
    row = Node.objects.filter(pool=pool).aggregate(n=Count("pk"), h=Coalesce(Sum(hashed), 0))
    return (row["n"], row["h"])


def _node_order(pool: Pool, fingerprint: tuple[Any, ...] | None) -> list[int] | None:
    """The pool's node ids in natural name order (``n2`` before ``n10``). On PostgreSQL the order is
    kept per process: while the pool's node rows are unchanged (the nodes' part of its state
    ``fingerprint``) at no cost, and after a node write that renamed, added or removed no node for
    one aggregate query; only then are the names read and sorted again (~0.1 s for 20,000 names).
    Elsewhere it is sorted per request up to :data:`NATURAL_NODE_ORDER_LIMIT` nodes; None past that
    (database order)."""
    if fingerprint is not None:
        version = fingerprint[:2]  # scheduler.reads.snapshot.nodes_version: changes with any node row
        ordered = _node_order_cache.get(pool.pk, version)
        if ordered is None:
            names = _names_fingerprint(pool)
            ordered = _node_order_by_names.get(pool.pk, names)
            if ordered is None:
                rows = Node.objects.filter(pool=pool).values_list("pk", "name")
                ordered = [pk for pk, _name in natural_sorted(rows, key=lambda row: row[1])]
                _node_order_by_names.put(pool.pk, ordered, names)
            _node_order_cache.put(pool.pk, ordered, version)
        return ordered
    names_rows = list(Node.objects.filter(pool=pool).values_list("pk", "name")[: NATURAL_NODE_ORDER_LIMIT + 1])
    if len(names_rows) > NATURAL_NODE_ORDER_LIMIT:
        return None
    return [pk for pk, _name in natural_sorted(names_rows, key=lambda row: row[1])]


def _node_page(pool: Pool, aliases: dict[str, Any], page_number: str, fingerprint: tuple[Any, ...] | None
               ) -> tuple[Page[Any], list[Node]]:
    """A page of the pool's nodes in natural name order, in two queries like the database-ordered
    paginator (the order itself: :func:`_node_order`)."""
    nodes = node_queryset_with_usage(pool).annotate(**aliases)
    ordered = _node_order(pool, fingerprint)
    if ordered is None:
        by_name = Paginator(nodes.order_by("name", "pk"), NODES_PER_PAGE).get_page(page_number)
        return by_name, list(by_name.object_list)
    page = Paginator(ordered, NODES_PER_PAGE).get_page(page_number)
    by_pk = {node.pk: node for node in nodes.filter(pk__in=list(page.object_list))}
    return page, [by_pk[pk] for pk in page.object_list if pk in by_pk]


def pool_detail_build(pool: Pool, *, user: Viewer, page_number: str) -> PoolDetail:
    keys = pool_keys(pool)
    aliases: dict[str, Any] = {f"v{index}": label_text(key.label) for index, key in enumerate(keys)}
    fingerprint, node_buckets = pool_state(pool)
    page, nodes = _node_page(pool, aliases, page_number, fingerprint)
    return PoolDetail(
        pool=pool,
        keys=[key.key for key in keys],
        heat=pool_heat_map(pool, keys, user=user, fingerprint=fingerprint, node_buckets=node_buckets),
        page=page,
        nodes=[NodeRow(node=node, values=[getattr(node, alias) or "—" for alias in aliases]) for node in nodes],
        quotas=pool_quota_use(pool),
        k8s_sync=sync_record_words(pool.k8s_sync) if pool.backend == "kubernetes" else None,
        usage=pool_team_usage(pool, now=timezone.now()),
    )
