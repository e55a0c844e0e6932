"""Writes to pools, topology keys and nodes: the inventory file (parse, import, export), synthetic
pools, key changes, cordon/uncordon and the Kubernetes node sync.

Inventory file (design §7), YAML or JSON::

    pool: {name: nvl72, description: "GB200 NVL72 racks"}
    topology_keys:                 # coarsest first
    - {key: zone, label: topology.kubernetes.io/zone}
    nodes:
    - name: node-0001
      labels: {topology.kubernetes.io/zone: z1}
      capacity: {gpu: 4, cpu: 144, memory: 960Gi, storage: 4Ti}
      allocated: {gpu: 0}          # used by things outside this service
      schedulable: true

:func:`inventory_parse` checks the whole document and reports every problem with its place in the
file (``nodes[3].capacity.gpu``) before anything is written. :func:`inventory_import` upserts in one
transaction and touches only rows that differ, so importing the same file twice changes nothing.

Key-change rule: every change of a pool's keys goes through :func:`pool_keys_set`, which bumps
``Pool.keys_version`` when the ordered ``(key, label)`` list actually changes. The placement cycle
(:mod:`scheduler.services.placement`) does not place a queued group built on an older version whose
tree uses a removed key or keys in another order; it records why (docs/pools.md).
"""

from __future__ import annotations

import json
import logging
import random
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from osmo.errors import ConflictError, ValidationFailedError
from parsing import (
    MAX_INT_BITS,
    DocumentInvalidError,
    DocumentLimits,
    QuantityError,
    format_quantity,
    load_document,
    parse_quantity,
)
from parsing import storable_text as _storable_text
from scheduler.choices import DispatchBackend
from scheduler.models import (
    KEY_NAME_RE,
    LABEL_KEY_RE,
    NODE_NAME_RE,
    POOL_NAME_RE,
    Node,
    Pool,
    Reservation,
    TopologyKey,
)

logger = logging.getLogger(__name__)

Progress = Callable[[str], None]

# (inventory name, quantity kind, capacity field, external usage field)
INVENTORY_RESOURCES: tuple[tuple[str, str, str, str], ...] = (
    ("gpu", "gpu", "gpu", "used_gpu"),
    ("cpu", "cpu", "cpu_millis", "used_cpu_millis"),
    ("memory", "memory", "memory_bytes", "used_memory_bytes"),
    ("storage", "storage", "storage_bytes", "used_storage_bytes"),
)
NODE_VALUE_FIELDS: tuple[str, ...] = (
    "labels",
    "gpu",
    "cpu_millis",
    "memory_bytes",
    "storage_bytes",
    "used_gpu",
    "used_cpu_millis",
    "used_memory_bytes",
    "used_storage_bytes",
    "schedulable",
)
POOL_FIELDS: tuple[str, ...] = ("description", "backend", "sim_task_seconds", "k8s_namespace", "k8s_node_selector")
RESERVED_POOL_NAMES = frozenset({"import"})  # /api/pools/import/ is the import endpoint
MAX_GPU = 2**31 - 1
# Real hierarchies have a handful of levels. Each key is a GROUP BY column of the capacity summary:
# PostgreSQL refuses a query of more than 1664 columns (a 500 on every read of the pool).
MAX_TOPOLOGY_KEYS = 32
MAX_NODES_PER_FILE = 200_000
BATCH_SIZE = 2000

LABEL_VALUE_RE = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_-]+")


# ------------------------------------------------------------------------------------------------
# Values
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class KeySpec:
    """One topology key as the file or the API gives it: its name and the node label holding its value."""

    key: str
    label: str


@dataclass(frozen=True, slots=True)
class NodeSpec:
    """One machine of an inventory, in base units (gpu devices, cpu millicores, bytes)."""

    name: str
    labels: dict[str, str]
    gpu: int = 0
    cpu_millis: int = 0
    memory_bytes: int = 0
    storage_bytes: int = 0
    used_gpu: int = 0
    used_cpu_millis: int = 0
    used_memory_bytes: int = 0
    used_storage_bytes: int = 0
    schedulable: bool = True

    def values(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in NODE_VALUE_FIELDS}


