"""Small builders for solver tests: clusters from label rows, trees from nested calls.

cluster(("zone", "rack"), [("z1", "r1", 2), ("z1", "r2", 1)]) -> nodes n0, n1 with 2 and 1 free GPUs
tree(zone("wf", clique("m1", tasks=["a", "b"])))            -> ConstraintTree with paths filled in
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from scheduler.placement.types import ClusterSnapshot, GangRequest, NodeState, Resources, TaskRequest
from topology.tree import ConstraintTree, NodePath, TreeNode


@dataclass(frozen=True, slots=True)
class Spec:
    """A tree node before paths are known."""

    key: str
    group: str
    requirement: str
    children: tuple[Spec, ...]
    tasks: tuple[str, ...]


def node(key: str, group: str, *children: Spec, tasks: Iterable[str] = (), required: bool = True) -> Spec:
    return Spec(key, group, "required" if required else "preferred", tuple(children), tuple(tasks))


def zone(group: str, *children: Spec, tasks: Iterable[str] = (), required: bool = True) -> Spec:
    return node("zone", group, *children, tasks=tasks, required=required)


def spine(group: str, *children: Spec, tasks: Iterable[str] = (), required: bool = True) -> Spec:
    return node("spine", group, *children, tasks=tasks, required=required)


def rack(group: str, *children: Spec, tasks: Iterable[str] = (), required: bool = True) -> Spec:
    return node("rack", group, *children, tasks=tasks, required=required)


def clique(group: str, *children: Spec, tasks: Iterable[str] = (), required: bool = True) -> Spec:
    return node("gpu-clique", group, *children, tasks=tasks, required=required)


def _build(spec: Spec, prefix: NodePath) -> TreeNode:
    path = (*prefix, (spec.key, spec.group))
    kids = tuple(sorted((_build(c, path) for c in spec.children), key=lambda n: n.path))
    return TreeNode(spec.key, spec.group, path, spec.requirement, kids, tuple(sorted(spec.tasks)))  # type: ignore[arg-type]


def tree(
    *children: Spec, tasks: Iterable[str] = (), group: str = "group1", keys: tuple[str, ...] = ()
) -> ConstraintTree:
    kids = tuple(sorted((_build(c, ()) for c in children), key=lambda n: n.path))
    return ConstraintTree(group=group, children=kids, tasks=tuple(sorted(tasks)), keys=keys)


def cluster(
    keys: Sequence[str], rows: Iterable[tuple], *, prefix: str = "n", cordoned: Iterable[str] = ()
) -> ClusterSnapshot:
    """Rows are (*labels, gpu) or (*labels, Resources); node names are prefix + row number."""
    off = set(cordoned)
    nodes = []
    for i, row in enumerate(rows):
        *labels, free = row
        res = free if isinstance(free, Resources) else Resources(gpu=free)
        name = f"{prefix}{i}"
        nodes.append(NodeState(name=name, labels=tuple(labels), free=res, schedulable=name not in off))
    return ClusterSnapshot(pool="test", keys=tuple(keys), nodes=tuple(nodes))


def gang(
    t: ConstraintTree, gpu: int | dict[str, int] = 1, excluded: dict[str, frozenset[str]] | None = None
) -> GangRequest:
    """Every task of ``t`` with ``gpu`` GPUs (or a per-task dict)."""
    excluded = excluded or {}
    reqs = []
    for name in t.all_tasks():
        g = gpu[name] if isinstance(gpu, dict) else gpu
        reqs.append(TaskRequest(name, Resources(gpu=g), excluded.get(name, frozenset())))
    return GangRequest(name=t.group, tree=t, tasks=tuple(reqs))


def names(prefix: str, n: int) -> list[str]:
    return [f"{prefix}{i}" for i in range(1, n + 1)]


def consume(snapshot: ClusterSnapshot, group: GangRequest, assignments: Iterable[tuple[str, str]]) -> ClusterSnapshot:
    """The snapshot after the placed tasks started (their requests subtracted from free)."""
    reqs = {t.name: t.resources.as_tuple() for t in group.tasks}
    used: dict[str, list[int]] = {}
    for task, machine in assignments:
        acc = used.setdefault(machine, [0, 0, 0, 0])
        for r, v in enumerate(reqs[task]):
            acc[r] += v
    nodes = []
    for n in snapshot.nodes:
        if n.name in used:
            f = [a - b for a, b in zip(n.free.as_tuple(), used[n.name], strict=True)]
            n = NodeState(n.name, n.labels, Resources(*f), n.schedulable)
        nodes.append(n)
    return ClusterSnapshot(snapshot.pool, snapshot.keys, tuple(nodes))
