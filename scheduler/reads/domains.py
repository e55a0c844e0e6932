"""The domain hierarchy of a pool: one level per topology key, coarsest first (zone > spine > rack >
gpu-clique), machines under the finest domains, GPU capacity / used / reserved / free and node counts
per domain. One model, shared by the admin's hierarchy view and the status pages (which draw it as a
heat map and a placement map).

- A domain is identified by its path, the label values of keys ``0..i``: rack ``r1`` in zone ``a`` and
  rack ``r1`` in zone ``b`` are two domains (docs/design.md §4).
- A machine missing the label of a key hangs under a ``(no <key>)`` domain at that level (path value
  ``None``); such a domain and everything below it is not :attr:`Domain.labelled`, and the machine is
  counted in :attr:`DomainTree.unlabelled_node_count`. A coarser domain's totals include every
  machine carrying its own labels, so its labelled children may add up to less than itself.
- Totals follow the one definition of free capacity of :mod:`scheduler.selectors` (``free`` over
  schedulable machines only, each contributing ``max(free, 0)``; ``capacity``, ``used`` and
  ``reserved`` over all machines).

Queries, whatever the number of machines, reservations or keys: two for the totals (one ``GROUP BY``
over the label values, one over the active reservations), plus one when machines are asked for.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from django.db import connection
from django.db.models import Count, Max, Q, Sum
from django.db.models.functions import Coalesce

from osmo.process_cache import ProcessCache
from parsing.natural import natural_key, natural_sorted
from scheduler.models import Pool, Reservation, TopologyKey
from scheduler.reads.domain_totals import kept_base_tree, node_buckets
from scheduler.reads.domain_tree import Domain, DomainMachine, DomainPath, DomainTree
from scheduler.selectors import (
    Totals,
    label_text,
    node_queryset_with_usage,
    pool_reserved_gpu_by_labels,
    pool_totals_by_labels,
)


@dataclass(slots=True)
class _Draft:
    """A domain while its totals and machines are collected (frozen into a :class:`Domain` at the end)."""

    key: str
    value: str
    path: DomainPath
    totals: Totals = field(default_factory=Totals)
    children: dict[str | None, _Draft] = field(default_factory=dict)
    machines: list[DomainMachine] | None = None

    def freeze(self) -> Domain:
        children = sorted(self.children.values(), key=lambda draft: (natural_key(draft.value), draft.path[-1] is None))
        machines = None if self.machines is None else natural_sorted(self.machines, key=lambda machine: machine.name)
        return Domain(
            key=self.key,
            value=self.value,
            path=self.path,
            gpu_capacity=self.totals.capacity["gpu"],
            gpu_used=self.totals.used["gpu"],
            gpu_reserved=self.totals.reserved["gpu"],
            gpu_free=self.totals.free["gpu"],
            node_count=self.totals.node_count,
            schedulable_node_count=self.totals.schedulable_node_count,
            children=tuple(child.freeze() for child in children),
            machines=tuple(machines) if machines is not None else None,
        )


def pool_domain_tree(
    pool: Pool,
    *,
    keys: Sequence[TopologyKey] | None = None,
    machines: bool | Collection[DomainPath] = False,
    machine_limit: int | None = None,
    reservations: bool = True,
) -> DomainTree:
    """The pool's domain hierarchy with GPU totals, in two queries (three with machines; one more for
    the keys unless given).

    Args:
        keys: the pool's keys, coarsest first (:func:`scheduler.selectors.pool_keys`).
        reservations: ``False``: totals as if nothing were reserved (machines are then not loaded).
        machines: ``True`` hangs every machine under its finest domain (under the root when the pool
            has no keys); a collection of finest labelled paths loads only those domains' machines.
        machine_limit: load no machines when the pool has more machines than this.

    Returns:
        The tree; ``machines_loaded`` says whether machines were asked for and loaded.
    """
    ordered_keys = list(keys) if keys is not None else list(pool.topology_keys.order_by("position"))
    groups = pool_totals_by_labels(pool, labels=[key.label for key in ordered_keys], reservations=reservations)
    root = _Draft(key="pool", value=pool.name, path=())
    drafts: dict[DomainPath, _Draft] = {(): root}
    unlabelled = 0
    for values, totals in groups.items():
        root.totals.merge(totals)
        if None in values:
            unlabelled += totals.node_count
        parent = root
        for depth, key in enumerate(ordered_keys):
            path = values[: depth + 1]
            draft = drafts.get(path)
            if draft is None:
                value = values[depth]
                draft = _Draft(key=key.key, value=value if value is not None else f"(no {key.key})", path=path)
                drafts[path] = draft
                parent.children[value] = draft
            draft.totals.merge(totals)
            parent = draft
    load = bool(machines) and reservations and (machine_limit is None or root.totals.node_count <= machine_limit)
    if load:
        paths = None if isinstance(machines, bool) else machines
        for path, machine in _machines(pool, ordered_keys, paths):
            draft = drafts.get(path)
            if draft is not None:
                if draft.machines is None:
                    draft.machines = []
                draft.machines.append(machine)
    return DomainTree(
        root=root.freeze(),
        keys=tuple(key.key for key in ordered_keys),
        unlabelled_node_count=unlabelled,
        machines_loaded=load,
    )


def _machines(
    pool: Pool, keys: Sequence[TopologyKey], paths: Collection[DomainPath] | None
) -> Iterator[tuple[DomainPath, DomainMachine]]:
    """The pool's machines by name with their finest domain's path, all of them or only those in
    ``paths`` (one query)."""
    aliases = {f"domain_value_{index}": label_text(key.label) for index, key in enumerate(keys)}
    queryset = node_queryset_with_usage(pool).annotate(**aliases)
    if paths is not None:
        condition = Q()
        for path in paths:
            condition |= Q(**dict(zip(aliases, path, strict=True)))
        queryset = queryset.filter(condition)
    rows = queryset.order_by("name", "pk").values(
        "pk", "name", "schedulable", "gpu", "used_gpu", "reserved_gpu", "free_gpu", *aliases
    )
    for row in rows:
        machine = DomainMachine(
            pk=row["pk"],
            name=row["name"],
            schedulable=row["schedulable"],
            gpu=row["gpu"],
            gpu_used=row["used_gpu"],
            gpu_reserved=row["reserved_gpu"],
            gpu_free=row["free_gpu"],
        )
        yield tuple(row[alias] for alias in aliases), machine


# -- kept per process for the status pages ------------------------------------------------------------
def pool_state_fingerprint(pool: Pool) -> tuple[Any, ...] | None:
    """What the domain tree and the pool's occupancy are computed from, in two cheap queries: the
    version of the pool's node rows (:func:`scheduler.reads.snapshot.nodes_version`) and the count, id sum
    and largest id of its active reservations (reservations are never edited, only created and
    released). Equal fingerprints mean equal trees. None off PostgreSQL (nothing is kept there)."""
    return pool_state(pool)[0]


def pool_state(pool: Pool) -> tuple[tuple[Any, ...] | None, dict[int, tuple[int, int]] | None]:
    """:func:`pool_state_fingerprint` and the node rows' versions per bucket
    (:func:`scheduler.reads.domain_totals.node_buckets`) its nodes' part is the sum of, in the same two
    queries: a page that draws a kept tree reads the node rows' versions once."""
    if connection.vendor != "postgresql":
        return None, None

    buckets = node_buckets(pool)
    nodes = (sum(count for count, _total in buckets.values()), sum(total for _count, total in buckets.values()))
    active = Reservation.objects.filter(pool_id=pool.pk, released_at__isnull=True).aggregate(
        count=Count("*"), total=Coalesce(Sum("id"), 0), last=Coalesce(Max("id"), 0))
    return (*nodes, active["count"], active["total"], active["last"]), buckets