@dataclass(frozen=True, slots=True)
class Inventory:
    """A parsed, valid inventory document. ``pool_fields`` holds only the fields the file sets."""

    name: str
    pool_fields: dict[str, Any]
    keys: tuple[KeySpec, ...] | None
    nodes: tuple[NodeSpec, ...]


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
            + ("created" if self.pool_created else "updated" if self.pool_updated else "unchanged"),
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
# Parsing and validation (pure: no database)
# ------------------------------------------------------------------------------------------------
def _join(path: str, key: object) -> str:
    """``path`` extended by a mapping key or a list index; non-plain keys are written ``["a.b/c"]``."""
    if isinstance(key, int) and not isinstance(key, bool):
        return f"{path}[{key}]"
    text = str(key)
    if _PLAIN_KEY.fullmatch(text):
        return f"{path}.{text}" if path else text
    return f"{path}[{json.dumps(text)}]"


class _Errors:
    def __init__(self) -> None:
        self.items: list[dict[str, str]] = []

    def add(self, path: str, message: str) -> None:
        self.items.append({"path": path, "message": message})

    def raise_if_any(self, message: str = "The pool inventory is invalid.") -> None:
        if self.items:
            raise ValidationFailedError(self.items, message=message)


# YAML (0x..., 0o...) can give integers of any size; Python refuses to format more than 4300 digits,
# so an error message quoting one would fail. Anything this wide is far beyond every limit here.
def _huge_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > MAX_INT_BITS


def _check_mapping(value: Any, path: str, errors: _Errors, *, allowed: Iterable[str] | None = None) -> bool:
    if not isinstance(value, Mapping):
        errors.add(path, f"must be a mapping, got {type(value).__name__}")
        return False
    if allowed is not None:
        allowed_set = set(allowed)
        for key in value:
            if key not in allowed_set:
                errors.add(_join(path, key), f"unknown field; allowed: {', '.join(sorted(allowed_set))}")
    return True


NAME_HINTS = {
    KEY_NAME_RE: "use lowercase letters, digits and inner hyphens, e.g. gpu-clique",
    LABEL_KEY_RE: "use a Kubernetes label key, e.g. topology.kubernetes.io/zone",
    NODE_NAME_RE: "use letters, digits, '.', '_' and inner hyphens",
    POOL_NAME_RE: "use letters, digits, '.', '_' and inner hyphens",
}


def _check_name(value: Any, path: str, errors: _Errors, *, pattern: str, max_length: int, what: str) -> str | None:
    if not isinstance(value, str):
        errors.add(path, f"{what} must be a string")
        return None
    if not value:
        errors.add(path, f"{what} must not be empty")
        return None
    if len(value) > max_length:
        errors.add(path, f"{what} is longer than {max_length} characters")
        return None
    if not re.fullmatch(pattern, value):
        errors.add(path, f"{what} {value!r} is not valid: {NAME_HINTS.get(pattern, pattern)}")
        return None
    return value


def topology_keys_validate(keys: Any, *, path: str = "topology_keys") -> tuple[list[KeySpec], list[dict[str, str]]]:
    """Validate a list of ``{key, label}`` items (coarsest first). Returns the keys and the errors found."""
    errors = _Errors()
    result: list[KeySpec] = []
    if not isinstance(keys, list):
        errors.add(path, "must be a list of {key, label} items, coarsest first")
        return result, errors.items
    if len(keys) > MAX_TOPOLOGY_KEYS:
        errors.add(path, f"at most {MAX_TOPOLOGY_KEYS} topology keys, got {len(keys)}")
        return result, errors.items
    seen_keys: dict[str, int] = {}
    seen_labels: dict[str, int] = {}
    for index, item in enumerate(keys):
        item_path = _join(path, index)
        if isinstance(item, KeySpec):
            item = {"key": item.key, "label": item.label}
        if not _check_mapping(item, item_path, errors, allowed=("key", "label")):
            continue
        key = _check_name(
            item.get("key"), _join(item_path, "key"), errors, pattern=KEY_NAME_RE, max_length=63, what="key"
        )
        label = _check_name(
            item.get("label"), _join(item_path, "label"), errors, pattern=LABEL_KEY_RE, max_length=253, what="label"
        )
        if key is not None and key in seen_keys:
            errors.add(_join(item_path, "key"), f"key {key!r} is already used by {path}[{seen_keys[key]}]")
            key = None
        if label is not None and label in seen_labels:
            errors.add(_join(item_path, "label"), f"label {label!r} is already used by {path}[{seen_labels[label]}]")
            label = None
        if key is not None and label is not None:
            seen_keys[key] = index
            seen_labels[label] = index
            result.append(KeySpec(key=key, label=label))
    return result, errors.items


