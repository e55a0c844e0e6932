"""Named benchmark scenarios: (snapshot, group) pairs built deterministically from a seed.

- ``nvl72-20k``: 20,736 trays (4 zones x 8 spines x 36 racks x 18 x 4 GPUs), ~60% fragmented
  occupancy; one 512-task x 4-GPU workflow: zone required, 32 gpu-clique groups of 16 tasks required.
- ``nvl72-20k-infeasible``: same pool; one more gpu-clique group (of 16) than the roomiest zone can
  host, so no zone holds the workflow (4 GPUs are free in plenty; the zone constraint rules it out).
- ``nvl72-20k-preferred``: same pool and shape, every constraint preferred, 40 groups of 18: racks
  with 18 idle trays are too few, so preferences relax.
- ``nvl72-20k-preferred-2048``: same pool, every constraint preferred, 128 groups of 16 (2,048 x
  4-GPU tasks): far more than any zone holds, so the zone preference relaxes as well as cliques.
- ``nvl72-20k-preferred-distinct``: same pool, every constraint preferred, 6 gpu-clique groups of
  17, 18, ..., 22 tasks: six distinct preferences, of which only groups of up to 18 fit one clique
  (18 trays), so the relaxation compares counts of several classes of nodes at each level.
- ``nvl72-1k``: 1,008 trays (2 zones x 4 spines x 7 racks); 64 tasks, zone required, 4 cliques of 16.
- ``nvl72-20k-mixed-N`` (N = 2, 8, 29, 30): 20,736 trays (seed 12, whose roomiest zone has 29 racks
  that can each hold one group); zone required, N gpu-clique groups required, each of 9 x 3-GPU and
  18 x 2-GPU tasks (63 of a rack's 72 GPUs, two shapes). 30 groups are one more than any zone holds.
"""

from __future__ import annotations

from collections.abc import Callable

from bench.kit.pools import nvl72_pool
from scheduler.placement.types import ClusterSnapshot, GangRequest, Resources, TaskRequest
from topology.tree import ConstraintTree, TreeNode

TRAY = Resources(gpu=4, cpu=16_000, memory=128 << 30)


def zone_of_cliques(
    groups: int, size: int, *, required: bool = True, name: str = "workflow", sizes: tuple[int, ...] = ()
) -> GangRequest:
    """Zone over ``groups`` gpu-clique groups of ``size`` tasks (or of ``sizes``, one per group)."""
    req = "required" if required else "preferred"
    zpath = (("zone", "workflow-group"),)
    cliques = []
    tasks = []
    for g in range(groups):
        size = sizes[g] if sizes else size
        gname = f"model-{g:02d}-group"
        members = tuple(sorted(f"m{g:02d}-shard{i:02d}" for i in range(size)))
        tasks.extend(members)
        cliques.append(TreeNode("gpu-clique", gname, (*zpath, ("gpu-clique", gname)), req, (), members))
    root = TreeNode("zone", "workflow-group", zpath, req, tuple(sorted(cliques, key=lambda n: n.path)))
    tree = ConstraintTree(group=name, children=(root,), keys=("zone", "spine", "rack", "gpu-clique"))
    return GangRequest(name=name, tree=tree, tasks=tuple(TaskRequest(t, TRAY) for t in sorted(tasks)))


def zone_of_mixed_cliques(groups: int, *, name: str = "workflow") -> GangRequest:
    """Zone required; ``groups`` gpu-clique groups required, each of 9 x 3-GPU and 18 x 2-GPU tasks."""
    zpath = (("zone", "workflow-group"),)
    cliques = []
    tasks: list[TaskRequest] = []
    for g in range(groups):
        gname = f"model-{g:02d}-group"
        members = [TaskRequest(f"m{g:02d}-a{i}", Resources(gpu=3, cpu=12_000, memory=96 << 30)) for i in range(9)]
        members += [TaskRequest(f"m{g:02d}-b{i:02d}", Resources(gpu=2, cpu=8_000, memory=64 << 30)) for i in range(18)]
        tasks.extend(members)
        own = tuple(sorted(t.name for t in members))
        cliques.append(TreeNode("gpu-clique", gname, (*zpath, ("gpu-clique", gname)), "required", (), own))
    root = TreeNode("zone", "workflow-group", zpath, "required", tuple(sorted(cliques, key=lambda n: n.path)))
    tree = ConstraintTree(group=name, children=(root,), keys=("zone", "spine", "rack", "gpu-clique"))
    return GangRequest(name=name, tree=tree, tasks=tuple(sorted(tasks, key=lambda t: t.name)))


def _mixed(groups: int) -> Callable[[], tuple[ClusterSnapshot, GangRequest]]:
    return lambda: (nvl72_pool(4, 8, 36, occupancy=0.6, seed=12), zone_of_mixed_cliques(groups))


def _max_groups_per_zone(snapshot: ClusterSnapshot, size: int) -> int:
    idle: dict[tuple, int] = {}
    for n in snapshot.nodes:
        if n.free.gpu >= TRAY.gpu and n.free.cpu >= TRAY.cpu and n.free.memory >= TRAY.memory:
            idle[n.labels] = idle.get(n.labels, 0) + 1
    per_zone: dict[str | None, int] = {}
    for labels, k in idle.items():
        per_zone[labels[0]] = per_zone.get(labels[0], 0) + k // size
    return max(per_zone.values(), default=0)


def nvl72_20k() -> tuple[ClusterSnapshot, GangRequest]:
    return nvl72_pool(4, 8, 36, occupancy=0.6, seed=20736), zone_of_cliques(32, 16)


def nvl72_20k_infeasible() -> tuple[ClusterSnapshot, GangRequest]:
    snapshot = nvl72_pool(4, 8, 36, occupancy=0.6, seed=20736)
    return snapshot, zone_of_cliques(_max_groups_per_zone(snapshot, 16) + 1, 16)


def nvl72_20k_preferred() -> tuple[ClusterSnapshot, GangRequest]:
    return nvl72_pool(4, 8, 36, occupancy=0.6, seed=20736), zone_of_cliques(40, 18, required=False)


def nvl72_20k_preferred_2048() -> tuple[ClusterSnapshot, GangRequest]:
    return nvl72_pool(4, 8, 36, occupancy=0.6, seed=20736), zone_of_cliques(128, 16, required=False)


def nvl72_20k_preferred_distinct() -> tuple[ClusterSnapshot, GangRequest]:
    sizes = (17, 18, 19, 20, 21, 22)
    return nvl72_pool(4, 8, 36, occupancy=0.6, seed=20736), zone_of_cliques(6, 0, required=False, sizes=sizes)


def nvl72_1k() -> tuple[ClusterSnapshot, GangRequest]:
    return nvl72_pool(2, 4, 7, occupancy=0.6, seed=1008), zone_of_cliques(4, 16)


SCENARIOS: dict[str, Callable[[], tuple[ClusterSnapshot, GangRequest]]] = {
    "nvl72-20k": nvl72_20k,
    "nvl72-20k-infeasible": nvl72_20k_infeasible,
    "nvl72-20k-preferred": nvl72_20k_preferred,
    "nvl72-20k-preferred-2048": nvl72_20k_preferred_2048,
    "nvl72-20k-preferred-distinct": nvl72_20k_preferred_distinct,
    "nvl72-1k": nvl72_1k,
    **{f"nvl72-20k-mixed-{n}": _mixed(n) for n in (2, 8, 29, 30)},
}
