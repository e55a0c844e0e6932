"""The only way into the solver: ORM rows -> frozen ``scheduler.placement`` values.

``snapshot_load`` reads a pool in a fixed number of queries (keys, nodes with free capacity from the
shared free-capacity selector). Free capacity = capacity - external usage - active reservations.
"""

from __future__ import annotations

from scheduler.models import Pool
from scheduler.placement import ClusterSnapshot, NodeState, Resources
from scheduler.selectors import node_queryset_with_usage


def pool_key_labels(pool: Pool) -> list[tuple[str, str]]:
    """(key, label) pairs, coarsest first."""
    return list(pool.topology_keys.order_by("position").values_list("key", "label"))


def snapshot_load(pool: Pool, *, key_labels: list[tuple[str, str]] | None = None) -> ClusterSnapshot:
    """The pool as the solver sees it, in two queries (one when ``key_labels`` is given)."""
    return snapshot_load_with_ids(pool, key_labels=key_labels)[0]


def snapshot_load_with_ids(
    pool: Pool, *, key_labels: list[tuple[str, str]] | None = None
) -> tuple[ClusterSnapshot, dict[str, int]]:
    """The snapshot and each node's primary key by name (for persisting a placement)."""
    key_labels = key_labels if key_labels is not None else pool_key_labels(pool)
    labels = [label for _key, label in key_labels]
    rows = node_queryset_with_usage(pool).order_by("name").values_list(
        "pk", "name", "labels", "schedulable", "free_gpu", "free_cpu_millis", "free_memory_bytes",
        "free_storage_bytes",
    )
    nodes = []
    node_ids: dict[str, int] = {}
    for pk, name, node_labels, schedulable, gpu, cpu, memory, storage in rows:
        node_ids[name] = pk
        nodes.append(
            NodeState(
                name=name,
                labels=tuple(_label_value(node_labels, label) for label in labels),
                free=Resources(gpu=max(gpu, 0), cpu=max(cpu, 0), memory=max(memory, 0), storage=max(storage, 0)),
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


def _label_value(labels: dict | None, label: str) -> str | None:
    value = (labels or {}).get(label)
    return None if value in (None, "") else str(value)
