"""Random small instances (for the oracle comparison) and a placement checker.

``random_instance(rng)``: at most 16 machines, 8 tasks and 3 topology levels; random label trees with
some machines missing labels or cordoned; random occupancy (free gpu 0-4, cpu, memory); tasks of up
to three shapes, some with ``nodes_excluded``; random constraint trees mixing required and preferred.
``check(snapshot, group, placement)`` returns the list of violated invariants (empty when valid).
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from scheduler.placement.types import (
    ClusterSnapshot,
    GangRequest,
    NodeState,
    Placement,
    Resources,
    TaskRequest,
)
from topology.tree import ConstraintTree, NodePath, TreeNode

KEY_NAMES = ("zone", "spine", "rack")
GIB = 1 << 30


def random_instance(rng: random.Random) -> tuple[ClusterSnapshot, GangRequest]:
    nkeys = rng.randint(0, 3)
    keys = KEY_NAMES[:nkeys] if nkeys < 3 else KEY_NAMES
    nmachines = rng.randint(1, 16)
    fan = [rng.randint(1, 3) for _ in range(nkeys)]
    nodes = []
    for m in range(nmachines):
        labels: list[str | None] = [f"{k[0]}{rng.randrange(fan[i])}" for i, k in enumerate(keys)]
        if nkeys and rng.random() < 0.1:
            cut = rng.randrange(nkeys)
            labels[cut:] = [None] * (nkeys - cut)
        free = Resources(
            gpu=rng.choice((0, 1, 1, 2, 2, 3, 4, 4)),
            cpu=rng.choice((1000, 2000, 4000, 8000)),
            memory=rng.choice((4, 8, 16, 32)) * GIB,
        )
        nodes.append(NodeState(f"m{m:02d}", tuple(labels), free, schedulable=rng.random() > 0.08))
    snapshot = ClusterSnapshot(pool="random", keys=tuple(keys), nodes=tuple(nodes))
    ntasks = rng.randint(1, 8)
    shapes = [
        Resources(gpu=rng.choice((0, 1, 1, 2)), cpu=rng.choice((500, 1000, 2000)), memory=rng.choice((2, 4, 8)) * GIB)
        for _ in range(rng.randint(1, 3))
    ]
    task_names = [f"t{i}" for i in range(ntasks)]
    requests = []
    for name in task_names:
        excluded = frozenset(rng.sample([n.name for n in nodes], k=1)) if rng.random() < 0.15 else frozenset()
        requests.append(TaskRequest(name, rng.choice(shapes), excluded))
    tree = _random_tree(rng, keys, task_names)
    return snapshot, GangRequest(name="g", tree=tree, tasks=tuple(requests))


def _random_tree(rng: random.Random, keys: Sequence[str], tasks: list[str]) -> ConstraintTree:
    if not keys:
        return ConstraintTree(group="g", tasks=tuple(sorted(tasks)), keys=tuple(keys))

    def grow(prefix: NodePath, min_level: int, pool: list[str], depth: int) -> tuple[list[TreeNode], list[str]]:
        """Split ``pool`` into child nodes at levels >= min_level; return (children, leftover tasks)."""
        children: list[TreeNode] = []
        leftover: list[str] = []
        if min_level >= len(keys):
            return children, list(pool)
        groups: dict[int, list[str]] = {}
        for t in pool:
            g = rng.randrange(3)  # 0 = stays here, 1/2 = child groups
            groups.setdefault(g, []).append(t)
        leftover = groups.pop(0, [])
        lvl = rng.randrange(min_level, len(keys))  # tasks sharing a parent use the same key set
        for g, members in sorted(groups.items()):
            key = keys[lvl]
            path = (*prefix, (key, f"g{g}"))
            kids, own = grow(path, lvl + 1, members, depth + 1) if rng.random() < 0.5 else ([], members)
            req = "required" if rng.random() < 0.5 else "preferred"
            children.append(TreeNode(key, f"g{g}", path, req, tuple(kids), tuple(sorted(own))))  # type: ignore[arg-type]
        return children, leftover

    kids, root_tasks = grow((), 0, tasks, 0)
    kids.sort(key=lambda n: n.path)
    return ConstraintTree(group="g", children=tuple(kids), tasks=tuple(sorted(root_tasks)), keys=tuple(keys))


def check(snapshot: ClusterSnapshot, group: GangRequest, placement: Placement) -> list[str]:
    """Violations of: every task placed once on a schedulable, non-excluded machine; no machine
    over-committed in any resource; every required constraint met (one complete domain)."""
    problems: list[str] = []
    machines = {n.name: n for n in snapshot.nodes}
    tasks = {t.name: t for t in group.tasks}
    where = dict(placement.assignments)
    if sorted(where) != sorted(tasks):
        problems.append("not every task placed exactly once")
        return problems
    used: dict[str, list[int]] = {}
    for t, m in where.items():
        node = machines.get(m)
        if node is None or not node.schedulable:
            problems.append(f"{t} on unknown or cordoned machine {m}")
            continue
        if m in tasks[t].nodes_excluded:
            problems.append(f"{t} on excluded machine {m}")
        acc = used.setdefault(m, [0, 0, 0, 0])
        for r, v in enumerate(tasks[t].resources.as_tuple()):
            acc[r] += v
    for m, acc in used.items():
        free = machines[m].free.as_tuple()
        if any(a > f for a, f in zip(acc, free, strict=True)):
            problems.append(f"machine {m} over-committed: {acc} > {free}")
    level = {k: i for i, k in enumerate(snapshot.keys)}
    for node in group.tree.nodes():
        if not node.required:
            continue
        lvl = level.get(node.key)
        paths = {machines[where[t]].labels[: lvl + 1] for t in node.all_tasks()} if lvl is not None else {None}
        if len(paths) > 1 or any(p is None or None in p for p in paths):
            problems.append(f"required {node.display_name} not met: {sorted(map(str, paths))}")
    return problems


# -- multi-shape packing families -------------------------------------------------------------------

PACKING_KEYS = ("zone", "rack", "gpu-clique")
PALETTE = ((1, 2000), (2, 4000), (3, 6000), (2, 12000), (4, 8000), (1, 10000))  # (gpu, cpu millicores)


def _packing_pool(rng: random.Random, machines: int) -> ClusterSnapshot:
    """2 zones x 2 racks x 2 cliques; each machine 0-8 free GPUs and 0-32 free cores (2-D)."""
    nodes = []
    for m in range(machines):
        labels = (f"z{rng.randrange(2)}", f"r{rng.randrange(2)}", f"c{rng.randrange(2)}")
        zone, rack, cl = labels
        path = (zone, f"{zone}-{rack}", f"{zone}-{rack}-{cl}")
        free = Resources(gpu=rng.choice((0, 2, 3, 4, 4, 5, 6, 8, 8)), cpu=rng.choice((4, 8, 12, 16, 24, 32)) * 1000)
        nodes.append(NodeState(f"m{m:02d}", path, free))
    return ClusterSnapshot(pool="packing", keys=PACKING_KEYS, nodes=tuple(nodes))


def planted_instance(rng: random.Random) -> tuple[ClusterSnapshot, GangRequest]:
    """A feasible multi-shape instance with tight capacity: tasks are cut from the free capacity of the
    machines they are planted on (2-4 shapes from :data:`PALETTE`, each machine filled until no shape
    fits), so the planted solution uses most of its machines. Constraint nodes follow the planted
    solution: tasks planted in one gpu-clique / rack / zone form a required (or preferred) node there;
    the other machines of the pool are decoys with the same kinds of free capacity."""
    snapshot = _packing_pool(rng, rng.randint(12, 40))
    shapes = rng.sample(PALETTE, k=rng.randint(2, 4))
    hosts = [n for n in snapshot.nodes if rng.random() < 0.5]
    # Planted tasks per domain at a random level per host's clique: tasks of one clique stay together.
    per_domain: dict[tuple[str, ...], list[tuple[str, tuple[int, int]]]] = {}
    count = 0
    for node in hosts:
        gpu, cpu = node.free.gpu, node.free.cpu
        while True:
            fitting = [s for s in shapes if s[0] <= gpu and s[1] <= cpu]
            if not fitting or count >= 40:
                break
            s = rng.choice(fitting)
            gpu, cpu = gpu - s[0], cpu - s[1]
            per_domain.setdefault(tuple(node.labels), []).append((f"t{count:02d}", s))  # type: ignore[arg-type]
            count += 1
    if not per_domain:
        return planted_instance(rng)
    level_of: dict[tuple[str, ...], int] = {}
    for clique_path in sorted(per_domain):
        level_of[clique_path] = rng.choice((0, 1, 2, 2, -1))  # -1: unconstrained tasks
    # Group the planted tasks by their domain at the chosen level.
    buckets: dict[tuple[str, ...], list[tuple[str, tuple[int, int]]]] = {}
    loose: list[tuple[str, tuple[int, int]]] = []
    for clique_path, tasks in sorted(per_domain.items()):
        lvl = level_of[clique_path]
        if lvl < 0:
            loose.extend(tasks)
        else:
            buckets.setdefault(clique_path[: lvl + 1], []).extend(tasks)
    requirement = "required" if rng.random() < 0.8 else "preferred"
    children: list[TreeNode] = []
    for b, (dom, tasks) in enumerate(sorted(buckets.items())):
        key = PACKING_KEYS[len(dom) - 1]
        name = f"b{b}"
        children.append(TreeNode(key, name, ((key, name),), requirement, (), tuple(sorted(t for t, _s in tasks))))  # type: ignore[arg-type]
    all_tasks = [t for tasks in buckets.values() for t in tasks] + loose
    tree = ConstraintTree(
        group="g",
        children=tuple(sorted(children, key=lambda n: n.path)),
        tasks=tuple(sorted(t for t, _s in loose)),
        keys=PACKING_KEYS,
    )
    requests = tuple(TaskRequest(t, Resources(gpu=s[0], cpu=s[1])) for t, s in sorted(all_tasks))
    return snapshot, GangRequest(name="g", tree=tree, tasks=requests)


def renamed(group: GangRequest, rng: random.Random) -> GangRequest:
    """The same gang with every constraint node's group renamed at random (tree children re-sorted by
    their new paths, as the spec parser sorts them), so pre-order and sibling order change."""
    fresh: dict[NodePath, str] = {}

    def rebuild(node: TreeNode, prefix: NodePath) -> TreeNode:
        name = fresh.setdefault(node.path, f"n{rng.randrange(10**6):06d}")
        path = (*prefix, (node.key, name))
        kids = tuple(sorted((rebuild(c, path) for c in node.children), key=lambda n: n.path))
        return TreeNode(node.key, name, path, node.requirement, kids, node.tasks)

    tree = group.tree
    kids = tuple(sorted((rebuild(c, ()) for c in tree.children), key=lambda n: n.path))
    return GangRequest(group.name, ConstraintTree(tree.group, kids, tree.tasks, tree.keys), group.tasks)


def renamed_all(group: GangRequest, rng: random.Random) -> GangRequest:
    """:func:`renamed`, and every task renamed at random too (so its position in the sorted task tuples,
    its shape's index and the tree's pre-order of tasks change) and the task requests shuffled."""
    fresh = {t.name: f"x{k:03d}-{rng.randrange(10**6):06d}" for k, t in enumerate(group.tasks)}
    names = list(fresh.values())
    rng.shuffle(names)
    fresh = dict(zip(fresh, names, strict=True))

    def rebuild(node: TreeNode) -> TreeNode:
        kids = tuple(rebuild(c) for c in node.children)
        return TreeNode(node.key, node.group, node.path, node.requirement, kids,
                        tuple(sorted(fresh[t] for t in node.tasks)))

    tree = group.tree
    tasks = [TaskRequest(fresh[t.name], t.resources, t.nodes_excluded) for t in group.tasks]
    rng.shuffle(tasks)
    kids = tuple(rebuild(c) for c in tree.children)
    moved = GangRequest(group.name, ConstraintTree(tree.group, kids, tuple(sorted(fresh[t] for t in tree.tasks)),
                                                    tree.keys), tuple(tasks))
    return renamed(moved, rng)


def levels_met(snapshot: ClusterSnapshot, group: GangRequest, placement: Placement) -> list[tuple[object, ...]]:
    """Name-free summary of a placement's preferred outcome: per constraint node, its key path and
    requirements from the root, its tasks' requests, and the key at which its tasks share a domain;
    sorted, so nodes that only differ by names compare equal."""
    reqs = {t.name: t.resources.as_tuple() for t in group.tasks}
    by_path = {node.path: node for node in group.tree.nodes()}
    out: list[tuple[object, ...]] = []
    for report in placement.report:
        node = by_path[report.path]
        chain = tuple((by_path[report.path[: k + 1]].key, by_path[report.path[: k + 1]].requirement)
                      for k in range(len(report.path)))
        out.append((chain, tuple(sorted(reqs[t] for t in node.all_tasks())), report.met_key or ""))
    return sorted(out)
