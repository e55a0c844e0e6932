"""The nodes' GPU totals per domain of a pool, kept per process and brought up to date from the node
rows that changed (docs/design.md §8).

The pool page of a pool too big to draw machines draws the domain tree from the nodes' totals
without reservations (:func:`scheduler.reads.domains.pool_domain_tree` with ``reservations=False``) and adds
the reservations per request. Building those totals reads and groups every node (~100 ms for 20,000
nodes); any write to any node row made the page build them again. Here they are kept with each
node's part in them, and a write costs what it changed:

- The pool's nodes are split into buckets of :data:`BUCKET_IDS` consecutive ids (a pool's nodes are
  mostly created together, so a bucket holds up to that many of its nodes). One aggregate query gives each
  bucket's count and sum of row versions (the versions of :func:`scheduler.sql.node_row_version`:
  any write to a row changes its version); only the buckets whose aggregate differs from the kept one
  are read again, each node row with its version, in one query.
- Within a read bucket, a node that is gone is taken out of every domain on its path, a new node is
  added, and a node whose version changed is taken out and added again as it is now (its labels may
  have moved it to another domain). Domains left without nodes disappear; new paths create domains.
- Only the domains on those nodes' old and new paths (and so their ancestors) are frozen again; every
  other :class:`~scheduler.reads.domains.Domain` of the kept tree is reused as it is.

The result equals a build from scratch (``tests/scheduler/test_domain_totals.py`` compares them after
every kind of node write). The kept state also says whether any node's domain changed
(:attr:`scheduler.reads.domains.DomainTree.paths_version`): a node write that moved no node leaves the
pool's occupancy per domain as it was.

Free GPUs follow :mod:`scheduler.selectors`: ``max(gpu - used_gpu, 0)`` on schedulable nodes only.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from django.db.models import Q

from osmo.process_cache import ProcessCache
from parsing.natural import natural_key
from scheduler import sql
from scheduler.models import Node, Pool, TopologyKey
from scheduler.reads.domain_tree import Domain, DomainPath, DomainTree
from scheduler.selectors import label_text

BUCKET_IDS = 128  # a node write reads the rows of its bucket again: at most this many, by the primary key

# (version, path, schedulable, gpu, used_gpu) of one node
_NodeRow = tuple[int, DomainPath, bool, int, int]
_paths_versions = itertools.count(1)  # process-wide: a rebuilt state never reuses an earlier number


@dataclass(slots=True)
class _Counts:
    """One domain's totals: nodes, schedulable nodes, GPUs, GPUs used outside, free GPUs."""

    nodes: int = 0
    schedulable: int = 0
    gpu: int = 0
    used: int = 0
    free: int = 0


@dataclass(slots=True)
class _Kept:
    """A pool's nodes and their totals per domain path, as of ``buckets`` (see the module)."""

    key_labels: tuple[tuple[str, str], ...]
    by_bucket: dict[int, dict[int, _NodeRow]] = field(default_factory=dict)  # bucket -> node id -> row
    buckets: dict[int, tuple[int, int]] = field(default_factory=dict)  # bucket -> (count, sum of versions)
    counts: dict[DomainPath, _Counts] = field(default_factory=dict)  # every path prefix with nodes, () the root
    children: dict[DomainPath, dict[DomainPath, None]] = field(default_factory=dict)  # path -> child paths
    unlabelled: int = 0
    paths_version: int = 0
    tree: DomainTree | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def nodes_version(self) -> tuple[int, int]:
        """:func:`scheduler.reads.snapshot.nodes_version` of the rows kept."""
        return (sum(count for count, _total in self.buckets.values()),
                sum(total for _count, total in self.buckets.values()))

    def add(self, row: _NodeRow, sign: int, dirty: set[DomainPath]) -> None:
        """Count the node into (``sign`` 1) or out of (-1) every domain on its path."""
        _version, path, schedulable, gpu, used = row
        free = max(gpu - used, 0) if schedulable else 0
        if None in path:
            self.unlabelled += sign
        # Parents first when counting in (a new domain hangs under its parent), children first when
        # counting out (a domain left empty is taken from its parent before the parent goes).
        depths = range(len(path) + 1)
        for depth in depths if sign > 0 else reversed(depths):
            prefix = path[:depth]
            counts = self.counts.get(prefix)
            if counts is None:
                counts = self.counts[prefix] = _Counts()
                self.children[prefix] = {}
                if depth:
                    self.children[path[: depth - 1]][prefix] = None
            counts.nodes += sign
            counts.schedulable += sign * schedulable
            counts.gpu += sign * gpu
            counts.used += sign * used
            counts.free += sign * free
            dirty.add(prefix)
            if counts.nodes == 0 and depth:
                del self.counts[prefix], self.children[prefix]
                del self.children[path[: depth - 1]][prefix]


# Per pool, as of the keys' labels (one entry per pool).
_kept: ProcessCache[int, _Kept] = ProcessCache("domain_totals", size=16)


NodeBuckets = dict[int, tuple[int, int]]  # bucket -> (count, sum of row versions)


def node_buckets(pool: Pool) -> NodeBuckets:
    """The pool's node rows per bucket: their count and the sum of their versions (one query). Summed
    over the buckets they are :func:`scheduler.reads.snapshot.nodes_version`."""
    return sql.node_buckets(pool.pk, BUCKET_IDS)


