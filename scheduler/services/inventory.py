"""Writes of whole inventories: import (docs/design.md §7), export, and the Kubernetes node sync.

:func:`inventory_import` upserts a parsed :class:`~scheduler.inventory.Inventory` in one transaction
and touches only rows that differ, so importing the same file twice changes nothing.
:func:`pool_sync_from_kubernetes` does the same from Kubernetes Node objects, cordoning the pool's
nodes the cluster no longer lists. Both can run as a dry run (everything computed, then rolled back).

Parsing is pure (:mod:`scheduler.inventory`); :func:`inventory_load_text`, :func:`inventory_parse`
and :func:`node_spec_parse` are its entry points for the API and the commands, raising
:class:`~osmo.errors.ValidationFailedError` (a 400 envelope with every path) instead of
:class:`~scheduler.inventory.InventoryInvalidError`.
"""

from __future__ import annotations

import functools
import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from django.db import transaction
from django.utils import timezone

from osmo.errors import ValidationFailedError
from scheduler.inventory import (
    INVENTORY_RESOURCES,
    NODE_VALUE_FIELDS,
    POOL_FIELDS,
    Inventory,
    InventoryInvalidError,
    NodeSpec,
    foreign_usage,
    kubernetes_node_to_spec,
    load_inventory_text,
    node_inventory_entry,
    node_list_arguments,
    node_list_page,
    node_pod_list_arguments,
    node_ready,
    parse_inventory,
    parse_node_spec,
    pod_list_arguments,
)
from scheduler.models import Node, Pool, Reservation
from scheduler.services.pools import pool_create, pool_key_specs, pool_keys_set, pool_update
from scheduler.services.reservations import pool_capacity_changed

logger = logging.getLogger(__name__)

Progress = Callable[[str], None]
BATCH_SIZE = 2000


@dataclass(slots=True)
class ImportReport:
    """What an import or a sync did (or, in a dry run, would do)."""

    pool: str
    pool_created: bool = False
    pool_updated: bool = False
    keys_changed: bool = False
    keys_version: int = 1
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    marked_unschedulable: int = 0
    deleted: int = 0
    kept_with_reservations: list[str] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)
    dry_run: bool = False
    foreign_pods: int = 0  # the periodic Kubernetes sync: other pods counted on the pool's nodes
    requests: int = 0  # ... Kubernetes API requests made
    seconds: float = 0.0  # ... its wall time

    def sync_record(self) -> dict[str, Any]:
        """What the pool keeps of its last Kubernetes sync (``Pool.k8s_sync``; admin and pool page)."""
        return {"nodes_created": self.created, "nodes_updated": self.updated, "nodes_unchanged": self.unchanged,
                "nodes_cordoned": self.marked_unschedulable, "nodes_skipped": len(self.skipped),
                "foreign_pods": self.foreign_pods, "requests": self.requests, "seconds": self.seconds}

    @property
    def changed(self) -> bool:
        return bool(
            self.pool_created
            or self.pool_updated
            or self.keys_changed
            or self.created
            or self.updated
            or self.marked_unschedulable
            or self.deleted
        )

    def summary(self) -> str:
        parts = [
            f"pool {self.pool}: "
            + ("created" if self.pool_created else "settings updated" if self.pool_updated else "settings unchanged"),
            f"keys {'changed (version ' + str(self.keys_version) + ')' if self.keys_changed else 'unchanged'}",
            f"nodes {self.created} created, {self.updated} updated, {self.unchanged} unchanged",
        ]
        if self.marked_unschedulable:
            parts.append(f"{self.marked_unschedulable} marked unschedulable")
        if self.deleted:
            parts.append(f"{self.deleted} deleted")
        if self.kept_with_reservations:
            parts.append(f"{len(self.kept_with_reservations)} kept (active reservations)")
        if self.skipped:
            parts.append(f"{len(self.skipped)} skipped")
        return ("[dry run] " if self.dry_run else "") + "; ".join(parts)

    def as_dict(self) -> dict[str, Any]:
        return {
            "pool": self.pool,
            "pool_created": self.pool_created,
            "pool_updated": self.pool_updated,
            "keys_changed": self.keys_changed,
            "keys_version": self.keys_version,
            "nodes_created": self.created,
            "nodes_updated": self.updated,
            "nodes_unchanged": self.unchanged,
            "nodes_marked_unschedulable": self.marked_unschedulable,
            "nodes_deleted": self.deleted,
            "nodes_kept_with_reservations": self.kept_with_reservations,
            "nodes_skipped": self.skipped,
            "dry_run": self.dry_run,
        }


class _DryRunRollback(Exception):
    pass