def _parse_resources(value: Any, path: str, errors: _Errors) -> dict[str, int] | None:
    if not _check_mapping(value, path, errors, allowed=[name for name, *_ in INVENTORY_RESOURCES]):
        return None
    parsed: dict[str, int] = {}
    for name, kind, _capacity, _used in INVENTORY_RESOURCES:
        if name not in value:
            continue
        if _huge_int(value[name]):
            errors.add(_join(path, name), f"{name} is far too large")
            continue
        try:
            amount = parse_quantity(value[name], kind=kind)  # type: ignore[arg-type]
        except QuantityError as exc:
            errors.add(_join(path, name), str(exc))
            continue
        if name == "gpu" and amount > MAX_GPU:
            errors.add(_join(path, name), f"gpu must be at most {MAX_GPU}")
            continue
        parsed[name] = amount
    return parsed


def _parse_labels(value: Any, path: str, errors: _Errors) -> dict[str, str] | None:
    if value is None:
        return {}
    if not _check_mapping(value, path, errors):
        return None
    labels: dict[str, str] = {}
    ok = True
    for key, label_value in value.items():
        key_path = _join(path, key)
        if not isinstance(key, str) or not re.fullmatch(LABEL_KEY_RE, key) or len(key) > 253:
            errors.add(key_path, f"{key!r} is not a valid label key (e.g. topology.kubernetes.io/zone)")
            ok = False
            continue
        if not isinstance(label_value, str):
            shown = "" if _huge_int(label_value) else f" {label_value!r}"
            errors.add(
                key_path,
                f"label values must be strings, got {type(label_value).__name__}{shown}; quote it in YAML",
            )
            ok = False
            continue
        if len(label_value) > 63 or not re.fullmatch(LABEL_VALUE_RE, label_value):
            errors.add(key_path, f"{label_value!r} is not a valid label value (at most 63 letters, digits, '-_.')")
            ok = False
            continue
        labels[key] = label_value
    return labels if ok else None


def node_spec_parse(item: Any, path: str, errors: _Errors | None = None) -> NodeSpec | None:
    """Validate one inventory node entry; problems are added to ``errors`` (raised if not given)."""
    own = errors is None
    errors = errors or _Errors()
    before = len(errors.items)
    if not _check_mapping(item, path, errors, allowed=("name", "labels", "capacity", "allocated", "schedulable")):
        if own:
            errors.raise_if_any("The node is invalid.")
        return None
    name = _check_name(
        item.get("name"), _join(path, "name"), errors, pattern=NODE_NAME_RE, max_length=253, what="node name"
    )
    labels = _parse_labels(item.get("labels"), _join(path, "labels"), errors)
    if "capacity" not in item:
        errors.add(_join(path, "capacity"), "capacity is required, e.g. {gpu: 8, cpu: 96, memory: 1Ti, storage: 4Ti}")
        capacity = None
    else:
        capacity = _parse_resources(item["capacity"], _join(path, "capacity"), errors)
    allocated = _parse_resources(item.get("allocated") or {}, _join(path, "allocated"), errors)
    schedulable = item.get("schedulable", True)
    if not isinstance(schedulable, bool):
        errors.add(_join(path, "schedulable"), "must be true or false")
    if capacity is not None and allocated is not None:
        for resource, amount in allocated.items():
            if amount > capacity.get(resource, 0):
                errors.add(
                    _join(_join(path, "allocated"), resource),
                    f"allocated {resource} ({item['allocated'][resource]}) exceeds the node's capacity "
                    f"({item['capacity'].get(resource, 0)})",
                )
    if len(errors.items) > before:
        if own:
            errors.raise_if_any("The node is invalid.")
        return None
    assert name is not None and labels is not None and capacity is not None and allocated is not None
    values: dict[str, Any] = {"name": name, "labels": labels, "schedulable": schedulable}
    for resource, _kind, capacity_field, used_field in INVENTORY_RESOURCES:
        values[capacity_field] = capacity.get(resource, 0)
        values[used_field] = allocated.get(resource, 0)
    return NodeSpec(**values)


