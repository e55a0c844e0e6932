"""The only way into the solver: ORM rows -> frozen ``scheduler.placement`` values.

``snapshot_load`` reads a pool in a fixed number of queries (keys, nodes, active reservations summed
per node). Free capacity = capacity - external usage - active reservations.
"""

from __future__ import annotations

import threading
from typing import Any

from django.db.models import Sum

from scheduler.models import Pool, Reservation
from scheduler.placement import ClusterSnapshot, DomainIndex, NodeState, Resources


def pool_key_labels(pool: Pool) -> list[tuple[str, str]]:
    """(key, label) pairs, coarsest first."""
    return list(pool.topology_keys.order_by("position").values_list("key", "label"))


def snapshot_load(pool: Pool, *, key_labels: list[tuple[str, str]] | None = None) -> ClusterSnapshot:
    """The pool as the solver sees it, in three queries (two when ``key_labels`` is given)."""
    return snapshot_load_with_ids(pool, key_labels=key_labels)[0]


def snapshot_load_with_ids(
    pool: Pool, *, key_labels: list[tuple[str, str]] | None = None
) -> tuple[ClusterSnapshot, dict[str, int]]:
    """The snapshot and each node's primary key by name (for persisting a placement)."""
    key_labels = key_labels if key_labels is not None else pool_key_labels(pool)
    labels = [label for _key, label in key_labels]
    # Reservations summed per node in one grouped query, then subtracted here: a correlated subquery
    # per node and resource (the selectors' form, fine for a page of nodes) costs 4 x 20,000 lookups.
    reserved = {
        node_id: (gpu, cpu, memory, storage)
        for node_id, gpu, cpu, memory, storage in Reservation.objects.filter(pool=pool, released_at__isnull=True)
        .order_by()
        .values("node_id")
        .annotate(g=Sum("gpu"), c=Sum("cpu_millis"), m=Sum("memory_bytes"), s=Sum("storage_bytes"))
        .values_list("node_id", "g", "c", "m", "s")
    }
    rows = pool.nodes.order_by("name").values_list(
        "pk", "name", "labels", "schedulable", "gpu", "cpu_millis", "memory_bytes", "storage_bytes",
        "used_gpu", "used_cpu_millis", "used_memory_bytes", "used_storage_bytes",
    )
    nodes = []
    node_ids: dict[str, int] = {}
    none = (0, 0, 0, 0)
    for pk, name, node_labels, schedulable, gpu, cpu, memory, storage, ugpu, ucpu, umem, ustorage in rows:
        node_ids[name] = pk
        rgpu, rcpu, rmem, rstorage = reserved.get(pk, none)
        nodes.append(
            NodeState(
                name=name,
                labels=tuple(_label_value(node_labels, label) for label in labels),
                free=Resources(gpu=max(gpu - ugpu - rgpu, 0), cpu=max(cpu - ucpu - rcpu, 0),
                               memory=max(memory - umem - rmem, 0), storage=max(storage - ustorage - rstorage, 0)),
                schedulable=schedulable,
            )
        )
    snapshot = ClusterSnapshot(pool=pool.name, keys=tuple(key for key, _label in key_labels), nodes=tuple(nodes))
    return snapshot, node_ids


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


def idle_index(pool: Pool) -> tuple[DomainIndex, threading.Lock]:
    """The pool as if nothing of ours ran on it (:func:`snapshot_empty`), aggregated, with the lock a
    caller must hold while solving on it (a solve borrows the index's arrays). Cached per process by
    (pool, inventory epoch, keys version): inventory changes that can make more gangs fit move the
    inventory epoch on, so a cached index is never more pessimistic than the pool."""
    from scheduler.services.reservations import pool_epochs

    _capacity, inventory = pool_epochs(pool.pk)
    key = (pool.pk, inventory, pool.keys_version)
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