# ------------------------------------------------------------------------------------------------
# Parsing for the API and the commands
# ------------------------------------------------------------------------------------------------
def _validation_failed(exc: InventoryInvalidError) -> ValidationFailedError:
    return ValidationFailedError(exc.to_list(), message=exc.message)


def inventory_load_text(text: str | bytes) -> dict[str, Any]:
    """Load YAML or JSON text safely (:func:`scheduler.inventory.load_inventory_text`).

    Raises:
        ValidationFailedError: unreadable text, with the loader's message.
    """
    try:
        return load_inventory_text(text)
    except InventoryInvalidError as exc:
        raise _validation_failed(exc) from exc


def inventory_parse(document: Any) -> Inventory:
    """Validate a whole inventory document (:func:`scheduler.inventory.parse_inventory`).

    Raises:
        ValidationFailedError: with every problem found, each with its path in the document.
    """
    try:
        return parse_inventory(document)
    except InventoryInvalidError as exc:
        raise _validation_failed(exc) from exc


def node_spec_parse(item: Any, path: str) -> NodeSpec:
    """Validate one node entry (:func:`scheduler.inventory.parse_node_spec`).

    Raises:
        ValidationFailedError: with every problem found, paths under ``path``.
    """
    try:
        spec = parse_node_spec(item, path)
    except InventoryInvalidError as exc:
        raise _validation_failed(exc) from exc
    assert spec is not None  # parse_node_spec raises when it finds a problem and has no error list
    return spec


# ------------------------------------------------------------------------------------------------
# Import / export
# ------------------------------------------------------------------------------------------------
def _apply_nodes(
    *,
    pool: Pool,
    nodes: Sequence[NodeSpec],
    report: ImportReport,
    missing: str,
    progress: Progress | None,
    keep_used: bool = False,
) -> None:
    """Upsert ``nodes`` into ``pool``; nodes of the pool not listed are handled per ``missing``:
    ``keep`` (leave them), ``cordon`` (mark unschedulable), ``prune`` (delete unless reserved, else cordon).
    ``keep_used``: keep each existing node's external usage (clamped to its new capacity)."""
    existing = {node.name: node for node in Node.objects.filter(pool=pool).order_by("pk")}
    now = timezone.now()
    to_create: list[Node] = []
    to_update: list[Node] = []
    for spec in nodes:
        values = spec.values()
        current = existing.pop(spec.name, None)
        if current is None:
            to_create.append(Node(pool=pool, name=spec.name, created_at=now, updated_at=now, **values))
            continue
        if keep_used:
            for _name, _kind, capacity_field, used_field in INVENTORY_RESOURCES:
                values[used_field] = min(getattr(current, used_field), values[capacity_field])
        if any(getattr(current, key) != value for key, value in values.items()):
            for key, value in values.items():
                setattr(current, key, value)
            current.updated_at = now
            to_update.append(current)
        else:
            report.unchanged += 1
    total = len(to_create) + len(to_update)
    done = 0
    for start in range(0, len(to_create), BATCH_SIZE):
        batch = to_create[start : start + BATCH_SIZE]
        Node.objects.bulk_create(batch, batch_size=BATCH_SIZE)
        done += len(batch)
        if progress is not None:
            progress(f"  nodes written: {done}/{total}")
    for start in range(0, len(to_update), BATCH_SIZE):
        batch = to_update[start : start + BATCH_SIZE]
        Node.objects.bulk_update(batch, [*NODE_VALUE_FIELDS, "updated_at"], batch_size=BATCH_SIZE)
        done += len(batch)
        if progress is not None:
            progress(f"  nodes written: {done}/{total}")
    report.created += len(to_create)
    report.updated += len(to_update)

    if missing == "keep" or not existing:
        return
    gone_ids = [node.pk for node in existing.values()]
    reserved_ids = set(
        Reservation.objects.filter(node_id__in=gone_ids, released_at__isnull=True).values_list("node_id", flat=True)
    )
    if missing == "prune":
        deletable = [pk for pk in gone_ids if pk not in reserved_ids]
        report.deleted += len(deletable)
        for start in range(0, len(deletable), BATCH_SIZE):
            Node.objects.filter(pk__in=deletable[start : start + BATCH_SIZE]).delete()
        report.kept_with_reservations.extend(sorted(node.name for node in existing.values() if node.pk in reserved_ids))
        cordon_ids = sorted(reserved_ids)
    else:
        cordon_ids = gone_ids
    report.marked_unschedulable += Node.objects.filter(pk__in=cordon_ids, schedulable=True).update(
        schedulable=False, updated_at=now
    )