def _parse_pool_fields(value: Any, errors: _Errors) -> tuple[str | None, dict[str, Any]]:
    fields_out: dict[str, Any] = {}
    if not _check_mapping(value, "pool", errors, allowed=("name", *POOL_FIELDS)):
        return None, fields_out
    name = _check_name(value.get("name"), "pool.name", errors, pattern=POOL_NAME_RE, max_length=63, what="pool name")
    if name is not None and name in RESERVED_POOL_NAMES:
        errors.add("pool.name", f"{name!r} is reserved; choose another name")
        name = None
    for text_field, max_length in (("description", 255), ("k8s_namespace", 63), ("k8s_node_selector", 255)):
        if text_field in value:
            text = value[text_field]
            if text is None:
                text = ""
            if not isinstance(text, str):
                errors.add(f"pool.{text_field}", "must be a string")
            elif not _storable_text(text):
                errors.add(f"pool.{text_field}", "must not contain NUL characters or unpaired surrogates")
            elif len(text) > max_length:
                errors.add(f"pool.{text_field}", f"is longer than {max_length} characters")
            else:
                fields_out[text_field] = text
    if "backend" in value:
        if value["backend"] not in DispatchBackend.values:
            errors.add("pool.backend", f"must be one of: {', '.join(DispatchBackend.values)}")
        else:
            fields_out["backend"] = value["backend"]
    if "sim_task_seconds" in value:
        seconds = value["sim_task_seconds"]
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not 0 <= seconds < 1e9:
            errors.add("pool.sim_task_seconds", "must be a non-negative number of seconds")
        else:
            fields_out["sim_task_seconds"] = float(seconds)
    return name, fields_out


def inventory_parse(document: Any) -> Inventory:
    """Validate a whole inventory document (already loaded from YAML/JSON).

    Raises:
        ValidationFailedError: with every problem found, each with its path in the document.
    """
    errors = _Errors()
    if not _check_mapping(document, "", errors, allowed=("pool", "topology_keys", "nodes")):
        errors.raise_if_any()
    if "pool" not in document:
        errors.add("pool", "required: {name: ..., description: ...}")
        name, pool_fields = None, {}
    else:
        name, pool_fields = _parse_pool_fields(document["pool"], errors)
    keys: list[KeySpec] | None = None
    if "topology_keys" in document:
        keys, key_errors = topology_keys_validate(document["topology_keys"] or [])
        for item in key_errors:
            errors.add(item["path"], item["message"])
    nodes_value = document.get("nodes") or []
    nodes: list[NodeSpec] = []
    if not isinstance(nodes_value, list):
        errors.add("nodes", "must be a list of nodes")
    elif len(nodes_value) > MAX_NODES_PER_FILE:
        errors.add("nodes", f"at most {MAX_NODES_PER_FILE} nodes per file")
    else:
        seen: dict[str, int] = {}
        for index, item in enumerate(nodes_value):
            spec = node_spec_parse(item, f"nodes[{index}]", errors)
            if spec is None:
                continue
            if spec.name in seen:
                errors.add(f"nodes[{index}].name", f"node {spec.name!r} is already listed at nodes[{seen[spec.name]}]")
                continue
            seen[spec.name] = index
            nodes.append(spec)
    errors.raise_if_any()
    assert name is not None
    return Inventory(
        name=name, pool_fields=pool_fields, keys=tuple(keys) if keys is not None else None, nodes=tuple(nodes)
    )


def inventory_load_text(text: str | bytes) -> Any:
    """Load YAML or JSON text safely (YAML 1.2 core schema, no custom tags, alias limits).

    Raises:
        ValidationFailedError: unreadable text, with the parser's message.
    """
    limits = DocumentLimits(max_bytes=256 * 1024 * 1024, max_aliases=100, max_nodes=50_000_000, max_depth=32)
    try:
        return load_document(text, limits, what="the inventory", shape="a mapping with a 'pool' key")
    except DocumentInvalidError as exc:
        raise ValidationFailedError(
            [{"path": error.path, "message": error.message} for error in exc.errors],
            message="The pool inventory could not be read.",
        ) from exc


# ------------------------------------------------------------------------------------------------
# Topology keys
# ------------------------------------------------------------------------------------------------
def pool_key_specs(pool: Pool) -> list[KeySpec]:
    return [KeySpec(key=key.key, label=key.label) for key in pool.topology_keys.order_by("position")]


@transaction.atomic
def pool_keys_set(*, pool: Pool, keys: Sequence[KeySpec] | Sequence[Mapping[str, str]], new_pool: bool = False) -> bool:
    """Replace the pool's keys with ``keys`` (coarsest first). The one way keys change.

    Bumps ``keys_version`` when the ordered ``(key, label)`` list differs from the current one
    (added, removed, reordered or relabelled keys); does nothing otherwise. ``new_pool``: the pool
    was created in the same transaction (admin add form), so its first keys are no change.

    Raises:
        ValidationFailedError: bad names, duplicate keys or labels (paths ``topology_keys[i].key``).
    Returns:
        Whether the keys changed.
    """
    specs, errors = topology_keys_validate(list(keys))
    if errors:
        raise ValidationFailedError(errors, message="The topology keys are invalid.")
    locked = Pool.objects.select_for_update().get(pk=pool.pk)
    if pool_key_specs(locked) == specs:
        return False
    # Delete then insert: positions, keys and labels are unique per pool, so a swap cannot be done in place.
    TopologyKey.objects.filter(pool=locked).delete()
    TopologyKey.objects.bulk_create(
        TopologyKey(pool=locked, key=spec.key, label=spec.label, position=index) for index, spec in enumerate(specs)
    )
    if new_pool:
        return True
    Pool.objects.filter(pk=locked.pk).update(keys_version=F("keys_version") + 1, updated_at=timezone.now())
    locked.refresh_from_db(fields=["keys_version", "updated_at"])
    pool.keys_version = locked.keys_version
    pool.updated_at = locked.updated_at
    logger.info("pool.keys_changed", extra={"pool": pool.name, "keys_version": pool.keys_version})
    capacity_changed(pool.pk)
    return True


