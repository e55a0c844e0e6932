"""Realistic pool generators (bench only): GB200 NVL72 racks under spines under zones.

One NVL72 rack = one NVLink domain = 18 compute trays (nodes) x 4 GPUs, so ``gpu-clique`` equals the
rack (label value ``<rack>-nvl``). Occupancy is fragmented and seeded: each rack draws a utilisation
(about 15% of racks nearly idle, the rest 40-100% busy, mean about 60%); each node is then fully busy,
partly busy (1-3 GPUs used) or idle. CPU and memory are used in proportion to GPUs, so free vectors
come from a small set, as on real clusters where jobs request whole-GPU shares.
"""

from __future__ import annotations

import random

from scheduler.placement.types import ClusterSnapshot, NodeState, Resources

NVL72_KEYS = ("zone", "spine", "rack", "gpu-clique")
GPUS = 4
CPU = 144_000  # millicores per tray (2 x 72-core Grace)
MEMORY = 960 << 30
STORAGE = 8 << 40


def tray_free(gpus_free: int) -> Resources:
    share = gpus_free / GPUS
    return Resources(gpu=gpus_free, cpu=int(CPU * share), memory=int(MEMORY * share), storage=int(STORAGE * share))


def nvl72_pool(
    zones: int,
    spines: int,
    racks: int,
    *,
    nodes_per_rack: int = 18,
    occupancy: float = 0.6,
    seed: int = 0,
    idle_racks: float = 0.15,
) -> ClusterSnapshot:
    """``zones x spines x racks`` NVL72 racks; ``occupancy=0`` gives an empty pool."""
    rng = random.Random(seed)
    busy_mean = (occupancy - idle_racks * 0.05) / (1 - idle_racks) if occupancy > 0 else 0.0
    nodes: list[NodeState] = []
    for z in range(zones):
        for s in range(spines):
            for r in range(racks):
                zone, spine, rack = f"z{z}", f"z{z}-s{s}", f"z{z}-s{s}-r{r:02d}"
                if occupancy <= 0:
                    util = 0.0
                elif rng.random() < idle_racks:
                    util = rng.uniform(0.0, 0.1)
                else:
                    util = min(1.0, max(0.0, rng.uniform(busy_mean - 0.3, busy_mean + 0.3)))
                for n in range(nodes_per_rack):
                    x = rng.random()
                    if x < util * 0.8:
                        free = 0
                    elif x < util:
                        free = rng.randint(1, GPUS - 1)
                    else:
                        free = GPUS
                    nodes.append(NodeState(f"{rack}-n{n:02d}", (zone, spine, rack, f"{rack}-nvl"), tray_free(free)))
    return ClusterSnapshot(pool="nvl72", keys=NVL72_KEYS, nodes=tuple(nodes))