def _finish(report: ImportReport, dry_run: bool) -> None:
    if dry_run:
        report.dry_run = True
        raise _DryRunRollback


def inventory_import(
    inventory: Inventory, *, prune: bool = False, dry_run: bool = False, progress: Progress | None = None
) -> ImportReport:
    """Upsert a parsed inventory: the pool (fields the file sets), its keys (through
    :func:`~scheduler.services.pools.pool_keys_set`), and its nodes (rows that differ only). Atomic.

    ``prune``: delete the pool's nodes the file does not list (nodes with active reservations are
    kept and cordoned instead). ``dry_run``: compute the report, write nothing.
    """
    report = ImportReport(pool=inventory.name)
    try:
        with transaction.atomic():
            pool = Pool.objects.select_for_update().filter(name=inventory.name).first()
            if pool is None:
                pool = pool_create(name=inventory.name, keys=inventory.keys or (), **inventory.pool_fields)
                report.pool_created = True
                report.keys_changed = bool(inventory.keys)
            else:
                changed = [key for key, value in inventory.pool_fields.items() if getattr(pool, key) != value]
                if changed:
                    pool_update(pool=pool, **{key: inventory.pool_fields[key] for key in changed})
                    report.pool_updated = True
                if inventory.keys is not None:
                    report.keys_changed = pool_keys_set(pool=pool, keys=inventory.keys)
            _apply_nodes(
                pool=pool,
                nodes=inventory.nodes,
                report=report,
                missing="prune" if prune else "keep",
                progress=progress,
            )
            pool.refresh_from_db(fields=["keys_version"])
            report.keys_version = pool.keys_version
            _finish(report, dry_run)
            pool_capacity_changed(pool.pk)
    except _DryRunRollback:
        pass
    logger.info("pool.imported", extra=report.as_dict())
    return report


def inventory_import_text(text: str | bytes, **kwargs: Any) -> ImportReport:
    """Load, validate and import an inventory from YAML/JSON text (see :func:`inventory_import`)."""
    return inventory_import(inventory_parse(inventory_load_text(text)), **kwargs)


def pool_export(pool: Pool) -> dict[str, Any]:
    """The pool as an inventory document (docs/design.md §7) that :func:`inventory_import` reads back unchanged."""
    machines = Node.objects.filter(pool=pool).order_by("name").iterator(chunk_size=BATCH_SIZE)
    nodes = [node_inventory_entry(node) for node in machines]
    return {
        "pool": {"name": pool.name, **{key: getattr(pool, key) for key in POOL_FIELDS}},
        "topology_keys": [{"key": spec.key, "label": spec.label} for spec in pool_key_specs(pool)],
        "nodes": nodes,
    }


# ------------------------------------------------------------------------------------------------
# Kubernetes node sync
# ------------------------------------------------------------------------------------------------
# A stale ``continue`` token (the apiserver compacted the list's resource version) is answered 410 Gone;
# the listing starts again from the first page, at most this many times.
LIST_RESTARTS = 3


def _fold_pages(call: Callable[..., Any], arguments: Callable[[str | None], dict[str, Any]],
                fold: Callable[[list[Mapping[str, Any]]], None], restart: Callable[[], None]) -> int:
    """Hand every page of a paginated Kubernetes list (``metadata.continue``) to ``fold``, one page in
    memory at a time; on 410 Gone for a continued page, ``restart()`` (forget what was folded) and list
    again from the first page. Returns the number of requests made."""
    from kubernetes.client.exceptions import ApiException

    requests = 0
    restarts = 0
    while True:
        token: str | None = None
        try:
            while True:
                requests += 1
                page = node_list_page(call(**arguments(token)).data)
                fold(page.items)
                token = page.continue_token
                if not token:
                    return requests
        except ApiException as exc:
            if exc.status != 410 or token is None or restarts >= LIST_RESTARTS:
                raise
            restarts += 1
            restart()
            logger.info("kubernetes.list_restarted", extra={"requests": requests, "restarts": restarts})


def _list_pages(call: Callable[..., Any], arguments: Callable[[str | None], dict[str, Any]]
                ) -> tuple[list[Mapping[str, Any]], int]:
    """Every item of a paginated Kubernetes list (:func:`_fold_pages`), and the number of requests made."""
    items: list[Mapping[str, Any]] = []
    requests = _fold_pages(call, arguments, items.extend, items.clear)
    return items, requests