def capacity_changed(pool_id: int) -> None:
    """The pool's inventory changed (nodes added, resized, uncordoned, keys changed): what waits in
    its queue may fit now, so ask for a placement cycle once the change is committed (design §6)."""
    from scheduler.tasks import placement_cycle_request

    transaction.on_commit(lambda: placement_cycle_request(pool_id))


# ------------------------------------------------------------------------------------------------
# Pools and nodes (API and admin writes)
# ------------------------------------------------------------------------------------------------
def _pool_validate(pool: Pool) -> None:
    if pool.name in RESERVED_POOL_NAMES:
        raise ValidationFailedError([{"path": "name", "message": f"{pool.name!r} is reserved; choose another name"}])
    pool.full_clean()


@transaction.atomic
def pool_create(*, name: str, keys: Sequence[KeySpec] = (), **fields: Any) -> Pool:
    """Create a pool with its keys (``keys_version`` starts at 1).

    Raises:
        ValidationFailedError / django ValidationError: bad or duplicate name, bad fields or keys.
    """
    specs, errors = topology_keys_validate(list(keys))
    if errors:
        raise ValidationFailedError(errors, message="The topology keys are invalid.")
    pool = Pool(name=name, **{key: value for key, value in fields.items() if key in POOL_FIELDS})
    _pool_validate(pool)
    pool.save()
    TopologyKey.objects.bulk_create(
        TopologyKey(pool=pool, key=spec.key, label=spec.label, position=index) for index, spec in enumerate(specs)
    )
    return pool


@transaction.atomic
def pool_update(*, pool: Pool, keys: Sequence[KeySpec] | None = None, **fields: Any) -> Pool:
    """Update a pool's fields (``name`` included) and, when given, its keys through :func:`pool_keys_set`."""
    pool = Pool.objects.select_for_update().get(pk=pool.pk)
    changed = [key for key, value in fields.items() if key in ("name", *POOL_FIELDS) and getattr(pool, key) != value]
    for key in changed:
        setattr(pool, key, fields[key])
    if changed:
        _pool_validate(pool)
        pool.save(update_fields=[*changed, "updated_at"])
    if keys is not None:
        pool_keys_set(pool=pool, keys=keys)
    return pool


@transaction.atomic
def pool_delete(*, pool: Pool) -> None:
    """Delete a pool with its keys and nodes.

    Raises:
        ConflictError: workflows were submitted to it (they keep their history) or capacity is reserved.
    """
    if pool.workflows.exists():
        raise ConflictError(
            f"Pool {pool.name!r} has workflows; it cannot be deleted (cordon its nodes instead).",
            details={"pool": pool.name, "workflows": pool.workflows.count()},
        )
    if Reservation.objects.filter(pool=pool, released_at__isnull=True).exists():
        raise ConflictError(f"Pool {pool.name!r} has active reservations.", details={"pool": pool.name})
    pool.delete()


def _node_validate(node: Node) -> None:
    # Checked here so the error names the field; the (pool, name) constraint would report it under
    # "__all__".
    if Node.objects.filter(pool_id=node.pool_id, name=node.name).exclude(pk=node.pk).exists():
        raise ValidationFailedError(
            [{"path": "name", "message": f"a node named {node.name!r} already exists in pool {node.pool.name!r}"}]
        )
    node.full_clean()


@transaction.atomic
def node_create(*, pool: Pool, spec: NodeSpec) -> Node:
    """Add a machine to a pool. Raises ``ValidationError`` for a duplicate name or bad values."""
    node = Node(pool=pool, name=spec.name, **spec.values())
    _node_validate(node)
    node.save()
    capacity_changed(pool.pk)
    return node


