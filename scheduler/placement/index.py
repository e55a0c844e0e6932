"""The aggregated domain index of a snapshot (docs/design.md §5, §8).

Schedulable machines are grouped by (domain, free capacity, special name) into *classes*; a domain is
a node of the label trie (root = pool, level ``i`` = ``labels[: i + 1]``). A machine lacking the label
of key ``i`` sits directly in its deepest complete domain, so it can never host a task constrained at
``i`` or finer. Machines named in some task's ``nodes_excluded`` keep their name in the class key
("special"), so classes stay interchangeable for every shape.

For a gang's shapes, a :class:`Table` holds per domain ``d`` and shape ``s`` the count ``cap[d][s]`` of
tasks of shape ``s`` that fit in ``d`` (sum over machines of ``min_r free_r // req_r``), aggregated
bottom-up, and ``tot[d]``, the free capacity of the machines that fit some shape. For one shape these
counts are exact; for several they are an upper bound. :class:`DomainIndex` builds the classes once
per snapshot and each table on first use, and :meth:`DomainIndex.place` keeps both current when a
gang is placed, so a placement cycle aggregates its pool once. The search over it is
:mod:`scheduler.placement.search` (the domain phase) and :mod:`scheduler.placement.packing`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from scheduler.placement.types import ClusterSnapshot, NodeState, Resources, Vec

UNBOUNDED_FIT = 1 << 40  # fit of a task that requests nothing


@dataclass(frozen=True, slots=True)
class Shape:
    """A distinct task request: resources and the (pool-relevant) excluded machine names."""

    req: Vec
    excluded: frozenset[str]


@dataclass(slots=True)
class Exclusions:
    """Why machines of the snapshot cannot take (some) tasks: counts per cause."""

    machines: int = 0
    cordoned: int = 0
    nodes_excluded: int = 0
    missing_label: int = 0
    too_small: int = 0
    depth: list[int] = field(default_factory=list)  # usable machines per number of complete labels


def fit_count(free: Vec, req: Vec) -> int:
    """How many tasks requesting ``req`` fit in ``free``."""
    best = UNBOUNDED_FIT
    for have, want in zip(free, req, strict=True):
        if want > 0:
            n = have // want if have > 0 else 0
            if n < best:
                best = n
                if n == 0:
                    return 0
    return best


@dataclass(slots=True)
class Table:
    """Per-domain counts of one gang's shapes (see :meth:`DomainIndex.table`)."""

    shapes: tuple[Shape, ...]
    cap: list[list[int]]  # per domain, per shape: how many tasks of the shape fit
    tot: list[list[int]]  # per domain: free capacity of the machines that fit some shape
    stats: Exclusions
    fit_cache: list[dict[Vec, int]]


