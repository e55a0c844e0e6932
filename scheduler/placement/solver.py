"""Entry point :func:`solve`: required constraints hard, preferred ones met whenever possible.

Algorithm (design §4, §5):
1. Index the tree (pre-order), map each node's key to its level in the snapshot's key order and each
   task to a *shape* (request + excluded machines present in the pool); aggregate the pool once
   (:class:`scheduler.placement.pool.Pool`).
2. Strict attempt: every node at its own level (preferred treated as required). Success means every
   constraint is met.
3. Otherwise the required-only problem decides the verdict: infeasible means "unschedulable" (with a
   structured reason from :mod:`scheduler.placement.explain`), an exhausted budget means "undecided".
4. Otherwise relax preferred nodes one at a time, coarsest first (pre-order): each gets the finest
   level (own key, then the next coarser key, ...) at which a placement exists given the levels already
   fixed, later preferred nodes being free. The last found placement is a witness: levels it already
   meets need no search. Tasks of a relaxed node are packed into the fewest domains by the packing
   order (best fit; else largest domain first), which is the "tightest spread".

Invariants: the result meets every required constraint and never over-commits a machine; equal
inputs give equal outputs; "unschedulable" is returned only on a proof of infeasibility.
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduler.placement.explain import explain
from scheduler.placement.pool import INFEASIBLE, UNDECIDED, Block, Budget, Plan, Pool, Shape, Step
from scheduler.placement.types import (
    ClusterSnapshot,
    ConstraintReport,
    GroupRequest,
    Placement,
    Policy,
    Unplaceable,
)
from workflows.spec.tree import TreeNode

NO_LEVEL = -1


@dataclass(frozen=True, slots=True)
class TreeIndex:
    """The constraint tree flattened in pre-order, with task indices instead of names."""

    nodes: tuple[TreeNode, ...]
    parent: tuple[int, ...]  # -1 for top-level nodes
    children: tuple[tuple[int, ...], ...]
    top: tuple[int, ...]
    level: tuple[int | None, ...]  # index of the node's key in the snapshot's keys; None if absent
    direct: tuple[tuple[int, ...], ...]  # task indices hanging directly off each node
    subtree: tuple[tuple[int, ...], ...]
    root_tasks: tuple[int, ...]
    task_names: tuple[str, ...]


def index_tree(group: GroupRequest, keys: tuple[str, ...]) -> TreeIndex:
    """Flatten ``group.tree``; raises ValueError when tree tasks and requests disagree."""
    names = tuple(t.name for t in group.tasks)
    pos = {name: i for i, name in enumerate(names)}
    if len(pos) != len(names):
        raise ValueError(f"group {group.name!r}: duplicate task names")
    if set(group.tree.all_tasks()) != set(names):
        raise ValueError(f"group {group.name!r}: tree tasks and task requests differ")
    nodes: list[TreeNode] = []
    parent: list[int] = []
    children: list[list[int]] = []

    def visit(node: TreeNode, up: int) -> int:
        i = len(nodes)
        nodes.append(node)
        parent.append(up)
        children.append([])
        for child in node.children:
            children[i].append(visit(child, i))
        return i

    top = tuple(visit(child, -1) for child in group.tree.children)
    key_level = {key: i for i, key in enumerate(keys)}
    direct = tuple(tuple(pos[t] for t in node.tasks) for node in nodes)
    subtree: list[tuple[int, ...]] = [()] * len(nodes)
    for i in range(len(nodes) - 1, -1, -1):
        acc = list(direct[i])
        for c in children[i]:
            acc.extend(subtree[c])
        subtree[i] = tuple(sorted(acc))
    return TreeIndex(
        nodes=tuple(nodes),
        parent=tuple(parent),
        children=tuple(tuple(c) for c in children),
        top=top,
        level=tuple(key_level.get(node.key) for node in nodes),
        direct=direct,
        subtree=tuple(subtree),
        root_tasks=tuple(pos[t] for t in group.tree.tasks),
        task_names=names,
    )


def shapes_of(group: GroupRequest, snapshot: ClusterSnapshot) -> tuple[list[Shape], list[int]]:
    """Distinct task shapes (in first-seen order of tasks sorted by name) and each task's shape index."""
    excluded_any = any(t.nodes_excluded for t in group.tasks)
    names = {n.name for n in snapshot.nodes} if excluded_any else set()
    shapes: list[Shape] = []
    index: dict[Shape, int] = {}
    task_shape = [0] * len(group.tasks)
    for i in sorted(range(len(group.tasks)), key=lambda i: group.tasks[i].name):
        task = group.tasks[i]
        shape = Shape(task.resources.as_tuple(), frozenset(task.nodes_excluded & names))
        s = index.get(shape)
        if s is None:
            s = index[shape] = len(shapes)
            shapes.append(shape)
        task_shape[i] = s
    return shapes, task_shape


