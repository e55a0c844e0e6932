"""Preemption instances, the exact oracle and the greedy baseline (for tests and ``bench.preemption``).

- :func:`small_instance`: at most 8 machines under zone (and rack) keys, 1-8 LOW gangs holding capacity
  on them (each inside one domain or spread), some borrowing, start times with ties, and a preemptor of
  1-4 tasks with required/preferred zone or rack constraints.
- :func:`large_instance`: a 20,736-tray NVL72 pool from :mod:`scheduler.inventory.generate`, filled by
  the solver with a seeded mix of NORMAL and LOW gangs (the LOW ones are the candidates), and a preemptor.
- :func:`oracle`: every subset of the candidates solved; the cheapest fitting one (docs/design.md §9).
- :func:`greedy`: the largest LOW gang first until the preemptor fits (KAI/Kueue-style victim choice).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, replace

from scheduler.hold import released
from scheduler.inventory.generate import PoolShape, pool_generate_inventory
from scheduler.placement import DomainIndex, Placement, Policy, solve
from scheduler.placement.types import ClusterSnapshot, GangRequest, NodeState, Resources, TaskRequest
from scheduler.preemption import Candidate
from scheduler.resources import RESOURCES
from topology.tree import ConstraintTree, TreeNode

GIB = 1 << 30
Cost = tuple[int, float, int, int, tuple[float, ...], tuple[str, ...]]


def per_gpu(gpu: int) -> Resources:
    return Resources(gpu=gpu, cpu=gpu * 2000, memory=gpu * 8 * GIB)


def cost(victims: Sequence[Candidate], now: float | None = None) -> Cost:
    """The objective of docs/design.md §9, written independently of the package (smaller is better):
    GPUs of gangs within their quota, work lost (GPUs x time run up to ``now``; 0 without it), GPUs,
    gangs, start times latest first, keys."""
    gpu = sum(res.gpu for v in victims for _name, res in v.holdings)
    own = sum(res.gpu for v in victims if not v.borrowing for _name, res in v.holdings)
    work = 0.0
    if now is not None:
        for v in sorted(victims, key=lambda v: v.key):  # the package's order: equal sets, equal sums
            work += sum(res.gpu for _name, res in v.holdings) * max(0.0, now - v.started)
    starts = tuple(-s for s in sorted((v.started for v in victims), reverse=True))
    return (own, work, gpu, len(victims), starts, tuple(sorted(v.key for v in victims)))


# -- small random instances ------------------------------------------------------------------------


def _tree(rng: random.Random, keys: tuple[str, ...], tasks: list[str]) -> ConstraintTree:
    """No constraint, one node at a random key, or (two keys) a zone node over rack nodes."""
    req = lambda: "required" if rng.random() < 0.6 else "preferred"  # noqa: E731
    shape = rng.randrange(3) if len(keys) == 2 else rng.randrange(2)
    if shape == 0:
        return ConstraintTree(group="p", tasks=tuple(sorted(tasks)), keys=keys)
    if shape == 1:
        key = rng.choice(keys)
        node = TreeNode(key, "g", ((key, "g"),), req(), (), tuple(sorted(tasks)))  # type: ignore[arg-type]
        return ConstraintTree(group="p", children=(node,), keys=keys)
    zpath = (("zone", "z"),)
    split = rng.randint(1, len(tasks))
    parts = [tasks[:split], tasks[split:]] if split < len(tasks) else [tasks]
    racks = tuple(
        TreeNode("rack", f"r{i}", (*zpath, ("rack", f"r{i}")), req(), (), tuple(sorted(p)))  # type: ignore[arg-type]
        for i, p in enumerate(parts)
    )
    root = TreeNode("zone", "z", zpath, req(), racks)  # type: ignore[arg-type]
    return ConstraintTree(group="p", children=(root,), keys=keys)


def small_instance(rng: random.Random) -> tuple[ClusterSnapshot, GangRequest, list[Candidate]]:
    keys = ("zone", "rack")[: rng.randint(1, 2)]
    machines = []
    for m in range(rng.randint(2, 8)):
        z = rng.randrange(2)
        labels = (f"z{z}", f"z{z}-r{rng.randrange(2)}")[: len(keys)]
        machines.append((f"m{m}", labels, rng.choice((2, 4, 4, 8))))
    free = {name: gpu - (1 if rng.random() < 0.3 else 0) for name, _labels, gpu in machines}
    candidates = []
    for c in range(rng.randint(2, 8)):
        domain = rng.choice(machines)[1][: rng.randrange(len(keys) + 1)]
        inside = [name for name, labels, _gpu in machines if labels[: len(domain)] == domain]
        holdings: list[tuple[str, Resources]] = []
        for _task in range(rng.randint(1, 4)):
            gpu = rng.choice((1, 2, 2, 4))
            room = [name for name in inside if free[name] >= gpu]
            if room:
                name = rng.choice(room)
                free[name] -= gpu
                holdings.append((name, per_gpu(gpu)))
        if holdings:
            candidates.append(Candidate(f"c{c}", tuple(holdings), rng.random() < 0.4, float(rng.randrange(4))))
    nodes = tuple(
        NodeState(name, labels, per_gpu(free[name]), schedulable=rng.random() > 0.05) for name, labels, _g in machines
    )
    snapshot = ClusterSnapshot(pool="small", keys=keys, nodes=nodes)
    names = [f"t{i}" for i in range(rng.randint(1, 4))]
    gpus = [rng.choice((1, 2, 2, 4, 4)) for _ in range(rng.randint(1, 2))]
    tasks = tuple(TaskRequest(t, per_gpu(rng.choice(gpus))) for t in names)
    return snapshot, GangRequest(name="p", tree=_tree(rng, keys, names), tasks=tasks), candidates


def oracle(
    snapshot: ClusterSnapshot,
    preemptor: GangRequest,
    candidates: Sequence[Candidate],
    policy: Policy = Policy(),
    now: float | None = None,
) -> tuple[str, ...] | None:
    """The optimal victim keys (sorted) over every subset of ``candidates`` for :func:`cost` at ``now``,
    or None if none fits."""
    best: tuple[Cost, tuple[str, ...]] | None = None
    for mask in range(1 << len(candidates)):
        victims = [c for i, c in enumerate(candidates) if mask >> i & 1]
        key = cost(victims, now)
        if best is not None and key >= best[0]:
            continue
        if isinstance(solve(released(snapshot, victims), preemptor, policy), Placement):
            best = (key, key[5])
    return None if best is None else best[1]


# -- the greedy baseline ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GreedyChoice:
    victims: tuple[Candidate, ...]
    placement: Placement
    explored: int


def greedy(
    snapshot: ClusterSnapshot, preemptor: GangRequest, candidates: Sequence[Candidate], policy: Policy = Policy()
) -> GreedyChoice | None:
    """Evict the largest LOW gang (GPUs, then the most recent, then key) one at a time, solving after
    each, until the preemptor fits; None when it does not fit with all of them evicted."""
    order = sorted(candidates, key=lambda c: (-sum(r.gpu for _n, r in c.holdings), -c.started, c.key))
    current = snapshot
    for k, victim in enumerate(order, start=1):
        current = released(current, [victim])
        result = solve(current, preemptor, policy)
        if isinstance(result, Placement):
            return GreedyChoice(tuple(order[:k]), result, k)
    return None


# -- large instances -------------------------------------------------------------------------------

NVL72 = PoolShape(zones=4, spines_per_zone=8, racks_per_spine=36, cliques_per_rack=1, nodes_per_clique=18)
TRAY = Resources(gpu=4, cpu=16_000, memory=128 * GIB)


def nvl72_snapshot(shape: PoolShape = NVL72) -> ClusterSnapshot:
    """The generated inventory as an idle solver snapshot (keys zone > spine > rack > gpu-clique)."""
    inventory = pool_generate_inventory(name="nvl72", shape=shape)
    assert inventory.keys is not None
    labels = [spec.label for spec in inventory.keys]
    nodes = tuple(
        NodeState(
            n.name,
            tuple(n.labels.get(label) for label in labels),
            Resources(*(getattr(n, r.capacity_field) - getattr(n, r.used_field) for r in RESOURCES)),
        )
        for n in inventory.nodes
    )
    return ClusterSnapshot(pool="nvl72", keys=tuple(spec.key for spec in inventory.keys), nodes=nodes)


def gang(
    name: str,
    cliques: int,
    trays: int,
    *,
    key: str = "gpu-clique",
    zone: bool = True,
    requirement: str = "required",
    gpu: int = 4,
) -> GangRequest:
    """``cliques`` groups of ``trays`` tasks, each group in one domain of ``key``, all in one zone if asked."""
    top: tuple[tuple[str, str], ...] = (("zone", "all"),) if zone and cliques > 1 else ()
    groups = []
    tasks: list[str] = []
    for g in range(cliques):
        own = tuple(sorted(f"{name}-g{g:02d}-t{t:02d}" for t in range(trays)))
        tasks.extend(own)
        groups.append(TreeNode(key, f"g{g:02d}", (*top, (key, f"g{g:02d}")), requirement, (), own))  # type: ignore[arg-type]
    children = tuple(sorted(groups, key=lambda n: n.path))
    if top:
        children = (TreeNode("zone", "all", top, "required", children),)
    tree = ConstraintTree(group=name, children=children, keys=("zone", "spine", "rack", "gpu-clique"))
    res = Resources(gpu=gpu, cpu=TRAY.cpu * gpu // 4, memory=TRAY.memory * gpu // 4)
    return GangRequest(name=name, tree=tree, tasks=tuple(TaskRequest(t, res) for t in sorted(tasks)))


def filled_pool(seed: int, fill: float = 0.97) -> tuple[ClusterSnapshot, list[Candidate]]:
    """The NVL72 pool filled to ``fill`` of its GPUs by seeded gangs placed by the solver (a DomainIndex
    kept current), about half of them LOW: (the snapshot with everything running, the LOW candidates)."""
    rng = random.Random(seed)
    base = nvl72_snapshot()
    index = DomainIndex(base)
    total = sum(n.free.gpu for n in base.nodes)
    used, misses, serial = 0, 0, 0
    candidates: list[Candidate] = []
    while used < fill * total and misses < 50:
        serial += 1
        kind = rng.random()
        if kind < 0.45:
            request = gang(f"j{serial}", 1, rng.choice((2, 4, 8, 9, 16, 18)))
        elif kind < 0.75:
            request = gang(f"j{serial}", rng.randint(2, 6), rng.choice((4, 8, 16)))
        elif kind < 0.9:
            request = gang(
                f"j{serial}", 1, rng.randint(1, 16), key="rack", requirement="preferred", gpu=rng.choice((1, 2))
            )
        else:
            request = gang(f"j{serial}", rng.randint(2, 4), 18)
        result = solve(index, request, Policy(max_seconds=None))
        if not isinstance(result, Placement):
            misses += 1
            continue
        reqs = {t.name: t.resources for t in request.tasks}
        index.place([(machine, reqs[task].as_tuple()) for task, machine in result.assignments])
        used += sum(r.gpu for r in reqs.values())
        if rng.random() < 0.5:
            holdings = tuple((machine, reqs[task]) for task, machine in result.assignments)
            candidates.append(Candidate(f"low-{serial:04d}", holdings, rng.random() < 0.4, float(serial)))
    return index.snapshot("nvl72"), candidates


def flat(name: str, trays: int) -> GangRequest:
    """``trays`` tasks of one tray each, no topology constraint."""
    names = tuple(f"{name}-t{t:04d}" for t in range(trays))
    tree = ConstraintTree(group=name, tasks=names, keys=("zone", "spine", "rack", "gpu-clique"))
    return GangRequest(name=name, tree=tree, tasks=tuple(TaskRequest(t, TRAY) for t in names))


# HIGH gangs that do not fit the filled pools: a whole rack, 4 or 8 cliques of 16 trays in one zone,
# and more whole trays than are idle in the pool (no topology constraint).
LARGE_PREEMPTORS = {
    "one-rack": lambda: gang("hi", 1, 18),
    "zone-4x16": lambda: gang("hi", 4, 16),
    "zone-8x16": lambda: gang("hi", 8, 16),
    "flat-1400": lambda: flat("hi", 1400),
}


def crowded_pool(
    seed: int, gangs: int = 5000, now: float = 1_000_000.0, ages: float = 7200.0
) -> tuple[ClusterSnapshot, list[Candidate]]:
    """The NVL72 pool with ``gangs`` small LOW gangs running (1-3 trays, each in one rack), NORMAL work
    between them and about 3 % of the trays idle, laid out rack by rack (no solver: 5,000 placements
    would dominate the benchmark). One rack in seven holds LOW work only. Each LOW gang started up
    to ``ages`` seconds before ``now``; the latest-started quarter borrows (one team past its quota,
    as the cycle decides it: LOW gangs in start order)."""
    rng = random.Random(seed)
    base = nvl72_snapshot()
    racks: dict[tuple[str | None, ...], list[NodeState]] = {}
    for node in base.nodes:
        racks.setdefault(node.labels, []).append(node)
    free = {node.name: TRAY for node in base.nodes}
    held: list[tuple[str, ...]] = []
    for _labels, trays in sorted(racks.items(), key=lambda item: tuple(str(x) for x in item[0])):
        only_low = rng.random() < 1 / 7
        at = 0
        while at < len(trays):
            x = rng.random()
            if x < 0.03:
                at += 1
            elif x < 0.38 and not only_low:
                for node in trays[at: at + rng.randint(1, 6)]:
                    free[node.name] = Resources()
                    at += 1
            else:
                held.append(tuple(node.name for node in trays[at: at + rng.randint(1, 3)]))
                at += len(held[-1])
    rng.shuffle(held)
    low, normal = held[:gangs], held[gangs:]
    for names in [*low, *normal]:
        for name in names:
            free[name] = Resources()
    starts = sorted(now - rng.uniform(0, ages) for _ in low)
    borrowing = len(low) - len(low) // 4
    candidates = [Candidate(f"low-{k:05d}", tuple((name, TRAY) for name in names), k >= borrowing, starts[k])
                  for k, names in enumerate(low)]
    nodes = tuple(replace(node, free=free[node.name]) for node in base.nodes)
    return ClusterSnapshot(pool="nvl72", keys=base.keys, nodes=nodes), candidates
