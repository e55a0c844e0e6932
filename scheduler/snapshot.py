"""The only way into the solver: ORM rows -> frozen ``scheduler.placement`` values.

``snapshot_load`` reads a pool in a fixed number of queries (keys, nodes, active reservations summed
per node). Free capacity = capacity - external usage - active reservations.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from django.db import connection
from django.db.models import Sum

from osmo.compiled import CompiledQuery
from scheduler.models import Node, Pool, Reservation, TopologyKey
from scheduler.placement import ClusterSnapshot, DomainIndex, NodeState, Resources

# Read by every placement cycle, compiled once per process (osmo.compiled).
_KEY_LABELS = CompiledQuery(
    lambda pool_id: TopologyKey.objects.filter(pool=pool_id).order_by("position").values_list("key", "label"),
    pool_id=int)
_RESERVED_BY_NODE = CompiledQuery(
    lambda pool_id: Reservation.objects.filter(pool=pool_id, released_at__isnull=True)
    .order_by()
    .values("node_id")
    .annotate(g=Sum("gpu"), c=Sum("cpu_millis"), m=Sum("memory_bytes"), s=Sum("storage_bytes"))
    .values_list("node_id", "g", "c", "m", "s"),
    pool_id=int)


def pool_key_labels(pool: Pool) -> list[tuple[str, str]]:
    """(key, label) pairs, coarsest first."""
    labels: list[tuple[str, str]] = _KEY_LABELS.all(pool_id=pool.pk)
    return labels


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
        node_id: (gpu, cpu, memory, storage)
        for node_id, gpu, cpu, memory, storage in _RESERVED_BY_NODE.all(pool_id=pool.pk)
    }
    static = _nodes_static(pool, labels)
    nodes = []
    for pk, idle in static.nodes:
        held = reserved.get(pk)
        if held is None:
            nodes.append(idle)
            continue
        rgpu, rcpu, rmem, rstorage = held
        free = idle.free
        nodes.append(NodeState(
            name=idle.name, labels=idle.labels, schedulable=idle.schedulable,
            free=Resources(gpu=max(free.gpu - rgpu, 0), cpu=max(free.cpu - rcpu, 0),
                           memory=max(free.memory - rmem, 0), storage=max(free.storage - rstorage, 0)),
        ))
    snapshot = ClusterSnapshot(pool=pool.name, keys=tuple(key for key, _label in key_labels), nodes=tuple(nodes))
    return snapshot, dict(static.node_ids)


@dataclass(frozen=True, slots=True)
class _NodesStatic:
    fingerprint: tuple[int, int]
    labels: tuple[str, ...]
    nodes: tuple[tuple[int, NodeState], ...]  # (pk, the node with only external usage subtracted), by name
    node_ids: dict[str, int]


_STATIC_CACHE_SIZE = 8
_static_cache: dict[int, _NodesStatic] = {}
_static_cache_lock = threading.Lock()
# The versions of a pool's node rows: every INSERT or UPDATE writes a new row version at a new place
# (ctid) by some transaction (xmin), and the version it replaces stays where it was until vacuumed, so
# the (ctid, xmin) pairs of the visible versions change with any write, including a second write by
# the same transaction. Hashed and summed with the count by the database (~10 ms on 20,000 nodes;
# hashing every column instead costs ~50 ms).
NODES_VERSION_SQL = (
    "SELECT count(*), coalesce(sum(hashtextextended(ctid::text || ':' || xmin::text, 0)), 0) "
    f"FROM {Node._meta.db_table} WHERE pool_id = %s"
)


def nodes_version(pool: Pool) -> tuple[int, int] | None:
    """A value that changes whenever any of the pool's node rows is written (PostgreSQL only; None
    elsewhere, where callers keep nothing)."""
    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cursor:
        cursor.execute(NODES_VERSION_SQL, [pool.pk])
        count, total = cursor.fetchone()
    return int(count), int(total)


def _nodes_static(pool: Pool, labels: list[str]) -> _NodesStatic:
    fingerprint = nodes_version(pool)
    if fingerprint is not None:
        with _static_cache_lock:
            cached = _static_cache.get(pool.pk)
        if cached is not None and cached.fingerprint == fingerprint and cached.labels == tuple(labels):
            return cached
    rows = pool.nodes.order_by("name").values_list(
        "pk", "name", "labels", "schedulable", "gpu", "cpu_millis", "memory_bytes", "storage_bytes",
        "used_gpu", "used_cpu_millis", "used_memory_bytes", "used_storage_bytes",
    )
    nodes = tuple(
        (pk, NodeState(
            name=name,
            labels=tuple(_label_value(node_labels, label) for label in labels),
            free=Resources(gpu=max(gpu - ugpu, 0), cpu=max(cpu - ucpu, 0), memory=max(memory - umem, 0),
                           storage=max(storage - ustorage, 0)),
            schedulable=schedulable,
        ))
        for pk, name, node_labels, schedulable, gpu, cpu, memory, storage, ugpu, ucpu, umem, ustorage in rows
    )
    static = _NodesStatic(fingerprint or (0, 0), tuple(labels), nodes, {node.name: pk for pk, node in nodes})
    if fingerprint is not None:
        with _static_cache_lock:
            if pool.pk not in _static_cache and len(_static_cache) >= _STATIC_CACHE_SIZE:
                _static_cache.pop(next(iter(_static_cache)))
            _static_cache[pool.pk] = static
    return static


def snapshot_empty(pool: Pool, *, key_labels: list[tuple[str, str]]) -> ClusterSnapshot:
    """The pool as if nothing of ours ran on it: capacity minus external usage (one query). A gang
    that does not fit this never will on the current inventory."""
    labels = [label for _key, label in key_labels]
    rows = pool.nodes.order_by("name").values_list(
        "name", "labels", "schedulable", "gpu", "cpu_millis", "memory_bytes", "storage_bytes",
        "used_gpu", "used_cpu_millis", "used_memory_bytes", "used_storage_bytes",
    )
    nodes = tuple(
        NodeState(
            name=name,
            labels=tuple(_label_value(node_labels, label) for label in labels),
            free=Resources(gpu=max(gpu - ugpu, 0), cpu=max(cpu - ucpu, 0), memory=max(memory - umem, 0),
                           storage=max(storage - ustorage, 0)),
            schedulable=schedulable,
        )
        for name, node_labels, schedulable, gpu, cpu, memory, storage, ugpu, ucpu, umem, ustorage in rows
    )
    return ClusterSnapshot(pool=pool.name, keys=tuple(key for key, _label in key_labels), nodes=nodes)


def _label_value(labels: dict[str, Any] | None, label: str) -> str | None:
    value = (labels or {}).get(label)
    return None if value in (None, "") else str(value)


# -- the idle pool, cached per process ---------------------------------------------------------------
_IDLE_CACHE_SIZE = 8
_idle_cache: dict[tuple[int, int, int], tuple[DomainIndex, threading.Lock]] = {}
_idle_cache_lock = threading.Lock()


def idle_index_key(pool: Pool) -> tuple[int, int, int]:
    """What :func:`idle_index` is cached by: (pool, inventory epoch, keys version), one query."""
    from scheduler.services.reservations import pool_epochs

    _capacity, inventory = pool_epochs(pool.pk)
    return (pool.pk, inventory, pool.keys_version)


def idle_index(pool: Pool, key: tuple[int, int, int] | None = None) -> tuple[DomainIndex, threading.Lock]:
    """The pool as if nothing of ours ran on it (:func:`snapshot_empty`), aggregated, with the lock a
    caller must hold while solving on it (a solve borrows the index's arrays). Cached per process by
    (pool, inventory epoch, keys version) (:func:`idle_index_key`, read here unless given):
    inventory changes that can make more gangs fit move the inventory epoch on, so a cached index is
    never more pessimistic than the pool."""
    key = key or idle_index_key(pool)
    with _idle_cache_lock:
        cached = _idle_cache.get(key)
    if cached is None:
        index = DomainIndex(snapshot_empty(pool, key_labels=pool_key_labels(pool)))
        cached = (index, threading.Lock())
        with _idle_cache_lock:
            for stale in [k for k in _idle_cache if k[0] == pool.pk or len(_idle_cache) >= _IDLE_CACHE_SIZE]:
                del _idle_cache[stale]
            _idle_cache[key] = cached
    return cached
