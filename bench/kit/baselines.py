"""Two greedy baselines, RE-IMPLEMENTATIONS for benchmarking only (not the upstream code):

- ``kueue_greedy``: after Kueue's Topology-Aware Scheduling "BestFit". Constraint nodes are handled
  top-down, subtrees one after another in tree order. A node picks, at its level and inside its
  parent's domain, the fitting domain with the fewest free task slots (per-shape counts aggregated
  bottom-up, as Kueue does); a preferred node that fits nowhere moves one level up at a time (fewest
  domains). Its children are processed next, then its own tasks are put on machines best-fit. No
  backtracking: the first dead end is the answer ("unschedulable").
- ``pod_affinity``: default Kubernetes behaviour with pod (anti-)affinity and a gang (co-)scheduler:
  tasks are placed one at a time in name order. A required constraint restricts a task to the domain
  of the first already-placed task of the same constraint node (none placed yet: anywhere); preferred
  ones add an affinity score. Among feasible machines the score is affinity first, then
  NodeResourcesFit "LeastAllocated" (emptiest machine), then name. All or nothing.

Both return the solver's own result types so they can be compared on equal terms. Both reuse the
solver's aggregated :class:`~scheduler.placement.index.DomainIndex` where they need counts, so timings compare
the algorithms, not the data loading.
"""

from __future__ import annotations

from scheduler.placement.index import DomainIndex
from scheduler.placement.machines import Machines
from scheduler.placement.plan import TreeIndex, index_tree, shapes_of
from scheduler.placement.types import ClusterSnapshot, GangRequest, Placement, Unplaceable


def _fail(message: str) -> Unplaceable:
    return Unplaceable(status="unschedulable", reason={"code": "baseline"}, message=message)


def _descend(pool: Machines, d: int, s: int, rem: int) -> tuple[int, tuple[tuple[int, int, int, int], str]] | None:
    """Kueue's BestFit descent for one pod: the tightest machine directly in ``d``, else the tightest
    child that holds all ``rem`` remaining pods, else the largest child."""
    while True:
        classes = pool.classes[d]
        best = None
        for key in classes:
            if pool.fit(key[0], key[1], s) > 0 and (best is None or key < best):
                best = key
        if best is not None:
            return d, best
        pick = -1
        pick_key: tuple[int, int, int] | None = None
        for c in pool.children[d]:
            n = pool.cap[c][s]
            if n <= 0:
                continue
            k = (0, n, c) if n >= rem else (1, -n, c)
            if pick_key is None or k < pick_key:
                pick, pick_key = c, k
        if pick < 0:
            return None
        d = pick


def kueue_greedy(snapshot: ClusterSnapshot, group: GangRequest) -> Placement | Unplaceable:
    """Kueue TAS BestFit re-implementation (see the module docstring)."""
    ti = index_tree(group, snapshot.keys)
    shapes, task_shape = shapes_of(group, {n.name for n in snapshot.nodes})
    pool = Machines(DomainIndex(snapshot), shapes)
    result: dict[int, str] = {}

    def counts(tasks: tuple[int, ...]) -> dict[int, int]:
        need: dict[int, int] = {}
        for t in tasks:
            need[task_shape[t]] = need.get(task_shape[t], 0) + 1
        return need

    def fits(d: int, need: dict[int, int]) -> bool:
        return all(pool.cap[d][s] >= k for s, k in need.items())

    def put(tasks: tuple[int, ...], d: int) -> bool:
        remaining = counts(tasks)
        for t in sorted(tasks, key=lambda t: (tuple(-x for x in shapes[task_shape[t]].req), t)):
            pick = _descend(pool, d, task_shape[t], remaining[task_shape[t]])
            remaining[task_shape[t]] -= 1
            if pick is None:
                return False
            dom, key = pick
            result[t] = pool.place(dom, key, task_shape[t]).machine
        return True

    def place(i: int, ctx: int) -> bool:
        level = ti.level[i]
        need = counts(ti.subtree[i])
        chosen = -1
        if level is not None and level > pool.level[ctx]:
            lvl = level
            while lvl > pool.level[ctx]:
                options = [d for d in pool.descendants(ctx, lvl) if fits(d, need)]
                if options:
                    chosen = min(options, key=lambda d: (sum(pool.cap[d][s] for s in need), d))
                    break
                if ti.nodes[i].required:
                    return False
                lvl -= 1
        elif level is None and ti.nodes[i].required:
            return False
        d = chosen if chosen >= 0 else ctx
        if chosen < 0 and not fits(ctx, need):
            return False
        for c in ti.children[i]:
            if not place(c, d):
                return False
        return put(ti.direct[i], d)

    for i in ti.top:
        if not place(i, 0):
            return _fail(f"kueue-greedy: no domain for {ti.nodes[i].display_name} on the greedy path")
    if not put(ti.root_tasks, 0):
        return _fail("kueue-greedy: unconstrained tasks do not fit")
    names = ti.task_names
    return Placement(status="placed", assignments=tuple(sorted((names[t], m) for t, m in result.items())))


def pod_affinity(snapshot: ClusterSnapshot, group: GangRequest) -> Placement | Unplaceable:
    """Per-pod placement with (anti-)affinity scoring (see the module docstring)."""
    ti: TreeIndex = index_tree(group, snapshot.keys)
    reqs = [t.resources.as_tuple() for t in group.tasks]
    excluded = [t.nodes_excluded for t in group.tasks]
    machines = [n for n in snapshot.nodes if n.schedulable]
    free = [list(n.free.as_tuple()) for n in machines]
    full = [max(1, sum(f)) for f in free]
    labels = [n.labels for n in machines]
    # Constraint nodes above each task: (node index, level, required).
    above: list[list[tuple[int, int | None, bool]]] = [[] for _ in ti.task_names]
    for i, node in enumerate(ti.nodes):
        for t in ti.subtree[i]:
            above[t].append((i, ti.level[i], node.required))
    anchor: dict[int, tuple] = {}  # node index -> label path of its first placed task
    result: dict[int, int] = {}
    for t in sorted(range(len(ti.task_names)), key=lambda t: ti.task_names[t]):
        req = reqs[t]
        best: tuple | None = None
        best_m = -1
        for m in range(len(machines)):
            f = free[m]
            if f[0] < req[0] or f[1] < req[1] or f[2] < req[2] or f[3] < req[3]:
                continue
            if machines[m].name in excluded[t]:
                continue
            lab = labels[m]
            ok = True
            affinity = 0
            for i, lvl, required in above[t]:
                if lvl is None:
                    if required:
                        ok = False
                        break
                    continue
                path = lab[: lvl + 1]
                complete = len(path) == lvl + 1 and None not in path
                want = anchor.get(i)
                if required:
                    if not complete or (want is not None and path != want):
                        ok = False
                        break
                elif complete and want is not None and path == want:
                    affinity += 1
            if not ok:
                continue
            least_allocated = sum(f) * 1000 // full[m]
            score = (affinity, least_allocated, -m)
            if best is None or score > best:
                best, best_m = score, m
        if best_m < 0:
            return _fail(f"pod-affinity: no machine for task {ti.task_names[t]}")
        for r in range(4):
            free[best_m][r] -= req[r]
        result[t] = best_m
        for i, lvl, _required in above[t]:
            if lvl is not None and i not in anchor:
                path = labels[best_m][: lvl + 1]
                if len(path) == lvl + 1 and None not in path:
                    anchor[i] = path
    names = ti.task_names
    return Placement(
        status="placed", assignments=tuple(sorted((names[t], machines[m].name) for t, m in result.items()))
    )
