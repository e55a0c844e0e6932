"""Writes of whole inventories: import (docs/design.md §7) and export; the Kubernetes node sync, which
writes through the same :func:`nodes_apply`, is in :mod:`scheduler.services.kubernetes_sync`.

:func:`inventory_import` upserts a parsed :class:`~scheduler.inventory.Inventory` in one transaction
and touches only rows that differ, so importing the same file twice changes nothing. The node sync does
the same from Kubernetes Node objects, cordoning the pool's nodes the cluster no longer lists. Both can
run as a dry run (everything computed, then rolled back).

Parsing is pure (:mod:`scheduler.inventory`); :func:`inventory_load_text`, :func:`inventory_parse`
and :func:`node_spec_parse` are its entry points for the API and the commands, raising
:class:`~osmo.errors.ValidationFailedError` (a 400 envelope with every path) instead of
:class:`~scheduler.inventory.InventoryInvalidError`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
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
    load_inventory_text,
    node_inventory_entry,
    parse_inventory,
    parse_node_spec,
)
from scheduler.models import Node, Pool, Reservation
from scheduler.services.backends import backend_names
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


class DryRunRollback(Exception):
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
        return parse_inventory(document, backends=backend_names())
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
def nodes_apply(
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


def import_finish(report: ImportReport, dry_run: bool) -> None:
    if dry_run:
        report.dry_run = True
        raise DryRunRollback


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
                changed = [key for key, value in inventory.pool_fields.items()
                           if (pool.backend_name if key == "backend" else getattr(pool, key)) != value]
                if changed:
                    pool_update(pool=pool, **{key: inventory.pool_fields[key] for key in changed})
                    report.pool_updated = True
                if inventory.keys is not None:
                    report.keys_changed = pool_keys_set(pool=pool, keys=inventory.keys)
            nodes_apply(
                pool=pool,
                nodes=inventory.nodes,
                report=report,
                missing="prune" if prune else "keep",
                progress=progress,
            )
            pool.refresh_from_db(fields=["keys_version"])
            report.keys_version = pool.keys_version
            import_finish(report, dry_run)
            pool_capacity_changed(pool.pk)
    except DryRunRollback:
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
        "pool": {"name": pool.name, **{key: pool.backend_name if key == "backend" else getattr(pool, key)
                                       for key in POOL_FIELDS}},
        "topology_keys": [{"key": spec.key, "label": spec.label} for spec in pool_key_specs(pool)],
        "nodes": nodes,
    }
