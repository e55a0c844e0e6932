"""Reads of pools, topology keys and nodes, shared by the API, the admin, the pages and the solver snapshot.

Free capacity is defined once, here, per node and per resource::

    free = capacity - used (external usage, ``Node.used_*``) - reserved (active reservations)

where *active* reservations are ``Reservation`` rows with ``released_at IS NULL``. Aggregates over a
pool or a domain count ``free`` on schedulable nodes only (a cordoned machine offers nothing to the
scheduler), and never let one over-committed node (external usage grew after a reservation) eat the
free capacity of its neighbours: each node contributes ``max(free, 0)``.

Every function runs a fixed number of queries whatever the number of nodes: per-node reservation
sums are correlated subqueries, per-domain totals are one ``GROUP BY`` over the label values of the
pool's keys, rolled up to the coarser levels in Python.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db.models import (
    BigIntegerField,
    Count,
    F,
    OuterRef,
    Prefetch,
    QuerySet,
    Subquery,
    Sum,
    TextField,
    Value,
)
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast, Coalesce, Greatest

from osmo.types import Viewer
from parsing.natural import natural_sorted
from scheduler.models import Node, Pool, Reservation, TeamQuota, TopologyKey
from scheduler.resources import RESOURCE_API_NAMES
from scheduler.resources import RESOURCES as RESOURCE_TABLE

# (resource name in API output, capacity field, external usage field, reservation field)
RESOURCES: tuple[tuple[str, str, str, str], ...] = tuple(
    (r.api_name, r.capacity_field, r.used_field, r.amount_field) for r in RESOURCE_TABLE
)


def label_text(label: str, field: str = "labels") -> Cast:
    """A node label's value as text, for annotations that are filtered, grouped or ordered on.

    Cast, because Django compares a bare ``KeyTextTransform`` annotation as JSON on SQLite
    (``= JSON_EXTRACT('zone-1', '$')``: "malformed JSON"), which broke the embedded default.
    """
    return Cast(KeyTextTransform(label, field), output_field=TextField())


def _reserved_subquery(field: str) -> Coalesce:
    active = (
        Reservation.objects.filter(node=OuterRef("pk"), released_at__isnull=True)
        .order_by()
        .values("node")
        .annotate(total=Sum(field))
        .values("total")
    )
    return Coalesce(Subquery(active, output_field=BigIntegerField()), Value(0), output_field=BigIntegerField())


def node_queryset_with_usage(pool: Pool | int | None = None) -> QuerySet[Node]:
    """Nodes annotated per resource with ``reserved_<r>`` and ``free_<r>`` (``r`` in :data:`RESOURCE_API_NAMES`).

    ``free_<r> = capacity - used - reserved`` for the node itself (negative only if over-committed),
    whatever its ``schedulable`` flag. One query, whatever the number of nodes or reservations.
    """
    queryset = Node.objects.all()
    if pool is not None:
        queryset = queryset.filter(pool=pool)
    annotations: dict[str, Any] = {}
    for name, _capacity, _used, reserved in RESOURCES:
        annotations[f"reserved_{name}"] = _reserved_subquery(reserved)
    queryset = queryset.annotate(**annotations)
    return queryset.annotate(
        **{
            f"free_{name}": F(capacity) - F(used) - F(f"reserved_{name}")
            for name, capacity, used, _reserved in RESOURCES
        }
    )


def node_usage_dict(node: Node) -> dict[str, dict[str, int]]:
    """``capacity``/``used``/``reserved``/``free`` of a node from :func:`node_queryset_with_usage`."""
    return {
        "capacity": {name: getattr(node, capacity) for name, capacity, _u, _r in RESOURCES},
        "used": {name: getattr(node, used) for name, _c, used, _r in RESOURCES},
        "reserved": {name: getattr(node, f"reserved_{name}") for name in RESOURCE_API_NAMES},
        "free": {name: getattr(node, f"free_{name}") for name in RESOURCE_API_NAMES},
    }


def pool_keys(pool: Pool) -> list[TopologyKey]:
    """The pool's keys, coarsest first. Uses the prefetch of :func:`pool_list` when present."""
    return sorted(pool.topology_keys.all(), key=lambda key: key.position)


def pool_list() -> QuerySet[Pool]:
    """Pools with their keys prefetched in order (two queries for any number of pools)."""
    return Pool.objects.order_by("name").select_related("backend_ref").prefetch_related(
        Prefetch("topology_keys", queryset=TopologyKey.objects.order_by("position"))
    )