def kept_base_tree(pool: Pool, *, keys: Sequence[TopologyKey], nodes_version: tuple[int, int],
                   buckets: NodeBuckets | None = None) -> DomainTree:
    """``pool_domain_tree(pool, keys=keys, reservations=False)``, kept per process and updated from
    the node rows written since (see the module). ``nodes_version``: the pool's
    :func:`scheduler.reads.snapshot.nodes_version` as the caller read it; when the kept rows have that
    version nothing is read. ``buckets``: :func:`node_buckets` as the caller read it with that
    version (read here when not given). PostgreSQL only."""
    key_labels = tuple((key.key, key.label) for key in keys)
    kept = _kept.get(pool.pk, key_labels)
    if kept is None:
        kept = _Kept(key_labels=key_labels)
        _kept.put(pool.pk, kept, key_labels)
    with kept.lock:
        if kept.tree is None or kept.nodes_version() != tuple(nodes_version):
            _refresh(pool, kept, buckets if buckets is not None else node_buckets(pool))
        tree = kept.tree
        assert tree is not None
    if tree.root.value != pool.name:
        tree = DomainTree(root=replace(tree.root, value=pool.name), keys=tree.keys,
                          unlabelled_node_count=tree.unlabelled_node_count, machines_loaded=False,
                          paths_version=tree.paths_version)
    return tree


def _refresh(pool: Pool, kept: _Kept, now: NodeBuckets) -> None:
    """Read the buckets whose aggregate differs from ``now`` and bring ``kept`` (its totals and tree)
    up to date."""
    changed = {bucket for bucket in now.keys() | kept.buckets.keys() if now.get(bucket) != kept.buckets.get(bucket)}
    if not changed and kept.tree is not None:
        return
    fresh: dict[int, dict[int, _NodeRow]] = {bucket: {} for bucket in changed}
    for pk, row in _rows(pool, kept.key_labels, None if kept.tree is None else changed):
        fresh.setdefault(pk // BUCKET_IDS, {})[pk] = row
    dirty: set[DomainPath] = set()
    moved = False
    for bucket, rows in fresh.items():
        before = kept.by_bucket.get(bucket, {})
        for pk, was in before.items():
            now_row = rows.get(pk)
            if now_row is None or now_row[1:] != was[1:]:  # gone, or changed beyond its version
                kept.add(was, -1, dirty)
                moved = moved or now_row is None or now_row[1] != was[1]
        for pk, now_row in rows.items():
            was_row = before.get(pk)
            if was_row is None or now_row[1:] != was_row[1:]:
                kept.add(now_row, 1, dirty)
                moved = moved or was_row is None
        if rows:
            kept.by_bucket[bucket] = rows
            kept.buckets[bucket] = (len(rows), sum(row[0] for row in rows.values()))
        else:
            kept.by_bucket.pop(bucket, None)
            kept.buckets.pop(bucket, None)
    if kept.tree is None or moved:
        kept.paths_version = next(_paths_versions)
    if () not in kept.counts:  # a pool without nodes: the root with zero totals
        kept.counts[()], kept.children[()] = _Counts(), {}
    keys = [key for key, _label in kept.key_labels]
    old_root = kept.tree.root if kept.tree is not None else None
    kept.tree = DomainTree(
        root=_frozen(kept, (), keys, pool.name, old_root, dirty if old_root is not None else None),
        keys=tuple(keys), unlabelled_node_count=kept.unlabelled, machines_loaded=False,
        paths_version=kept.paths_version,
    )


def _rows(pool: Pool, key_labels: tuple[tuple[str, str], ...], buckets: set[int] | None
          ) -> list[tuple[int, _NodeRow]]:
    """The pool's node rows (those in ``buckets``, all when None) with their versions, in one query."""
    aliases: dict[str, Any] = {f"domain_value_{i}": label_text(label) for i, (_key, label) in enumerate(key_labels)}
    queryset = Node.objects.filter(pool=pool).order_by()
    if buckets is not None:
        ranges = Q()
        for bucket in sorted(buckets):
            ranges |= Q(pk__gte=bucket * BUCKET_IDS, pk__lt=(bucket + 1) * BUCKET_IDS)
        queryset = queryset.filter(ranges)
    rows = queryset.annotate(
        version=sql.node_row_version(), **aliases
    ).values_list("pk", "version", "schedulable", "gpu", "used_gpu", *aliases)
    return [(pk, (version, tuple(path), schedulable, gpu, used))
            for pk, version, schedulable, gpu, used, *path in rows]


def _frozen(kept: _Kept, path: DomainPath, keys: list[str], pool_name: str, old: Domain | None,
            dirty: set[DomainPath] | None) -> Domain:
    """The domain at ``path`` from the kept totals; below it, children outside ``dirty`` are the
    ``old`` domain's own (every child is frozen anew when ``dirty`` is None)."""
    reuse = {child.path: child for child in old.children} if old is not None and dirty is not None else {}
    children = []
    for child_path in kept.children[path]:
        child = reuse.get(child_path)
        if child is None or (dirty is not None and child_path in dirty):
            child = _frozen(kept, child_path, keys, pool_name, child, dirty)
        children.append(child)
    children.sort(key=lambda domain: (natural_key(domain.value), domain.path[-1] is None))
    counts = kept.counts[path]
    key = keys[len(path) - 1] if path else "pool"
    value = pool_name if not path else path[-1] if path[-1] is not None else f"(no {key})"
    return Domain(key=key, value=value, path=path, gpu_capacity=counts.gpu, gpu_used=counts.used, gpu_reserved=0,
                  gpu_free=counts.free, node_count=counts.nodes, schedulable_node_count=counts.schedulable,
                  children=tuple(children))


__all__ = ["BUCKET_IDS", "NodeBuckets", "kept_base_tree", "node_buckets"]
