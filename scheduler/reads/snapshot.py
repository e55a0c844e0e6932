"""The only way into the solver: ORM rows -> frozen ``scheduler.placement`` values.

``snapshot_load`` reads a pool in a fixed number of queries (keys, nodes, active reservations summed
per node). Free capacity = capacity - external usage - active reservations.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from django.db import connection
from django.db.models import QuerySet, Sum

from osmo.process_cache import ProcessCache
from scheduler import sql
from scheduler.models import Node, Pool, Reservation, TopologyKey
from scheduler.placement import ClusterSnapshot, DomainIndex, NodeState, Resources
from scheduler.resources import CAPACITY_FIELDS, USED_FIELDS


def pool_key_labels(pool: Pool) -> list[tuple[str, str]]:
    """(key, label) pairs, coarsest first."""
    return list(TopologyKey.objects.filter(pool=pool.pk).order_by("position").values_list("key", "label"))


def snapshot_load(pool: Pool, *, key_labels: list[tuple[str, str]] | None = None) -> ClusterSnapshot:
    """The pool as the solver sees it, in three queries (two when ``key_labels`` is given)."""
    return snapshot_load_with_ids(pool, key_labels=key_labels)[0]


def snapshot_load_with_ids(
    pool: Pool, *, key_labels: list[tuple[str, str]] | None = None
) -> tuple[ClusterSnapshot, dict[str, int]]:
    """The snapshot and each node's primary key by name (for persisting a placement).

    The nodes' own columns (labels, capacity, external usage, cordons) change rarely while
    reservations change every cycle: they are kept per process and read again only when
    :func:`nodes_version`, read in the same transaction, differs (one aggregate query instead of
    20,000 rows on a big pool). Reservations are always read."""
    key_labels = key_labels if key_labels is not None else pool_key_labels(pool)
    labels = [label for _key, label in key_labels]
    # Reservations summed per node in one grouped query, then subtracted here: a correlated subquery
    # per node and resource (the selectors' form, fine for a page of nodes) costs 4 x 20,000 lookups.
    reserved = {
        row.node_id: row
        for row in Reservation.objects.filter(pool=pool.pk, released_at__isnull=True)
        .order_by()
        .values("node_id")
        .annotate(gpu=Sum("gpu"), cpu=Sum("cpu_millis"), memory=Sum("memory_bytes"), storage=Sum("storage_bytes"))
        .values_list("node_id", "gpu", "cpu", "memory", "storage", named=True)
    }
    static = _nodes_static(pool, labels)
    nodes = []
    for pk, idle in static.nodes:
        held = reserved.get(pk)
        if held is None:
            nodes.append(idle)
            continue
        free = idle.free
        nodes.append(NodeState(
            name=idle.name, labels=idle.labels, schedulable=idle.schedulable,
            free=Resources(gpu=max(free.gpu - held.gpu, 0), cpu=max(free.cpu - held.cpu, 0),
                           memory=max(free.memory - held.memory, 0), storage=max(free.storage - held.storage, 0)),
        ))
    snapshot = ClusterSnapshot(pool=pool.name, keys=tuple(key for key, _label in key_labels), nodes=tuple(nodes))
    return snapshot, dict(static.node_ids)


@dataclass(frozen=True, slots=True)
class _NodesStatic:
    fingerprint: tuple[int, int]
    labels: tuple[str, ...]
    nodes: tuple[tuple[int, NodeState], ...]  # (pk, the node with only external usage subtracted), by name
    node_ids: dict[str, int]


# The node rows of recent pools, each as of its rows' version and key labels (one entry per pool).
_STATIC: ProcessCache[int, _NodesStatic] = ProcessCache("nodes_static", size=8)


def nodes_version(pool: Pool) -> tuple[int, int] | None:
    """A value that changes whenever any of the pool's node rows is written: their count and the sum
    of their row versions (:func:`scheduler.sql.nodes_version`), one aggregate query (PostgreSQL
    only; None elsewhere, where callers keep nothing)."""
    if connection.vendor != "postgresql":
        return None
    return sql.nodes_version(pool.pk)


def _nodes_static(pool: Pool, labels: list[str]) -> _NodesStatic:
    fingerprint = nodes_version(pool)
    version = (fingerprint, tuple(labels))
    if fingerprint is not None:
        cached = _STATIC.get(pool.pk, version)
        if cached is not None:
            return cached
    nodes = tuple((row.pk, _idle_node(row, labels)) for row in _node_rows(pool, "pk"))
    static = _NodesStatic(fingerprint or (0, 0), tuple(labels), nodes, {node.name: pk for pk, node in nodes})
    if fingerprint is not None:
        _STATIC.put(pool.pk, static, version)
    return static


_NODE_FIELDS = ("name", "labels", "schedulable", *CAPACITY_FIELDS, *USED_FIELDS)


def _node_rows(pool: Pool, *extra: str) -> QuerySet[Node, Any]:
    """The pool's nodes by name, as named rows of what the solver needs (and ``extra`` fields)."""
    return pool.nodes.order_by("name").values_list(*extra, *_NODE_FIELDS, named=True)