def kubernetes_nodes_list(
    core_v1: Any, *, label_selector: str | None, page_size: int = 500
) -> tuple[list[Mapping[str, Any]], int]:
    """All nodes matching ``label_selector``, following ``metadata.continue`` pages (restarted on 410
    Gone). Returns the raw JSON items and the number of requests made. ``core_v1`` is a
    ``kubernetes.client.CoreV1Api``."""
    return _list_pages(core_v1.list_node, lambda token: node_list_arguments(
        label_selector=label_selector, page_size=page_size, continue_token=token))


def kubernetes_pods_list(core_v1: Any, *, page_size: int = 500) -> tuple[list[Mapping[str, Any]], int]:
    """Every non-terminal pod of every namespace (one paginated listing, ``ceil(pods / page_size)``
    requests however many nodes the pools have), and the number of requests made."""
    return _list_pages(core_v1.list_pod_for_all_namespaces,
                       lambda token: pod_list_arguments(page_size=page_size, continue_token=token))


def kubernetes_foreign_usage(
    core_v1: Any, *, nodes: Sequence[str], managed_by_label: str, managed_by: str, page_size: int = 500
) -> tuple[dict[str, dict[str, int]], int, int]:
    """The requests of the other pods on ``nodes`` summed per node (:func:`scheduler.inventory.foreign_usage`;
    only nodes some such pod is on), page by page of one listing of every namespace's non-terminal pods
    (one page in memory at a time). Returns the usage, the pods counted and the requests made."""
    usage: dict[str, dict[str, int]] = {}
    counted = 0
    members = frozenset(nodes)

    def fold(items: list[Mapping[str, Any]]) -> None:
        nonlocal counted
        page, page_counted = foreign_usage(items, nodes=members, managed_by_label=managed_by_label,
                                           managed_by=managed_by, sparse=True)
        counted += page_counted
        for name, amounts in page.items():
            total = usage.setdefault(name, dict.fromkeys(amounts, 0))
            for kind, amount in amounts.items():
                total[kind] += amount

    def restart() -> None:
        nonlocal counted
        usage.clear()
        counted = 0

    requests = _fold_pages(core_v1.list_pod_for_all_namespaces,
                           lambda token: pod_list_arguments(page_size=page_size, continue_token=token), fold, restart)
    return usage, counted, requests


def pool_follow_kubernetes(
    *, pool: Pool, core_v1: Any, managed_by_label: str, managed_by: str, tolerated_taints: Iterable[str] = (),
    page_size: int = 500,
) -> ImportReport:
    """The periodic sync of a Kubernetes pool (docs/kubernetes.md, "What the cluster says"): its nodes
    (``k8s_node_selector``; readiness and taints), and the requests of every other pod on them as the
    nodes' external usage. Records on the pool when it ran and what changed (``k8s_synced_at``,
    ``k8s_sync``). Raises the client's errors (the caller counts them)."""
    started = time.monotonic()
    nodes, node_requests = kubernetes_nodes_list(core_v1, label_selector=pool.k8s_node_selector or None,
                                                 page_size=page_size)
    names = [str((item.get("metadata") or {}).get("name")) for item in nodes]
    usage, foreign, pod_requests_made = kubernetes_foreign_usage(
        core_v1, nodes=names, managed_by_label=managed_by_label, managed_by=managed_by, page_size=page_size)
    report = pool_sync_from_kubernetes(pool=pool, items=nodes, tolerated_taints=tolerated_taints, usage=usage)
    report.foreign_pods = foreign
    report.requests = node_requests + pod_requests_made
    report.seconds = round(time.monotonic() - started, 3)
    Pool.objects.filter(pk=pool.pk).update(k8s_synced_at=timezone.now(), k8s_sync=report.sync_record())
    return report


NODE_READY, NODE_NOT_READY, NODE_GONE = "ready", "not_ready", "gone"


def _node_pod_arguments(token: str | None, *, node: str, page_size: int) -> dict[str, Any]:
    return node_pod_list_arguments(node=node, page_size=page_size, continue_token=token)


