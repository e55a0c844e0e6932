"""Writes to pools, their topology keys and their nodes (API and admin): create, update, delete,
cordon/uncordon, and key changes. Imports, exports and the Kubernetes sync are in
:mod:`scheduler.services.inventory`; the values they all take are in :mod:`scheduler.inventory`.

Key-change rule: every change of a pool's keys goes through :func:`pool_keys_set`, which bumps
``Pool.keys_version`` when the ordered ``(key, label)`` list actually changes. The placement cycle
does not place a queued group built on an older version whose tree uses a removed key or keys in
another order; it records why (docs/pools.md).

Every write that may let queued work fit (nodes added, resized, uncordoned, keys changed) asks for a
placement cycle through :func:`scheduler.services.reservations.pool_capacity_changed` (which also moves
the pool's epochs on), once the change is committed. Writes that only take room away (cordons,
deletions) move the epochs on without a cycle: whatever is cached by the inventory epoch (the idle
pool, the facts a submission is validated against) is read again.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from osmo.errors import ConflictError, NameTakenError, ValidationFailedError
from scheduler.inventory import (
    NODE_VALUE_FIELDS,
    POOL_FIELDS,
    RESERVED_POOL_NAMES,
    KeySpec,
    NodeSpec,
    topology_keys_validate,
)
from scheduler.models import Backend, Node, Pool, Reservation, TopologyKey
from scheduler.services.access import pool_status_set
from scheduler.services.reservations import pool_capacity_changed, pool_epochs_bump

logger = logging.getLogger(__name__)


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
    pool_capacity_changed(pool.pk)
    return True


# ------------------------------------------------------------------------------------------------
# Pools and nodes (API and admin writes)
# ------------------------------------------------------------------------------------------------
def _backend_of(name: Any) -> Backend:
    """The backend a pool's ``backend`` field names, or a ValidationFailedError naming the field."""
    from scheduler.services.backends import BackendNotFoundError, backend_named, backend_names

    try:
        return backend_named(str(name))
    except BackendNotFoundError:
        raise ValidationFailedError([{"path": "backend", "message": f"there is no backend named {str(name)[:80]!r} "
                                      f"(one of: {', '.join(backend_names())})"}]) from None


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
    pool = Pool(name=name, **{key: value for key, value in fields.items()
                              if key in (*POOL_FIELDS, "max_retries", "status") and key != "backend"})
    if "backend" in fields:
        pool.backend_ref = _backend_of(fields["backend"])
        pool.backend = pool.backend_ref.kind
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
    status = fields.pop("status", None)
    changed = [key for key, value in fields.items() if key in ("name", *POOL_FIELDS, "max_retries")
               and key != "backend" and getattr(pool, key) != value]
    for key in changed:
        setattr(pool, key, fields[key])
    if "backend" in fields and fields["backend"] != pool.backend_name:
        pool.backend_ref = _backend_of(fields["backend"])
        pool.backend = pool.backend_ref.kind
        changed += ["backend", "backend_ref"]
    if changed:
        _pool_validate(pool)
        pool.save(update_fields=[*changed, "updated_at"])
    if keys is not None:
        pool_keys_set(pool=pool, keys=keys)
    if status is not None:
        pool = pool_status_set(pool=pool, status=status)
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
        raise NameTakenError(
            [{"path": "name", "message": f"a node named {node.name!r} already exists in pool {node.pool.name!r}"}]
        )
    node.full_clean()


@transaction.atomic
def node_create(*, pool: Pool, spec: NodeSpec) -> Node:
    """Add a machine to a pool. Raises ``ValidationError`` for a duplicate name or bad values."""
    node = Node(pool=pool, name=spec.name, **spec.values())
    _node_validate(node)
    node.save()
    pool_capacity_changed(pool.pk)
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
        pool_capacity_changed(node.pool_id)
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
    pool_epochs_bump([node.pool_id], inventory=True)  # the pool's facts changed (nothing more fits)


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
            pool_capacity_changed(pool_id)
    else:
        pool_epochs_bump(pool_ids, inventory=True)  # the pools' facts changed (nothing more fits)
    logger.info("nodes.schedulable_set", extra={"count": count, "schedulable": schedulable})
    return count


def node_cordon(*, node_ids: Iterable[int]) -> int:
    return nodes_set_schedulable(node_ids=node_ids, schedulable=False)


def node_uncordon(*, node_ids: Iterable[int]) -> int:
    return nodes_set_schedulable(node_ids=node_ids, schedulable=True)