def build_plan(ti: TreeIndex, eff: list[int], task_shape: list[int], shapes: list[Shape]) -> Plan:
    """Domain steps for effective levels ``eff`` (one per node, NO_LEVEL = no own constraint)."""
    nshapes = len(shapes)
    sig_memo: dict[tuple[int, int], tuple] = {}

    def sig(i: int, ctx_level: int) -> tuple:
        got = sig_memo.get((i, ctx_level))
        if got is None:
            own = eff[i] > ctx_level
            lvl = eff[i] if own else ctx_level
            kids = tuple(sorted(sig(c, lvl) for c in ti.children[i]))
            got = (eff[i] if own else -2, tuple(sorted(task_shape[t] for t in ti.direct[i])), kids)
            sig_memo[(i, ctx_level)] = got
        return got

    def demand(i: int) -> tuple[int, ...]:
        v = [0, 0, 0, 0]
        for t in ti.subtree[i]:
            req = shapes[task_shape[t]].req
            for r in range(4):
                v[r] += req[r]
        return tuple(-x for x in v)

    def order(kids: tuple[int, ...], ctx_level: int) -> list[int]:
        return sorted(kids, key=lambda c: (-len(ti.subtree[c]), demand(c), sig(c, ctx_level), ti.nodes[c].path))

    steps: list[Step] = []
    root_tasks: list[int] = list(ti.root_tasks)
    last_by_ctx: dict[int, int] = {}

    def visit(i: int, ctx: int, ctx_level: int, sink: list[int]) -> None:
        if eff[i] > ctx_level:
            k = len(steps)
            step = Step(node=i, level=eff[i], ctx=ctx, sig=sig(i, ctx_level))
            prev = last_by_ctx.get(ctx)
            if prev is not None and steps[prev].sig == step.sig:
                step.twin = prev
            last_by_ctx[ctx] = k
            steps.append(step)
            my_sink, my_ctx, my_level = step.tasks, k, eff[i]
        else:
            my_sink, my_ctx, my_level = sink, ctx, ctx_level
        my_sink.extend(ti.direct[i])
        for c in order(ti.children[i], my_level):
            visit(c, my_ctx, my_level, my_sink)

    for c in order(ti.top, NO_LEVEL):
        visit(c, -1, NO_LEVEL, root_tasks)

    def counts(tasks: list[int]) -> tuple[list[tuple[int, int]], tuple[int, int, int, int]]:
        per = [0] * nshapes
        tot = [0, 0, 0, 0]
        for t in tasks:
            s = task_shape[t]
            per[s] += 1
            req = shapes[s].req
            for r in range(4):
                tot[r] += req[r]
        return [(s, k) for s, k in enumerate(per) if k], (tot[0], tot[1], tot[2], tot[3])

    need_per = [[0] * nshapes for _ in steps]
    need_tot = [[0, 0, 0, 0] for _ in steps]
    for k in range(len(steps) - 1, -1, -1):
        step = steps[k]
        step.direct, step.direct_tot = counts(step.tasks)
        for s, n in step.direct:
            need_per[k][s] += n
        for r in range(4):
            need_tot[k][r] += step.direct_tot[r]
        if step.ctx >= 0:
            for s in range(nshapes):
                need_per[step.ctx][s] += need_per[k][s]
            for r in range(4):
                need_tot[step.ctx][r] += need_tot[k][r]
        step.need = [(s, n) for s, n in enumerate(need_per[k]) if n]
        step.need_tot = [(r, v) for r, v in enumerate(need_tot[k]) if v]

    root_blocks: list[Block] = []
    grouped: dict[int, dict[tuple, Block]] = {}
    for step in steps:
        by_sig = grouped.setdefault(step.ctx, {})
        block = by_sig.get(step.sig)
        if block is None:
            by_sig[step.sig] = Block(step.level, step.need, step.need_tot, 1)
        else:
            block.count += 1
    for ctx, by_sig in grouped.items():
        blocks = list(by_sig.values())
        # Copies of equal needs at different levels all sit inside domains of the coarsest of those
        # levels, so they also share that level's room (e.g. 25 clique groups and 1 rack group of 18).
        by_need: dict[tuple, list[Block]] = {}
        for b in blocks:
            by_need.setdefault((tuple(b.need), tuple(b.need_tot)), []).append(b)
        for same in by_need.values():
            if len({b.level for b in same}) > 1:
                blocks.append(
                    Block(min(b.level for b in same), same[0].need, same[0].need_tot, sum(b.count for b in same))
                )
        if ctx < 0:
            root_blocks = blocks
        else:
            steps[ctx].blocks = blocks
    root_direct, root_tot = counts(root_tasks)
    owner = [-1] * len(ti.task_names)
    for i, tasks in enumerate(ti.direct):
        for t in tasks:
            owner[t] = i
    return Plan(steps, root_tasks, root_direct, root_tot, root_blocks, owner)


