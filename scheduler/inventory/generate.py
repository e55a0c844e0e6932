"""Synthetic pools: zones x spines x racks x cliques x nodes of identical machines. Pure: no Django.

Keys are :data:`GENERATED_KEYS` (zone > spine > rack > gpu-clique). Node names are ``<pool>-<n>``
zero-padded to the width of the node count; rack names (``rack-0001``) and clique names are unique in
the pool, so every domain is identified by its own label value too.

Invariants: deterministic for equal inputs (``occupancy`` draws from ``random.Random(shape.seed)``);
``shape.node_count`` nodes; external usage never exceeds capacity.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from scheduler.inventory.document import Inventory, KeySpec, NodeSpec

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