@transaction.atomic
def node_update(*, node: Node, **fields: Any) -> Node:
    """Update a machine's name, labels, capacity, external usage or ``schedulable`` flag."""
    node = Node.objects.select_for_update().get(pk=node.pk)
    changed = [
        key for key, value in fields.items() if key in ("name", *NODE_VALUE_FIELDS) and getattr(node, key) != value
    ]
    for key in changed:
        setattr(node, key, fields[key])
    if changed:
        _node_validate(node)
        node.save(update_fields=[*changed, "updated_at"])
        capacity_changed(node.pool_id)
    return node


@transaction.atomic
def node_delete(*, node: Node) -> None:
    """Delete a machine. Raises ``ConflictError`` while tasks hold reservations on it (cordon it instead)."""
    if Reservation.objects.filter(node=node, released_at__isnull=True).exists():
        raise ConflictError(
            f"Node {node.name!r} has active reservations; cordon it and wait for its tasks to end.",
            details={"node": node.name, "pool": node.pool.name},
        )
    node.delete()


@transaction.atomic
def nodes_set_schedulable(*, node_ids: Iterable[int], schedulable: bool) -> int:
    """Cordon (``schedulable=False``) or uncordon machines. Returns how many rows changed.
    Cordoning never touches running tasks: their reservations stay until they end."""
    ids = sorted(set(node_ids))
    changed = Node.objects.filter(pk__in=ids).exclude(schedulable=schedulable)
    pool_ids = sorted(set(changed.values_list("pool_id", flat=True)))
    count = changed.update(schedulable=schedulable, updated_at=timezone.now())
    if schedulable:
        for pool_id in pool_ids:
            capacity_changed(pool_id)
    logger.info("nodes.schedulable_set", extra={"count": count, "schedulable": schedulable})
    return count


def node_cordon(*, node_ids: Iterable[int]) -> int:
    return nodes_set_schedulable(node_ids=node_ids, schedulable=False)


def node_uncordon(*, node_ids: Iterable[int]) -> int:
    return nodes_set_schedulable(node_ids=node_ids, schedulable=True)


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
    :func:`pool_keys_set`), and its nodes (rows that differ only). Atomic.

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
            capacity_changed(pool.pk)
    except _DryRunRollback:
        pass
    logger.info("pool.imported", extra=report.as_dict())
    return report


def inventory_import_text(text: str | bytes, **kwargs: Any) -> ImportReport:
    """Load, validate and import an inventory from YAML/JSON text (see :func:`inventory_import`)."""
    return inventory_import(inventory_parse(inventory_load_text(text)), **kwargs)


def _quantity_out(value: int, kind: str) -> int | str:
    text = format_quantity(value, kind)  # type: ignore[arg-type]
    return int(text) if text.isdigit() else text


def node_inventory_entry(node: Node | NodeSpec) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": node.name,
        "labels": dict(sorted(node.labels.items())),
        "capacity": {
            name: _quantity_out(getattr(node, capacity_field), kind)
            for name, kind, capacity_field, _used in INVENTORY_RESOURCES
        },
    }
    allocated = {
        name: _quantity_out(getattr(node, used_field), kind)
        for name, kind, _capacity, used_field in INVENTORY_RESOURCES
        if getattr(node, used_field)
    }
    if allocated:
        entry["allocated"] = allocated
    entry["schedulable"] = node.schedulable
    return entry


def pool_export(pool: Pool) -> dict[str, Any]:
    """The pool as an inventory document (§7) that :func:`inventory_import` reads back unchanged."""
    machines = Node.objects.filter(pool=pool).order_by("name").iterator(chunk_size=BATCH_SIZE)
    nodes = [node_inventory_entry(node) for node in machines]
    return {
        "pool": {"name": pool.name, **{key: getattr(pool, key) for key in POOL_FIELDS}},
        "topology_keys": [{"key": spec.key, "label": spec.label} for spec in pool_key_specs(pool)],
        "nodes": nodes,
    }


def inventory_document(inventory: Inventory) -> dict[str, Any]:
    """A parsed (or generated) inventory as a document :func:`inventory_parse` accepts."""
    document: dict[str, Any] = {"pool": {"name": inventory.name, **inventory.pool_fields}}
    if inventory.keys is not None:
        document["topology_keys"] = [{"key": spec.key, "label": spec.label} for spec in inventory.keys]
    document["nodes"] = [node_inventory_entry(node) for node in inventory.nodes]
    return document