def pool_get(*, name: str) -> Pool | None:
    """The pool of that name, or None; None for a name with a NUL character, which no pool has (PostgreSQL
    refuses NUL in a query: the pool page of ``/pools/%00/`` answered 500)."""
    if "\x00" in name:
        return None
    return pool_list().filter(name=name).first()


def pool_names(*, user: Viewer | None = None) -> list[str]:
    """Every pool's name (those ``user`` may see, when given), in natural order (one query): the
    choices of the pages' pool pickers."""
    from scheduler.services.access import pools_visible

    pools = Pool.objects.order_by("name")
    if user is not None:
        pools = pools_visible(pools, user=user)
    return natural_sorted(pools.values_list("name", flat=True))


@dataclass(slots=True)
class Totals:
    """Capacity, external usage, reservations and free capacity of a set of nodes, per resource."""

    node_count: int = 0
    schedulable_node_count: int = 0
    capacity: dict[str, int] = field(default_factory=lambda: dict.fromkeys(RESOURCE_API_NAMES, 0))
    used: dict[str, int] = field(default_factory=lambda: dict.fromkeys(RESOURCE_API_NAMES, 0))
    reserved: dict[str, int] = field(default_factory=lambda: dict.fromkeys(RESOURCE_API_NAMES, 0))
    free: dict[str, int] = field(default_factory=lambda: dict.fromkeys(RESOURCE_API_NAMES, 0))

    def merge(self, other: Totals) -> None:
        self.node_count += other.node_count
        self.schedulable_node_count += other.schedulable_node_count
        for name in RESOURCE_API_NAMES:
            self.capacity[name] += other.capacity[name]
            self.used[name] += other.used[name]
            self.reserved[name] += other.reserved[name]
            self.free[name] += other.free[name]

    def as_dict(self) -> dict[str, Any]:
        return {
            "node_count": self.node_count,
            "schedulable_node_count": self.schedulable_node_count,
            "capacity": dict(self.capacity),
            "used": dict(self.used),
            "reserved": dict(self.reserved),
            "free": dict(self.free),
        }


def _grouped_totals(
    *, pool_ids: Sequence[int], labels: Sequence[str], reservations: bool = True
) -> dict[tuple[Any, ...], Totals]:
    """Totals per ``(pool_id, value of labels[0], ..., value of labels[-1])`` (``None`` for a missing
    label). Two queries whatever the number of nodes: nodes grouped by those values (capacity, usage,
    headroom ``max(capacity - used, 0)``), then the active reservations summed per node, which adjust
    ``reserved`` and ``free`` of their group exactly as :func:`node_queryset_with_usage` defines them.

    (Correlated per-node subqueries inside the GROUP BY cost ~1 s on 20,000 nodes; this costs ~0.1 s.)
    """
    aliases = {_label_alias(index): label_text(label) for index, label in enumerate(labels)}
    annotations: dict[str, Any] = {"node_count": Count("pk")}
    for name, capacity, used, _reserved in RESOURCES:
        annotations[f"sum_capacity_{name}"] = Coalesce(Sum(capacity), Value(0), output_field=BigIntegerField())
        annotations[f"sum_used_{name}"] = Coalesce(Sum(used), Value(0), output_field=BigIntegerField())
        annotations[f"sum_headroom_{name}"] = Coalesce(
            Sum(Greatest(F(capacity) - F(used), Value(0))), Value(0), output_field=BigIntegerField()
        )
    rows = (
        Node.objects.filter(pool_id__in=pool_ids)
        .order_by()
        .annotate(**aliases)
        .values("pool_id", "schedulable", *aliases)
        .annotate(**annotations)
    )
    groups: dict[tuple[Any, ...], Totals] = {}
    for row in rows:
        group_key = (row["pool_id"], *(row[alias] for alias in aliases))
        totals = groups.setdefault(group_key, Totals())
        totals.node_count += row["node_count"]
        if row["schedulable"]:
            totals.schedulable_node_count += row["node_count"]
        for name in RESOURCE_API_NAMES:
            totals.capacity[name] += row[f"sum_capacity_{name}"]
            totals.used[name] += row[f"sum_used_{name}"]
            if row["schedulable"]:
                totals.free[name] += row[f"sum_headroom_{name}"]

    if not reservations:
        return groups
    node_aliases = {
        alias: label_text(label, "node__labels") for alias, label in zip(aliases, labels, strict=True)
    }
    node_fields = [f"node__{capacity}" for _n, capacity, _u, _r in RESOURCES]
    node_fields += [f"node__{used}" for _n, _c, used, _r in RESOURCES]
    reserved_rows = (
        Reservation.objects.filter(node__pool_id__in=pool_ids, released_at__isnull=True)
        .order_by()
        .annotate(**node_aliases)
        .values("node_id", "node__pool_id", "node__schedulable", *node_fields, *node_aliases)
        .annotate(
            **{
                f"reserved_{name}": Coalesce(Sum(field_name), Value(0), output_field=BigIntegerField())
                for name, _c, _u, field_name in RESOURCES
            }
        )
    )
    for row in reserved_rows:
        totals = groups[(row["node__pool_id"], *(row[alias] for alias in aliases))]
        for name, capacity, used, _reserved in RESOURCES:
            reserved = row[f"reserved_{name}"]
            totals.reserved[name] += reserved
            if row["node__schedulable"]:
                headroom = row[f"node__{capacity}"] - row[f"node__{used}"]
                totals.free[name] -= max(headroom, 0) - max(headroom - reserved, 0)
    return groups