class DomainIndex:
    """The aggregated domain index of a snapshot, built once and updated in place.

    Schedulable machines are grouped by (domain, free capacity) into classes (see the module
    docstring); per gang shape set, :meth:`table` derives the per-domain counts ``cap``/``tot`` once
    and keeps them current while gangs are placed (:meth:`place`), so a placement cycle aggregates
    the pool once instead of once per gang. Machines named in ``special`` (some task's
    ``nodes_excluded``) keep their name in their class key, so classes stay interchangeable.

    Invariant (property-tested): after any sequence of :meth:`place` calls, every table and class
    equals the one built from scratch on the resulting snapshot.
    """

    def __init__(self, snapshot: ClusterSnapshot, special: frozenset[str] = frozenset()) -> None:
        self.keys = snapshot.keys
        self.special = special
        nkeys = len(snapshot.keys)
        self.machines = len(snapshot.nodes)
        self.cordoned = 0
        # How many times :meth:`place` (or :meth:`release`) changed it: a result computed from this index
        # stands while the count is unchanged (the walk's memos of waiting gangs, docs/design.md §9).
        self.changes = 0
        self._snapshot_nodes = snapshot.nodes
        self._nodes: dict[str, NodeState] | None = None  # by name, built on first use
        groups: dict[tuple[tuple[str, ...], Vec, str], list[str]] = {}
        self._where: dict[str, tuple[tuple[str, ...], Vec, str]] | None = None
        for node in snapshot.nodes:
            if not node.schedulable:
                self.cordoned += 1
                continue
            labels = node.labels
            if len(labels) != nkeys or None in labels:
                cut = labels.index(None) if None in labels else len(labels)
                path: tuple[str, ...] = tuple(labels[: min(cut, nkeys)])  # type: ignore[arg-type]
            else:
                path = labels  # type: ignore[assignment]
            f = node.free
            free = (f.gpu, f.cpu, f.memory, f.storage)
            name = node.name
            key = (path, free, name if name in special else "")
            bucket = groups.get(key)
            if bucket is None:
                groups[key] = [name]
            else:
                bucket.append(name)
        # Domains: every prefix of every machine's path, ids in label-path order (pre-order).
        paths: set[tuple[str, ...]] = {()}
        for path, _free, _sp in groups:
            if path not in paths:
                for i in range(len(path) + 1):
                    paths.add(path[:i])
        ordered = sorted(paths)
        self.dom_id: dict[tuple[str, ...], int] = {p: i for i, p in enumerate(ordered)}
        self.path: list[tuple[str, ...]] = ordered
        count = len(ordered)
        self.level: list[int] = [len(p) - 1 for p in ordered]
        self.parent: list[int] = [-1] + [self.dom_id[p[:-1]] for p in ordered[1:]]
        self.children: list[list[int]] = [[] for _ in range(count)]
        for d in range(1, count):
            self.children[self.parent[d]].append(d)
        self.anc: list[tuple[int, ...]] = [(0,)] + [()] * (count - 1)
        for d in range(1, count):
            self.anc[d] = (d, *self.anc[self.parent[d]])
        # Ids are pre-order, so the domains under ``d`` are exactly the ids ``d .. end[d] - 1``.
        self.end: list[int] = list(range(1, count + 1))
        for d in range(count - 1, 0, -1):
            p = self.parent[d]
            if self.end[d] > self.end[p]:
                self.end[p] = self.end[d]
        self.classes: list[dict[tuple[Vec, str], list[str]]] = [{} for _ in range(count)]
        for (path, free, sp), names in groups.items():
            names.sort(reverse=True)  # pop() yields the smallest name
            self.classes[self.dom_id[path]][(free, sp)] = names
        self._desc: dict[tuple[int, int], list[int]] = {}
        self._tables: dict[tuple[Shape, ...], Table] = {}
        self._claims: dict[int, tuple[list[list[int]], list[list[int]]]] = {}

    # -- per shape set -------------------------------------------------------------------------------

    def table(self, shapes: Sequence[Shape]) -> Table:
        """The counts of these shapes per domain (built on first use, then kept current by :meth:`place`).
        Machines fitting none of the shapes are left out of ``tot`` and counted as ``too_small``."""
        key = tuple(shapes)
        table = self._tables.get(key)
        if table is not None:
            return table
        nshapes = len(key)
        nkeys = len(self.keys)
        count = len(self.path)
        stats = Exclusions(machines=self.machines, cordoned=self.cordoned, depth=[0] * (nkeys + 1))
        table = Table(key, [[0] * nshapes for _ in range(count)], [[0, 0, 0, 0] for _ in range(count)], stats,
                      [{} for _ in key])
        ranges = range(nshapes)
        for d in range(count):
            classes = self.classes[d]
            if not classes:
                continue
            depth = len(self.path[d])
            cap, tot = table.cap[d], table.tot[d]
            for (free, sp), names in classes.items():
                # Inlined _account (the build's hot loop): one class of n machines added to domain d.
                n = len(names)
                fits = [_fit_of(table, free, sp, s) for s in ranges]
                if sp:
                    stats.nodes_excluded += 1
                    if not any(fits):
                        continue
                elif not any(fits):
                    stats.too_small += n
                    continue
                stats.depth[depth] += n
                for s in ranges:
                    if fits[s]:
                        cap[s] += fits[s] * n
                for r in range(4):
                    if free[r] > 0:
                        tot[r] += free[r] * n
        for d in range(count - 1, 0, -1):
            p = self.parent[d]
            for s, v in enumerate(table.cap[d]):
                table.cap[p][s] += v
            for r, v in enumerate(table.tot[d]):
                table.tot[p][r] += v
        stats.missing_label = sum(stats.depth[:nkeys])
        self._tables[key] = table
        return table

    def _account(self, table: Table, d: int, free: Vec, sp: str, n: int, sign: int, *, aggregate: bool) -> None:
        """Add (sign=1) or remove (sign=-1) ``n`` machines of one class to a table's counts."""
        fits = [_fit_of(table, free, sp, s) for s in range(len(table.shapes))]
        stats = table.stats
        if sp:
            stats.nodes_excluded += sign
            if not any(fits):
                return
        elif not any(fits):
            stats.too_small += sign * n
            return
        depth = len(self.path[d])
        stats.depth[depth] += sign * n
        if depth < len(self.keys):
            stats.missing_label += sign * n
        targets = self.anc[d] if aggregate else (d,)
        for a in targets:
            cap = table.cap[a]
            for s in range(len(fits)):
                if fits[s]:
                    cap[s] += sign * fits[s] * n
            tot = table.tot[a]
            for r in range(4):
                if free[r] > 0:
                    tot[r] += sign * free[r] * n

    # -- updates ---------------------------------------------------------------------------------------

    @property
    def nodes(self) -> dict[str, NodeState]:
        """Every machine of the snapshot by name, in snapshot order, with its current free capacity."""
        if self._nodes is None:
            self._nodes = {node.name: node for node in self._snapshot_nodes}
        return self._nodes

    def _locations(self) -> dict[str, tuple[tuple[str, ...], Vec, str]]:
        """Each indexed machine's class key: (domain path, free, special name)."""
        if self._where is None:
            self._where = {
                name: (self.path[d], free, sp)
                for d, classes in enumerate(self.classes)
                for (free, sp), names in classes.items()
                for name in names
            }
        return self._where

    def place(self, assignments: Sequence[tuple[str, Vec]]) -> None:
        """Take ``request`` off each named machine for good (a gang was placed): classes, node states
        and every table stay equal to a fresh build on the resulting snapshot."""
        self.changes += 1
        for name, req in assignments:
            nodes = self.nodes
            node = nodes[name]
            f = node.free
            free = (f.gpu, f.cpu, f.memory, f.storage)
            nfree = (free[0] - req[0], free[1] - req[1], free[2] - req[2], free[3] - req[3])
            nodes[name] = NodeState(name=name, labels=node.labels, free=Resources(*nfree),
                                    schedulable=node.schedulable)
            where = self._locations().get(name)
            if where is None:  # cordoned: not indexed
                continue
            path, _old, sp = where
            d = self.dom_id[path]
            classes = self.classes[d]
            names = classes[(free, sp)]
            names.remove(name)
            if not names:
                del classes[(free, sp)]
            bucket = classes.get((nfree, sp))
            if bucket is None:
                classes[(nfree, sp)] = [name]
            else:
                _insort_desc(bucket, name)
            self._locations()[name] = (path, nfree, sp)
            for table in self._tables.values():
                self._account(table, d, free, sp, 1, -1, aggregate=True)
                self._account(table, d, nfree, sp, 1, 1, aggregate=True)

    def release(self, assignments: Sequence[tuple[str, Vec]]) -> None:
        """Give ``request`` back to each named machine (gangs evicted within a cycle): the inverse of
        :meth:`place`, with the same guarantee (equal to a fresh build on the resulting snapshot)."""
        self.place([(name, (-req[0], -req[1], -req[2], -req[3])) for name, req in assignments])

    def claims(self, nshapes: int) -> tuple[list[list[int]], list[list[int]]]:
        """Zeroed arrays of the domain phase's claims (per domain: counts per shape, resource totals) for
        a gang of ``nshapes`` shapes, shared between gangs (a search drops every claim before it returns)."""
        arrays = self._claims.get(nshapes)
        if arrays is None:
            count = len(self.path)
            arrays = self._claims[nshapes] = (
                [[0] * nshapes for _ in range(count)], [[0, 0, 0, 0] for _ in range(count)]
            )
        return arrays

    def snapshot(self, pool: str = "") -> ClusterSnapshot:
        """The current state as a snapshot (machines in their original order)."""
        return ClusterSnapshot(pool=pool, keys=self.keys, nodes=tuple(self.nodes.values()))

    def descendants(self, d: int, level: int) -> list[int]:
        """Domains at ``level`` under ``d`` (``d`` itself when it is at that level), in id order."""
        key = (d, level)
        found = self._desc.get(key)
        if found is None:
            if self.level[d] == level:
                found = [d]
            elif self.level[d] > level:
                found = []
            else:
                found = []
                for c in self.children[d]:
                    found.extend(self.descendants(c, level))
            self._desc[key] = found
        return found


def _fit_of(table: Table, free: Vec, sp: str, s: int) -> int:
    if sp and sp in table.shapes[s].excluded:
        return 0
    cache = table.fit_cache[s]
    n = cache.get(free)
    if n is None:
        n = cache[free] = fit_count(free, table.shapes[s].req)
    return n


def _insort_desc(names: list[str], name: str) -> None:
    """Insert into a list sorted in descending order."""
    lo, hi = 0, len(names)
    while lo < hi:
        mid = (lo + hi) // 2
        if names[mid] > name:
            lo = mid + 1
        else:
            hi = mid
    names.insert(lo, name)