def _idle_node(row: Any, labels: list[str]) -> NodeState:
    """A node row (:func:`_node_rows`) as the solver sees it with only external usage subtracted."""
    return NodeState(
        name=row.name,
        labels=tuple(_label_value(row.labels, label) for label in labels),
        free=Resources(gpu=max(row.gpu - row.used_gpu, 0), cpu=max(row.cpu_millis - row.used_cpu_millis, 0),
                       memory=max(row.memory_bytes - row.used_memory_bytes, 0),
                       storage=max(row.storage_bytes - row.used_storage_bytes, 0)),
        schedulable=row.schedulable,
    )


def snapshot_empty(pool: Pool, *, key_labels: list[tuple[str, str]]) -> ClusterSnapshot:
    """The pool as if nothing of ours ran on it: capacity minus external usage (one query). A gang
    that does not fit this never will on the current inventory."""
    labels = [label for _key, label in key_labels]
    nodes = tuple(_idle_node(row, labels) for row in _node_rows(pool))
    return ClusterSnapshot(pool=pool.name, keys=tuple(key for key, _label in key_labels), nodes=nodes)


def snapshot_capacity(pool: Pool, *, key_labels: list[tuple[str, str]]) -> ClusterSnapshot:
    """The pool as if nothing at all ran on it, ours or anyone else's, and every node were schedulable
    (cordons, taints and NotReady nodes come back): each node's capacity, one query. A gang that does not
    fit this can never be placed on the pool's current machines (docs/design.md §11); external usage
    (``used_*``) comes and goes, so it is not subtracted here."""
    labels = [label for _key, label in key_labels]
    nodes = tuple(
        NodeState(name=row.name, labels=tuple(_label_value(row.labels, label) for label in labels),
                  free=Resources(gpu=row.gpu, cpu=row.cpu_millis, memory=row.memory_bytes, storage=row.storage_bytes),
                  schedulable=True)
        for row in _node_rows(pool)
    )
    return ClusterSnapshot(pool=pool.name, keys=tuple(key for key, _label in key_labels), nodes=nodes)


def _label_value(labels: dict[str, Any] | None, label: str) -> str | None:
    value = (labels or {}).get(label)
    return None if value in (None, "") else str(value)


# -- the pool's capacity as a domain index, cached per process ----------------------------------------
# By pool, as of (inventory epoch, keys version): one entry per pool, a newer version replaces it. The
# index holds capacities only (:func:`snapshot_capacity`), so no usage, ours or external, is in it; the
# inventory epoch moves on with every change of the pool's nodes, so an entry is never stale.
_IDLE: ProcessCache[int, tuple[DomainIndex, threading.Lock]] = ProcessCache("idle_index", size=8)


def idle_index_key(pool: Pool) -> tuple[int, int, int]:
    """What :func:`idle_index` is cached by: (pool, inventory epoch, keys version), one query."""
    from scheduler.services.reservations import pool_epochs

    _capacity, inventory = pool_epochs(pool.pk)
    return (pool.pk, inventory, pool.keys_version)


def idle_index(pool: Pool, key: tuple[int, int, int] | None = None) -> tuple[DomainIndex, threading.Lock]:
    """The pool as if nothing at all ran on it (:func:`snapshot_capacity`), aggregated, with the lock a
    caller must hold while solving on it (a solve borrows the index's arrays). Cached per process by
    (pool, inventory epoch, keys version) (:func:`idle_index_key`, read here unless given):
    inventory changes that can make more gangs fit move the inventory epoch on, so a cached index is
    never more pessimistic than the pool's machines."""
    pool_id, *version = key or idle_index_key(pool)
    cached = _IDLE.get(pool_id, tuple(version))
    if cached is None:
        index = DomainIndex(snapshot_capacity(pool, key_labels=pool_key_labels(pool)))
        cached = (index, threading.Lock())
        _IDLE.put(pool_id, cached, tuple(version))
    return cached
