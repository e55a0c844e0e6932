"""Inventory documents written back out (docs/design.md §7): node entries, whole documents, YAML or JSON text.
Pure: no Django.

Invariant: what :func:`inventory_document` and :func:`node_inventory_entry` produce is accepted by
:func:`scheduler.inventory.document.parse_inventory` and parses back to the same values (quantities
are written in their shortest exact form, e.g. ``960Gi``, ``500m``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Protocol

from parsing import format_quantity
from scheduler.inventory.document import INVENTORY_RESOURCES, Inventory


class NodeValues(Protocol):
    """What a node entry is written from: a :class:`~scheduler.inventory.document.NodeSpec` or a
    ``scheduler.models.Node`` row."""

    @property
    def name(self) -> str: ...

    @property
    def labels(self) -> dict[str, str]: ...

    @property
    def schedulable(self) -> bool: ...


def _quantity_out(value: int, kind: str) -> int | str:
    text = format_quantity(value, kind)  # type: ignore[arg-type]
    return int(text) if text.isdigit() else text


def node_inventory_entry(node: NodeValues) -> dict[str, Any]:
    """One node as an inventory entry: name, sorted labels, capacity, allocated (when any), schedulable."""
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


def inventory_document(inventory: Inventory) -> dict[str, Any]:
    """A parsed (or generated) inventory as a document :func:`parse_inventory` accepts."""
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
