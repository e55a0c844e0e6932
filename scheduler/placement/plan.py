"""Flattening a constraint tree and turning effective levels into the search's domain steps.

:func:`index_tree` flattens a :class:`~topology.tree.ConstraintTree` in pre-order (task
indices instead of names, each node's key mapped to its level in the snapshot's key order);
:func:`shapes_of` groups tasks into distinct request shapes; :func:`build_plan` turns one effective
level per node into the :class:`Plan` (its :class:`Step` records) that the domain phase,
:meth:`scheduler.placement.search.GangSearch.search`, walks. Pure and deterministic: every sort has a
total key.

Counts are (shape, count) pairs with count > 0 and resource totals (resource, amount) pairs with
amount > 0; a step *claims* its bound tasks' counts on its domain and that domain's ancestors while
the domain phase runs (a claim lives only inside one search; it is neither a hold nor a reservation,
see the glossary in docs/architecture.md).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from scheduler.placement.index import Shape
from scheduler.placement.types import GangRequest, Vec
from topology.tree import TreeNode

NO_LEVEL = -1

#: (shape, count) pairs, count > 0.
Counts = list[tuple[int, int]]
#: (resource, amount) pairs, amount > 0.
Totals = list[tuple[int, int]]


@dataclass(slots=True)
class Block:
    """Identical child steps of one step: ``count`` copies of (level, need, need_tot)."""

    level: int
    need: Counts
    need_tot: Totals
    count: int


class SpreadNeed(NamedTuple):
    """A relaxed preferred node whose tasks are bound to a step: they go to the fewest domains of
    ``level`` (its own level); ``per_shape`` and ``total`` are its whole subtree's tasks."""

    level: int
    per_shape: list[int]
    total: Vec


class Pull(NamedTuple):
    """The nearest relaxed preferred node above a step: its own level and its whole subtree's tasks
    per shape (the step prefers domains under one domain of that level that holds them)."""

    level: int
    per_shape: list[int]


@dataclass(slots=True)
class Step:
    """One domain choice of the domain phase."""

    node: int  # index into the tree index's nodes
    level: int
    ctx: int  # index of the context step, -1 for the pool
    tasks: list[int] = field(default_factory=list)  # task indices bound to this step's domain
    direct: Counts = field(default_factory=list)  # the counts the step claims (its bound tasks)
    direct_tot: Vec = (0, 0, 0, 0)
    need: Counts = field(default_factory=list)  # whole subtree, per shape
    need_tot: Totals = field(default_factory=list)
    twin: int = -1
    blocks: list[Block] = field(default_factory=list)
    sig: tuple[Any, ...] = ()
    spread: list[SpreadNeed] = field(default_factory=list)  # relaxed preferred nodes bound here
    under: tuple[int, ...] = ()  # relaxed preferred tree nodes strictly above this step's node
    pull: Pull | None = None  # the nearest of them


@dataclass(slots=True)
class Plan:
    steps: list[Step]
    root_tasks: list[int]
    root_direct: Counts
    root_direct_tot: Vec
    root_blocks: list[Block]
    owner: list[int] = field(default_factory=list)  # per task index: its tree node (-1 = root)
    spread: list[int] = field(default_factory=list)  # per tree node: own level if relaxed, else -1


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


def index_tree(gang: GangRequest, keys: tuple[str, ...]) -> TreeIndex:
    """Flatten ``gang.tree``; raises ValueError when tree tasks and requests disagree."""
    names = tuple(t.name for t in gang.tasks)
    pos = {name: i for i, name in enumerate(names)}
    if len(pos) != len(names):
        raise ValueError(f"group {gang.name!r}: duplicate task names")
    if set(gang.tree.all_tasks()) != set(names):
        raise ValueError(f"group {gang.name!r}: tree tasks and task requests differ")
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

    top = tuple(visit(child, -1) for child in gang.tree.children)
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
        root_tasks=tuple(pos[t] for t in gang.tree.tasks),
        task_names=names,
    )


def shapes_of(gang: GangRequest, machines: Collection[str]) -> tuple[list[Shape], list[int]]:
    """Distinct task shapes (in first-seen order of tasks sorted by name) and each task's shape index.
    A shape's excluded names are those of ``machines`` (the pool's) that some task excludes."""
    excluded_any = any(t.nodes_excluded for t in gang.tasks)
    names = {n for t in gang.tasks for n in t.nodes_excluded if n in machines} if excluded_any else set()
    shapes: list[Shape] = []
    index: dict[Shape, int] = {}
    task_shape = [0] * len(gang.tasks)
    for i in sorted(range(len(gang.tasks)), key=lambda i: gang.tasks[i].name):
        task = gang.tasks[i]
        shape = Shape(task.resources.as_tuple(), frozenset(task.nodes_excluded & names))
        s = index.get(shape)
        if s is None:
            s = index[shape] = len(shapes)
            shapes.append(shape)
        task_shape[i] = s
    return shapes, task_shape


def build_plan(
    ti: TreeIndex,
    eff: list[int],
    task_shape: list[int],
    shapes: list[Shape],
    target: list[int] | None = None,
) -> Plan:
    """Domain steps for effective levels ``eff`` (one per node, NO_LEVEL = no own constraint).

    ``target``: each node's own level; a preferred node whose effective level is coarser (relaxed)
    has its tasks packed into the fewest domains at its own level, then at each coarser one
    (:attr:`Plan.spread`)."""
    nshapes = len(shapes)
    sig_memo: dict[tuple[int, int], tuple[Any, ...]] = {}

    def sig(i: int, ctx_level: int) -> tuple[Any, ...]:
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
    home = [-1] * len(ti.nodes)  # per node: the step its own tasks are bound to (-1 = the pool)

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
        home[i] = my_ctx
        my_sink.extend(ti.direct[i])
        for c in order(ti.children[i], my_level):
            visit(c, my_ctx, my_level, my_sink)

    for c in order(ti.top, NO_LEVEL):
        visit(c, -1, NO_LEVEL, root_tasks)

    def counts(tasks: list[int]) -> tuple[Counts, Vec]:
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
    grouped: dict[int, dict[tuple[Any, ...], Block]] = {}
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
        by_need: dict[tuple[Any, ...], list[Block]] = {}
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
    spread = [NO_LEVEL] * len(ti.nodes)
    if target is not None:
        for i, node in enumerate(ti.nodes):
            if not node.required and target[i] > eff[i]:
                spread[i] = target[i]
        for step in steps:
            up = ti.parent[step.node]
            above: list[int] = []
            while up >= 0:
                if spread[up] != NO_LEVEL:
                    above.append(up)
                up = ti.parent[up]
            step.under = tuple(above)
            if above:
                per = [0] * nshapes
                for t in ti.subtree[above[0]]:
                    per[task_shape[t]] += 1
                step.pull = Pull(spread[above[0]], per)
        for i in range(len(ti.nodes)):
            k = home[i]
            if spread[i] != NO_LEVEL and k >= 0 and spread[i] > steps[k].level:
                # The relaxed node's whole subtree, its constrained descendants' tasks included.
                mine = list(ti.subtree[i])
                per = [0] * nshapes
                for t in mine:
                    per[task_shape[t]] += 1
                steps[k].spread.append(SpreadNeed(spread[i], per, counts(mine)[1]))
    return Plan(steps, root_tasks, root_direct, root_tot, root_blocks, owner, spread)