class _Context:
    """One solve call: the pool, the indexed tree and the search entry for a set of levels."""

    def __init__(self, snapshot: ClusterSnapshot, group: GroupRequest, policy: Policy) -> None:
        self.snapshot = snapshot
        self.group = group
        self.policy = policy
        self.ti = index_tree(group, snapshot.keys)
        self.shapes, self.task_shape = shapes_of(group, snapshot)
        self.pool = Pool(snapshot, self.shapes)
        self.steps_used = 0

    def run(self, eff: list[int], max_steps: int | None = None) -> list[tuple[str, int]] | str:
        plan = build_plan(self.ti, eff, self.task_shape, self.shapes)
        budget = Budget(self.policy.max_steps if max_steps is None else max_steps)
        try:
            return self.pool.search(plan, self.task_shape, budget)
        finally:
            self.steps_used += budget.used

    def shared_level(self, found: list[tuple[str, int]], tasks: tuple[int, ...], upto: int) -> int:
        """Finest level <= ``upto`` at which all ``tasks`` sit in one domain (NO_LEVEL if none)."""
        if not tasks:
            return upto
        paths = [self.pool.path[found[t][1]] for t in tasks]
        best = NO_LEVEL
        for lvl in range(upto + 1):
            first = paths[0]
            if len(first) <= lvl or any(len(p) <= lvl or p[lvl] != first[lvl] for p in paths[1:]):
                break
            best = lvl
        return best