def pools_totals(pool_ids: Iterable[int]) -> dict[int, Totals]:
    """Totals per pool for the given pools, in two queries. Pools without nodes get zero totals."""
    ids = list(pool_ids)
    result = {pool_id: Totals() for pool_id in ids}
    if ids:
        for (pool_id,), totals in _grouped_totals(pool_ids=ids, labels=()).items():
            result[pool_id].merge(totals)
    return result


def pool_totals_by_labels(
    pool: Pool, *, labels: Sequence[str], reservations: bool = True
) -> dict[tuple[str | None, ...], Totals]:
    """Totals of the pool's nodes per combination of values of ``labels`` (``None`` for a missing
    label), in two queries whatever the number of nodes: the groups the domain tree
    (:mod:`scheduler.reads.domains`) and :func:`pool_capacity_summary` roll up. ``reservations=False``: as
    if nothing were reserved (one query; :func:`pool_reserved_gpu_by_labels` gives the rest)."""
    groups = _grouped_totals(pool_ids=[pool.pk], labels=labels, reservations=reservations)
    return {tuple(values): totals for (_pool_id, *values), totals in groups.items()}


def pool_reserved_gpu_by_labels(pool: Pool, *, labels: Sequence[str]) -> dict[tuple[str | None, ...], tuple[int, int]]:
    """Per combination of values of ``labels``: GPUs reserved there and how much less is free because
    of them (a node's free GPUs never go below zero, and cordoned nodes count no free GPUs), in one
    query over the active reservations: what :func:`pool_totals_by_labels` adds to its
    ``reservations=False`` form."""
    aliases = {f"domain_value_{index}": label_text(label, "node__labels") for index, label in enumerate(labels)}
    rows = (
        Reservation.objects.filter(pool=pool, released_at__isnull=True, node__isnull=False)
        .order_by()
        .annotate(**aliases)
        .values("node_id", "node__schedulable", "node__gpu", "node__used_gpu", *aliases)
        .annotate(reserved=Coalesce(Sum("gpu"), Value(0), output_field=BigIntegerField()))
    )
    result: dict[tuple[str | None, ...], tuple[int, int]] = {}
    for row in rows:
        path = tuple(row[alias] for alias in aliases)
        reserved = int(row["reserved"])
        less_free = 0
        if row["node__schedulable"]:
            headroom = row["node__gpu"] - row["node__used_gpu"]
            less_free = max(headroom, 0) - max(headroom - reserved, 0)
        held, fewer = result.get(path, (0, 0))
        result[path] = (held + reserved, fewer + less_free)
    return result


def _label_alias(position: int) -> str:
    return f"topology_value_{position}"