def inventory_dump(document: Mapping[str, Any], *, output_format: str = "yaml") -> str:
    """Render an inventory document as YAML (one flow-style mapping per labels/capacity) or JSON."""
    if output_format == "json":
        return json.dumps(document, indent=2) + "\n"
    import yaml

    class _Dumper(yaml.SafeDumper):
        pass

    def _represent_dict(dumper: yaml.SafeDumper, data: dict[str, Any]) -> Any:
        flow = all(not isinstance(value, (dict, list)) for value in data.values()) and len(data) <= 4
        return dumper.represent_mapping("tag:yaml.org,2002:map", data.items(), flow_style=flow)

    _Dumper.add_representer(dict, _represent_dict)
    return yaml.dump(dict(document), Dumper=_Dumper, sort_keys=False, width=120, allow_unicode=True)


# ------------------------------------------------------------------------------------------------
# Synthetic pools
# ------------------------------------------------------------------------------------------------
GENERATED_KEYS: tuple[KeySpec, ...] = (
    KeySpec("zone", "topology.kubernetes.io/zone"),
    KeySpec("spine", "topology.kubernetes.io/spine"),
    KeySpec("rack", "topology.kubernetes.io/rack"),
    KeySpec("gpu-clique", "nvidia.com/gpu-clique"),
)


@dataclass(frozen=True, slots=True)
class PoolShape:
    """A synthetic cluster: zones x spines x racks x cliques x nodes, identical machines."""

    zones: int = 2
    spines_per_zone: int = 2
    racks_per_spine: int = 2
    cliques_per_rack: int = 1
    nodes_per_clique: int = 18
    gpus_per_node: int = 4
    cpu_millis: int = 144_000
    memory_bytes: int = 960 * 1024**3
    storage_bytes: int = 4 * 1024**4
    occupancy: float = 0.0
    seed: int = 0

    @property
    def node_count(self) -> int:
        return self.zones * self.spines_per_zone * self.racks_per_spine * self.cliques_per_rack * self.nodes_per_clique


def pool_generate_inventory(*, name: str, shape: PoolShape, description: str = "") -> Inventory:
    """Build a synthetic inventory. Rack and clique names are unique in the pool; with ``occupancy``
    each GPU is in external use with that probability (seeded), cpu/memory in proportion."""
    rng = random.Random(shape.seed)
    width = len(str(shape.node_count))
    nodes: list[NodeSpec] = []
    rack_number = 0
    for zone in range(1, shape.zones + 1):
        for spine in range(1, shape.spines_per_zone + 1):
            for _rack in range(shape.racks_per_spine):
                rack_number += 1
                rack_name = f"rack-{rack_number:04d}"
                for clique in range(1, shape.cliques_per_rack + 1):
                    clique_name = rack_name if shape.cliques_per_rack == 1 else f"{rack_name}-c{clique}"
                    for _node in range(shape.nodes_per_clique):
                        node_name = f"{name}-{len(nodes) + 1:0{width}d}"
                        used_gpu = 0
                        if shape.occupancy > 0:
                            used_gpu = sum(1 for _ in range(shape.gpus_per_node) if rng.random() < shape.occupancy)
                        share = used_gpu / shape.gpus_per_node if shape.gpus_per_node else 0.0
                        nodes.append(
                            NodeSpec(
                                name=node_name,
                                labels={
                                    "kubernetes.io/hostname": node_name,
                                    "topology.kubernetes.io/zone": f"zone-{zone}",
                                    "topology.kubernetes.io/spine": f"zone-{zone}-spine-{spine}",
                                    "topology.kubernetes.io/rack": rack_name,
                                    "nvidia.com/gpu-clique": f"clique-{clique_name}",
                                },
                                gpu=shape.gpus_per_node,
                                cpu_millis=shape.cpu_millis,
                                memory_bytes=shape.memory_bytes,
                                storage_bytes=shape.storage_bytes,
                                used_gpu=used_gpu,
                                used_cpu_millis=int(shape.cpu_millis * share) // 1000 * 1000,
                                used_memory_bytes=int(shape.memory_bytes * share) // 1024**3 * 1024**3,
                            )
                        )
    return Inventory(
        name=name,
        pool_fields={"description": description or f"synthetic: {shape.node_count} nodes x {shape.gpus_per_node} GPUs"},
        keys=GENERATED_KEYS,
        nodes=tuple(nodes),
    )


# ------------------------------------------------------------------------------------------------
# Kubernetes node sync
# ------------------------------------------------------------------------------------------------
K8S_RESOURCES: tuple[tuple[str, str], ...] = (
    ("nvidia.com/gpu", "gpu"),
    ("cpu", "cpu"),
    ("memory", "memory"),
    ("ephemeral-storage", "storage"),
)
UNSCHEDULABLE_TAINT_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