def solve(snapshot: ClusterSnapshot, group: GroupRequest, policy: Policy | None = None) -> Placement | Unplaceable:
    """Place every task of ``group`` at once on ``snapshot`` (all or nothing).

    Returns a :class:`Placement` (task -> machine, plus one :class:`ConstraintReport` per tree node)
    or an :class:`Unplaceable`: "unschedulable" when no placement meets the required constraints
    (proven), "undecided" when ``policy.max_steps`` ran out first. Raises ValueError only for
    malformed input (tree tasks and requests disagree)."""
    policy = policy or Policy()
    ctx = _Context(snapshot, group, policy)
    ti = ctx.ti
    if not ti.task_names:
        return Placement(status="placed", assignments=(), report=_report(ctx, []))
    for i, node in enumerate(ti.nodes):
        if node.required and ti.level[i] is None:
            return explain(ctx.pool, ti, ctx.task_shape, culprit_key=i)
    own = [lvl if lvl is not None else NO_LEVEL for lvl in ti.level]
    required_only = [own[i] if node.required else NO_LEVEL for i, node in enumerate(ti.nodes)]
    found = ctx.run(own)
    if isinstance(found, list):
        return _placed(ctx, found)
    if own != required_only:
        found = ctx.run(required_only)
    if found == INFEASIBLE:
        return explain(ctx.pool, ti, ctx.task_shape)
    if found == UNDECIDED:
        return Unplaceable(
            status="undecided",
            reason={"code": "undecided", "steps": ctx.steps_used, "max_steps": policy.max_steps},
            message=f"search budget of {policy.max_steps} steps ran out before a placement was found or ruled out",
        )
    assert isinstance(found, list)
    witness = found
    eff = list(required_only)
    # A relaxation trial only decides how well a preference is met, so it gets a smaller budget; running
    # out just means the preference is relaxed further (the witness stays valid).
    trial_steps = max(1_000, policy.max_steps // 20)
    sigs = _static_sigs(ti, ctx.task_shape)
    proven: set[tuple] = set()  # (parent, signature, level) shown infeasible for an identical earlier sibling
    for i, node in enumerate(ti.nodes):
        if node.required or ti.level[i] is None:
            continue
        target = own[i]
        have = ctx.shared_level(witness, ti.subtree[i], target)
        fixed = have
        for lvl in range(target, have, -1):
            if (ti.parent[i], sigs[i], lvl) in proven:
                continue
            eff[i] = lvl
            trial = ctx.run(eff, trial_steps)
            if isinstance(trial, list):
                witness, fixed = trial, lvl
                break
            if trial == INFEASIBLE:
                # Mirror argument: an identical later sibling at this level faces a problem at least as
                # constrained (this node is then fixed coarser instead of free), so it fails too.
                proven.add((ti.parent[i], sigs[i], lvl))
        eff[i] = fixed
    return _placed(ctx, witness)


def _static_sigs(ti: TreeIndex, task_shape: list[int]) -> list[tuple]:
    """Per node: a value equal for nodes with isomorphic subtrees (keys, requirements, task shapes)."""
    sigs: list[tuple] = [()] * len(ti.nodes)
    for i in range(len(ti.nodes) - 1, -1, -1):
        node = ti.nodes[i]
        sigs[i] = (
            node.key,
            node.requirement,
            tuple(sorted(task_shape[t] for t in ti.direct[i])),
            tuple(sorted(sigs[c] for c in ti.children[i])),
        )
    return sigs


def _placed(ctx: _Context, found: list[tuple[str, int]]) -> Placement:
    names = ctx.ti.task_names
    assignments = tuple(sorted((names[t], found[t][0]) for t in range(len(names))))
    return Placement(status="placed", assignments=assignments, report=_report(ctx, found))


def _report(ctx: _Context, found: list[tuple[str, int]]) -> tuple[ConstraintReport, ...]:
    ti, pool = ctx.ti, ctx.pool
    nkeys = len(ctx.snapshot.keys)
    out: list[ConstraintReport] = []
    for i, node in enumerate(ti.nodes):
        lvl = ti.level[i]
        tasks = ti.subtree[i]
        upto = lvl if lvl is not None else nkeys - 1
        if found and tasks:
            shared = ctx.shared_level(found, tasks, upto)
            domains: set[tuple[str | None, ...]] = set()
            if lvl is not None:
                for t in tasks:
                    p = pool.path[found[t][1]]
                    domains.add(tuple(p[: lvl + 1]) + (None,) * max(0, lvl + 1 - len(p)))
        else:
            shared, domains = (upto, set())
        met = lvl is not None and shared == lvl
        out.append(
            ConstraintReport(
                path=node.path,
                key=node.key,
                requirement=node.requirement,
                met=met,
                met_key=ctx.snapshot.keys[shared] if shared >= 0 else None,
                domains=tuple(sorted(domains, key=lambda p: tuple(x or "" for x in p))),
            )
        )
    return tuple(out)