def pool_capacity_summary(pool: Pool, *, keys: Sequence[TopologyKey] | None = None) -> dict[str, Any]:
    """Totals of a pool, and per domain of each of its keys, in two queries (plus one for the keys
    unless given), whatever the number of nodes, reservations or keys.

    A domain of key ``k`` (position ``i``) is identified by the label values of keys ``0..i``: rack
    ``r1`` in zone ``a`` and rack ``r1`` in zone ``b`` are two domains (docs/design.md §4). Nodes missing the
    label of ``k`` or of a coarser key belong to no domain of ``k``; they are counted in
    ``unlabelled`` for that key.

    Returns ``{"totals": {...}, "keys": [{"key", "label", "position", "domain_count", "domains":
    [{"path": {key: value, ...}, "value", **totals}], "unlabelled": {...}}]}`` with domains sorted by path.
    """
    ordered_keys = list(keys) if keys is not None else list(pool.topology_keys.order_by("position"))
    groups = _grouped_totals(pool_ids=[pool.pk], labels=[key.label for key in ordered_keys])
    totals = Totals()
    per_key: list[dict[tuple[str, ...], Totals]] = [{} for _ in ordered_keys]
    unlabelled: list[Totals] = [Totals() for _ in ordered_keys]
    for (_pool_id, *values), group in groups.items():
        totals.merge(group)
        for index in range(len(ordered_keys)):
            path = values[: index + 1]
            if any(value is None for value in path):
                unlabelled[index].merge(group)
            else:
                per_key[index].setdefault(tuple(path), Totals()).merge(group)
    keys_out = []
    for index, key in enumerate(ordered_keys):
        names = [k.key for k in ordered_keys[: index + 1]]
        domains = [
            {"path": dict(zip(names, path, strict=True)), "value": path[-1], **domain.as_dict()}
            for path, domain in sorted(per_key[index].items())
        ]
        keys_out.append(
            {
                "key": key.key,
                "label": key.label,
                "position": key.position,
                "domain_count": len(domains),
                "domains": domains,
                "unlabelled": unlabelled[index].as_dict(),
            }
        )
    return {"totals": totals.as_dict(), "keys": keys_out}


def node_list(*, pool: Pool) -> QuerySet[Node]:
    """The pool's nodes with usage annotations, ordered by name (for the API's node list)."""
    return node_queryset_with_usage(pool).order_by("name", "pk")


def node_labels_by_name(*, pool: Pool, names: Iterable[str]) -> dict[str, dict[str, str]]:
    """The labels of the pool's nodes with these names (one query; none when ``names`` is empty)."""
    wanted = set(names)
    if not wanted:
        return {}
    rows = Node.objects.filter(pool=pool, name__in=wanted).values_list("name", "labels")
    return {name: labels or {} for name, labels in rows}


__all__ = [
    "RESOURCES",
    "RESOURCE_API_NAMES",
    "Totals",
    "node_labels_by_name",
    "node_list",
    "node_queryset_with_usage",
    "node_usage_dict",
    "pool_capacity_summary",
    "pool_get",
    "pool_keys",
    "pool_list",
    "pool_names",
    "pool_totals_by_labels",
    "pools_totals",
]


def pool_quota_use(pool: Pool) -> list[dict[str, Any]]:
    """Per team with a quota or work holding GPUs in the pool, by team name: its quota (None: no
    quota, the whole pool), the GPUs its HIGH and NORMAL work holds, and the GPUs its LOW
    (preemptible) work holds (two queries). Work without a team is the row with ``team`` None."""
    return pools_quota_use([pool.pk])[pool.pk]


def pools_quota_use(pool_ids: Iterable[int]) -> dict[int, list[dict[str, Any]]]:
    """:func:`pool_quota_use` of many pools in two queries, from the reservations' own team and
    preemptibility (copied there when they are written)."""
    ids = list(pool_ids)
    quotas: dict[int, dict[int, tuple[str, int]]] = {pk: {} for pk in ids}
    for q in TeamQuota.objects.filter(pool_id__in=ids).select_related("team"):
        quotas[q.pool_id][q.team_id] = (q.team.name, q.gpu)
    held: dict[int, dict[int | None, dict[str, Any]]] = {pk: {} for pk in ids}
    rows = (
        Reservation.objects.filter(pool_id__in=ids, released_at__isnull=True)
        .order_by()
        .values("pool_id", "team_id", "team__name", "preemptible")
        .annotate(gpu=Sum("gpu"))
    )
    for row in rows:
        entry = held[row["pool_id"]].setdefault(row["team_id"], {"name": row["team__name"], "used": 0, "low": 0})
        entry["low" if row["preemptible"] else "used"] += row["gpu"] or 0
    out: dict[int, list[dict[str, Any]]] = {}
    for pk in ids:
        result = []
        for team_id in set(quotas[pk]) | set(held[pk]):
            name = quotas[pk][team_id][0] if team_id in quotas[pk] else held[pk][team_id]["name"]
            use = held[pk].get(team_id, {})
            result.append({"team": name, "quota_gpu": quotas[pk][team_id][1] if team_id in quotas[pk] else None,
                           "used_gpu": use.get("used", 0), "low_gpu": use.get("low", 0)})
        out[pk] = sorted(result, key=lambda row: (row["team"] is None, row["team"] or ""))
    return out
