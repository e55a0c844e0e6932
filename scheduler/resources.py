"""The resources a task requests and a machine offers: the one table every layer reads (specs,
inventories, the solver, the models, the API and Kubernetes). Pure: stdlib only.

Units are base units everywhere below the spec parser: GPUs are whole devices, ``cpu`` millicores,
``memory`` and ``storage`` bytes.

Code that does the same for every resource loops over :data:`RESOURCES` (or the field tuples below).
Resources are named one by one only where something is declared per resource: the models' columns
(Django reads class attributes), the frozen values with one attribute each (the solver's ``Resources``,
``NodeSpec``, ``PodRequest``, ``ReservationFacts``, the API serializers with their help texts), and
where each resource is treated differently (the generated inventories' rounding, the local sandbox's
kernel limits, the CLI, which talks to the API only).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Resource:
    name: str  # in specs, inventories and the solver
    kind: str  # the quantity kind its values are parsed as (``parsing.parse_quantity``)
    api_name: str  # in API output and selector annotations (the unit is in the name)
    capacity_field: str  # Node: what the machine has
    used_field: str  # Node: what is used outside the service
    amount_field: str  # Task and Reservation: what a task requests / holds
    kubernetes_name: str  # in a Kubernetes node's allocatable and a pod's requests


RESOURCES: tuple[Resource, ...] = (
    Resource("gpu", "gpu", "gpu", "gpu", "used_gpu", "gpu", "nvidia.com/gpu"),
    Resource("cpu", "cpu", "cpu_millis", "cpu_millis", "used_cpu_millis", "cpu_millis", "cpu"),
    Resource("memory", "memory", "memory_bytes", "memory_bytes", "used_memory_bytes", "memory_bytes", "memory"),
    Resource("storage", "storage", "storage_bytes", "storage_bytes", "used_storage_bytes", "storage_bytes",
             "ephemeral-storage"),
)
#: Resource names in specs, inventories and the solver, in the order of every resource vector.
RESOURCE_NAMES: tuple[str, ...] = tuple(r.name for r in RESOURCES)
#: The same resources as the API and the selectors name them.
RESOURCE_API_NAMES: tuple[str, ...] = tuple(r.api_name for r in RESOURCES)
#: Model fields, in the same order: a Task's request and a Reservation's holding; a Node's capacity and
#: what is used there outside the service.
AMOUNT_FIELDS: tuple[str, ...] = tuple(r.amount_field for r in RESOURCES)
CAPACITY_FIELDS: tuple[str, ...] = tuple(r.capacity_field for r in RESOURCES)
USED_FIELDS: tuple[str, ...] = tuple(r.used_field for r in RESOURCES)


def amounts_of(holder: object) -> dict[str, Any]:
    """What a task requests or a reservation holds, as keyword arguments by model field (each of
    :data:`AMOUNT_FIELDS` read from ``holder``: a Task, a row of its columns, a reservation's facts)."""
    return {name: getattr(holder, name) for name in AMOUNT_FIELDS}