def kubernetes_node_to_spec(
    item: Mapping[str, Any], *, tolerated_taints: Iterable[str] = ()
) -> tuple[NodeSpec | None, str | None]:
    """Map one ``/api/v1/nodes`` item (JSON) to a :class:`NodeSpec`: all labels, ``status.allocatable``
    as capacity, unschedulable when cordoned or tainted NoSchedule/NoExecute (taint keys in
    ``tolerated_taints`` excepted). Returns ``(spec, None)`` or ``(None, reason)`` for an unusable item."""
    metadata = item.get("metadata") or {}
    name = metadata.get("name")
    if not isinstance(name, str) or not re.fullmatch(NODE_NAME_RE, name) or len(name) > 253:
        return None, f"invalid node name {name!r}"
    labels = {
        key: value
        for key, value in (metadata.get("labels") or {}).items()
        if isinstance(key, str) and isinstance(value, str)
    }
    allocatable = (item.get("status") or {}).get("allocatable") or {}
    amounts: dict[str, int] = {}
    for k8s_name, kind in K8S_RESOURCES:
        raw = allocatable.get(k8s_name, 0)
        try:
            amounts[kind] = parse_quantity(raw, kind=kind)  # type: ignore[arg-type]
        except QuantityError as exc:
            return None, f"status.allocatable[{k8s_name!r}]: {exc}"
    spec = item.get("spec") or {}
    tolerated = set(tolerated_taints)
    tainted = any(
        taint.get("effect") in UNSCHEDULABLE_TAINT_EFFECTS and taint.get("key") not in tolerated
        for taint in (spec.get("taints") or [])
    )
    return (
        NodeSpec(
            name=name,
            labels=labels,
            gpu=min(amounts["gpu"], MAX_GPU),
            cpu_millis=amounts["cpu"],
            memory_bytes=amounts["memory"],
            storage_bytes=amounts["storage"],
            schedulable=not bool(spec.get("unschedulable")) and not tainted,
        ),
        None,
    )


def kubernetes_nodes_list(
    core_v1: Any, *, label_selector: str | None, page_size: int = 500
) -> tuple[list[Mapping[str, Any]], int]:
    """All nodes matching ``label_selector``, following ``metadata.continue`` pages. Returns the raw
    JSON items and the number of requests made. ``core_v1`` is a ``kubernetes.client.CoreV1Api``."""
    items: list[Mapping[str, Any]] = []
    token: str | None = None
    requests = 0
    while True:
        kwargs: dict[str, Any] = {"limit": page_size, "_preload_content": False}
        if label_selector:
            kwargs["label_selector"] = label_selector
        if token:
            kwargs["_continue"] = token
        response = core_v1.list_node(**kwargs)
        requests += 1
        payload = json.loads(response.data)
        items.extend(payload.get("items") or [])
        token = (payload.get("metadata") or {}).get("continue")
        if not token:
            return items, requests


def pool_sync_from_kubernetes(
    *,
    pool: Pool,
    items: Sequence[Mapping[str, Any]],
    prune: bool = False,
    dry_run: bool = False,
    tolerated_taints: Iterable[str] = (),
    progress: Progress | None = None,
) -> ImportReport:
    """Upsert the pool's nodes from Kubernetes node objects (see :func:`kubernetes_node_to_spec`).

    Labels and capacity follow the cluster; external usage (``used_*``) is kept, clamped to the new
    capacity. Nodes of the pool that the cluster no longer lists are cordoned (never deleted while
    tasks hold reservations on them); with ``prune`` those without active reservations are deleted.
    """
    report = ImportReport(pool=pool.name)
    specs: list[NodeSpec] = []
    seen: set[str] = set()
    for index, item in enumerate(items):
        spec, reason = kubernetes_node_to_spec(item, tolerated_taints=tolerated_taints)
        if spec is None or spec.name in seen:
            report.skipped.append({"path": f"items[{index}]", "message": reason or "duplicate node name"})
            continue
        seen.add(spec.name)
        specs.append(spec)
    try:
        with transaction.atomic():
            locked = Pool.objects.select_for_update().get(pk=pool.pk)
            _apply_nodes(
                pool=locked,
                nodes=specs,
                report=report,
                missing="prune" if prune else "cordon",
                progress=progress,
                keep_used=True,
            )
            report.keys_version = locked.keys_version
            _finish(report, dry_run)
            capacity_changed(locked.pk)
    except _DryRunRollback:
        pass
    logger.info("pool.synced_from_kubernetes", extra=report.as_dict())
    return report