# Per pool, as of the pool's state fingerprint (and keys): the tree drawn (its base without
# reservations is kept by scheduler.reads.domain_totals).
_tree_cache: ProcessCache[int, DomainTree] = ProcessCache("domain_tree", size=16)


def pool_domain_tree_cached(
    pool: Pool, *, keys: Sequence[TopologyKey], fingerprint: tuple[Any, ...] | None,
    machine_limit: int | None = None, node_buckets: dict[int, tuple[int, int]] | None = None,
) -> DomainTree:
    """:func:`pool_domain_tree` with every machine (up to ``machine_limit``), kept per process while
    ``fingerprint`` (:func:`pool_state_fingerprint`) and the keys stay the same: a 20,000-node pool's
    tree costs ~80 ms to build and the pool page refreshes itself every few seconds. ``node_buckets``:
    read with ``fingerprint`` by :func:`pool_state`, when the caller has them."""
    if fingerprint is None:
        return pool_domain_tree(pool, keys=keys, machines=bool(keys), machine_limit=machine_limit)
    key_labels = tuple((k.key, k.label) for k in keys)
    key = (fingerprint, key_labels, machine_limit)
    cached = _tree_cache.get(pool.pk, key)
    if cached is not None:
        return cached
    node_count, nodes_version = fingerprint[0], fingerprint[:2]
    if keys and machine_limit is not None and node_count > machine_limit:
        # No machines drawn: the nodes' totals are kept and brought up to date from the node rows
        # written since (scheduler.reads.domain_totals), and the reservations (a few thousand rows at
        # most) are read and added again.

        base = kept_base_tree(pool, keys=keys, nodes_version=nodes_version, buckets=node_buckets)
        held = pool_reserved_gpu_by_labels(pool, labels=[k.label for k in keys])
        adjust: dict[DomainPath, tuple[int, int]] = {}
        for values, (reserved, less_free) in held.items():
            for depth in range(len(values) + 1):
                prefix = values[:depth]
                had, fewer = adjust.get(prefix, (0, 0))
                adjust[prefix] = (had + reserved, fewer + less_free)
        tree = DomainTree(root=_with_reservations(base.root, adjust), keys=base.keys,
                          unlabelled_node_count=base.unlabelled_node_count, machines_loaded=False,
                          paths_version=base.paths_version)
    else:
        tree = pool_domain_tree(pool, keys=keys, machines=bool(keys), machine_limit=machine_limit)
    _tree_cache.put(pool.pk, tree, key)
    return tree


def _with_reservations(domain: Domain, adjust: dict[DomainPath, tuple[int, int]]) -> Domain:
    """``domain`` (totals without reservations) with the reserved GPUs under it; subtrees nothing is
    reserved in are reused as they are."""
    change = adjust.get(domain.path)
    if change is None:
        return domain
    reserved, less_free = change
    return replace(domain, gpu_reserved=domain.gpu_reserved + reserved, gpu_free=domain.gpu_free - less_free,
                   children=tuple(_with_reservations(child, adjust) for child in domain.children))


__all__ = [
    "Domain", "DomainMachine", "DomainPath", "DomainTree", "pool_domain_tree",
    "pool_domain_tree_cached", "pool_state", "pool_state_fingerprint",
]
