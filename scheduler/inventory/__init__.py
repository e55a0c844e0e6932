"""Pool inventories (docs/design.md §7) as plain values. Pure: stdlib, PyYAML and :mod:`parsing` only; no
Django, no database, no Kubernetes client.

- :mod:`scheduler.inventory.document`: load and validate an inventory document into frozen
  :class:`Inventory` / :class:`KeySpec` / :class:`NodeSpec` values, every problem with its path.
- :mod:`scheduler.inventory.render`: the inverse, node entries and documents as YAML or JSON.
- :mod:`scheduler.inventory.generate`: synthetic pools (:class:`PoolShape`).
- :mod:`scheduler.inventory.kubernetes`: Kubernetes Node objects as node specs, and list paging.

The writes (import, export, sync) are in :mod:`scheduler.services`.
"""

from scheduler.inventory.document import (
    INVENTORY_LIMITS,
    INVENTORY_RESOURCES,
    MAX_NODES_PER_FILE,
    MAX_TOPOLOGY_KEYS,
    NODE_VALUE_FIELDS,
    POOL_FIELDS,
    RESERVED_POOL_NAMES,
    VALUES_PER_NODE,
    Inventory,
    InventoryInvalidError,
    KeySpec,
    NodeSpec,
    labels_validate,
    load_inventory_text,
    parse_inventory,
    parse_node_spec,
    topology_keys_validate,
)
from scheduler.inventory.generate import GENERATED_KEYS, PoolShape, pool_generate_inventory
from scheduler.inventory.kubernetes import (
    NON_TERMINAL_PODS,
    NodePage,
    foreign_usage,
    kubernetes_node_to_spec,
    node_list_arguments,
    node_list_page,
    node_pod_list_arguments,
    node_ready,
    pod_list_arguments,
    pod_requests,
    sync_record_words,
)
from scheduler.inventory.render import inventory_document, inventory_dump, node_inventory_entry

__all__ = [
    "GENERATED_KEYS",
    "INVENTORY_LIMITS",
    "INVENTORY_RESOURCES",
    "MAX_NODES_PER_FILE",
    "MAX_TOPOLOGY_KEYS",
    "NODE_VALUE_FIELDS",
    "POOL_FIELDS",
    "RESERVED_POOL_NAMES",
    "VALUES_PER_NODE",
    "Inventory",
    "InventoryInvalidError",
    "KeySpec",
    "NodePage",
    "NodeSpec",
    "PoolShape",
    "inventory_document",
    "inventory_dump",
    "NON_TERMINAL_PODS",
    "foreign_usage",
    "kubernetes_node_to_spec",
    "pod_list_arguments",
    "node_pod_list_arguments",
    "node_ready",
    "pod_requests",
    "sync_record_words",
    "labels_validate",
    "load_inventory_text",
    "node_inventory_entry",
    "node_list_arguments",
    "node_list_page",
    "parse_inventory",
    "parse_node_spec",
    "pool_generate_inventory",
    "topology_keys_validate",
]
