"""Writes of the scheduler app. Pools, keys and nodes live in :mod:`scheduler.services.pools`; whole
inventories (import, export) in :mod:`scheduler.services.inventory`, the Kubernetes node sync in
:mod:`scheduler.services.kubernetes_sync`. The values they
take and give (``Inventory``, ``KeySpec``, ``NodeSpec``, ``PoolShape``, node entries) come from the
pure :mod:`scheduler.inventory` and are re-exported here for callers of the services."""

from scheduler.inventory import Inventory, KeySpec, NodeSpec, PoolShape, node_inventory_entry, pool_generate_inventory
from scheduler.services.inventory import (
    ImportReport,
    inventory_import,
    inventory_import_text,
    inventory_load_text,
    inventory_parse,
    node_spec_parse,
    pool_export,
)
from scheduler.services.kubernetes_sync import (
    kubernetes_foreign_usage,
    kubernetes_nodes_list,
    kubernetes_pods_list,
    nodes_follow_kubernetes,
    pool_follow_kubernetes,
    pool_sync_from_kubernetes,
)
from scheduler.services.pools import (
    node_cordon,
    node_create,
    node_delete,
    node_uncordon,
    node_update,
    nodes_set_schedulable,
    pool_create,
    pool_delete,
    pool_keys_set,
    pool_update,
)

__all__ = [
    "ImportReport",
    "Inventory",
    "KeySpec",
    "NodeSpec",
    "PoolShape",
    "inventory_import",
    "nodes_follow_kubernetes",
    "inventory_import_text",
    "inventory_load_text",
    "inventory_parse",
    "kubernetes_foreign_usage",
    "kubernetes_nodes_list",
    "kubernetes_pods_list",
    "node_cordon",
    "node_create",
    "node_delete",
    "node_inventory_entry",
    "node_spec_parse",
    "node_uncordon",
    "node_update",
    "nodes_set_schedulable",
    "pool_create",
    "pool_delete",
    "pool_export",
    "pool_generate_inventory",
    "pool_keys_set",
    "pool_follow_kubernetes",
    "pool_sync_from_kubernetes",
    "pool_update",
]