def nodes_follow_kubernetes(
    *, pool: Pool, core_v1: Any, names: Iterable[str], managed_by_label: str, managed_by: str,
    tolerated_taints: Iterable[str] = (), page_size: int = 500,
) -> dict[str, str]:
    """Read a few of the pool's nodes again, now (docs/kubernetes.md §10: a pod the cluster refused or
    lost): each node object (readiness, cordon, taints) and the other pods bound to it (one
    ``spec.nodeName`` field-selected listing each), and write the node's row: schedulable or not, and
    its external usage. A node the API no longer has (404) is cordoned, as the periodic sync does.
    Moves the pool's epochs on when a row changed. Returns each node's state: :data:`NODE_READY`,
    :data:`NODE_NOT_READY` or :data:`NODE_GONE`. Raises the client's errors but 404."""
    from kubernetes.client.exceptions import ApiException

    states: dict[str, str] = {}
    changed = False
    for name in sorted(set(names)):
        row = Node.objects.filter(pool=pool, name=name).first()
        try:
            item = json.loads(core_v1.read_node(name, _preload_content=False).data)
        except ApiException as exc:
            if exc.status != 404:
                raise
            states[name] = NODE_GONE
            if row is not None and row.schedulable:
                Node.objects.filter(pk=row.pk).update(schedulable=False, updated_at=timezone.now())
                changed = True
            continue
        states[name] = NODE_READY if node_ready(item) else NODE_NOT_READY
        spec, _reason = kubernetes_node_to_spec(item, tolerated_taints=tolerated_taints)
        if row is None or spec is None:
            continue
        pods, _requests = _list_pages(core_v1.list_pod_for_all_namespaces, functools.partial(
            _node_pod_arguments, node=name, page_size=page_size))
        usage, _counted = foreign_usage(pods, nodes=[name], managed_by_label=managed_by_label, managed_by=managed_by)
        values = {"schedulable": spec.schedulable}
        for _name, kind, capacity, used in INVENTORY_RESOURCES:
            values[used] = min(int(usage[name].get(kind, 0)), getattr(row, capacity))
        if any(getattr(row, field) != value for field, value in values.items()):
            Node.objects.filter(pk=row.pk).update(**values, updated_at=timezone.now())
            changed = True
    logger.info("pool.nodes_followed", extra={"pool": pool.name, "nodes": states, "changed": changed})
    if changed:
        pool_capacity_changed(pool.pk)
    return states


def pool_sync_from_kubernetes(
    *,
    pool: Pool,
    items: Sequence[Mapping[str, Any]],
    prune: bool = False,
    dry_run: bool = False,
    tolerated_taints: Iterable[str] = (),
    progress: Progress | None = None,
    usage: Mapping[str, Mapping[str, int]] | None = None,
) -> ImportReport:
    """Upsert the pool's nodes from Kubernetes node objects (see
    :func:`scheduler.inventory.kubernetes_node_to_spec`).

    Labels and capacity follow the cluster; external usage (``used_*``) is ``usage`` (per node name and
    resource kind, clamped to the capacity: :func:`pool_follow_kubernetes`), or, without it, kept,
    clamped to the new capacity. Nodes of the pool that the cluster no longer lists are cordoned (never deleted while
    tasks hold reservations on them); with ``prune`` those without active reservations are deleted.
    """
    report = ImportReport(pool=pool.name)
    specs: list[NodeSpec] = []
    position: dict[str, int] = {}  # node name -> its index in ``items``
    for index, item in enumerate(items):
        spec, reason = kubernetes_node_to_spec(item, tolerated_taints=tolerated_taints)
        if spec is None or spec.name in position:
            report.skipped.append({"path": f"items[{index}]", "message": reason or "duplicate node name"})
            continue
        position[spec.name] = index
        if usage is not None:
            held = usage.get(spec.name) or {}
            spec = replace(spec, **{used: min(int(held.get(kind, 0)), getattr(spec, capacity))
                                    for _name, kind, capacity, used in INVENTORY_RESOURCES})
        specs.append(spec)
    # A machine belongs to one pool: overlapping node selectors must not book its GPUs twice.
    elsewhere = dict(Node.objects.filter(name__in=list(position)).exclude(pool=pool)
                     .values_list("name", "pool__name"))
    if elsewhere:
        for spec in specs:
            if spec.name in elsewhere:
                report.skipped.append({
                    "path": f"items[{position[spec.name]}]",
                    "message": f"node {spec.name} already belongs to pool {elsewhere[spec.name]}; not synced into "
                    f"pool {pool.name} (do the two pools' node selectors overlap?)",
                })
        logger.warning("pool.sync_overlap", extra={"pool": pool.name, "nodes": sorted(elsewhere)[:20],
                                                   "other_pools": sorted(set(elsewhere.values()))})
        specs = [spec for spec in specs if spec.name not in elsewhere]
    try:
        with transaction.atomic():
            locked = Pool.objects.select_for_update().get(pk=pool.pk)
            _apply_nodes(
                pool=locked,
                nodes=specs,
                report=report,
                missing="prune" if prune else "cordon",
                progress=progress,
                keep_used=usage is None,
            )
            report.keys_version = locked.keys_version
            _finish(report, dry_run)
            if report.changed:
                pool_capacity_changed(locked.pk)
    except _DryRunRollback:
        pass
    logger.info("pool.synced_from_kubernetes", extra=report.as_dict())
    return report
