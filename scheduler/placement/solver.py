"""Entry point :func:`solve`: required constraints hard, preferred ones met whenever possible.

Algorithm (docs/design.md §4, docs/design.md §5):
1. Index the tree (pre-order), map each node's key to its level in the snapshot's key order and each
   task to a *shape* (request + excluded machines present in the pool); aggregate the pool once
   (:class:`scheduler.placement.index.DomainIndex`).
2. Strict attempt: every node at its own level (preferred treated as required). Success means every
   constraint is met.
3. Otherwise the required-only problem decides the verdict: infeasible means "unschedulable" (with a
   structured reason from :mod:`scheduler.placement.explain`), an exhausted budget means "undecided".
4. Otherwise fix preferred nodes one at a time in an order that never depends on names (finest own
   key first, see :func:`_relax`): each gets the finest level (own key, then the next coarser key, ...)
   at which a placement exists given the levels already fixed, later preferred nodes being free. The
   last found placement is a witness: levels it already meets need no search. Tasks of a relaxed node
   are packed into the fewest domains by the packing order (best fit; else largest domain first).
5. The whole solve shares one budget (``policy.max_steps``, the strict attempt at most a quarter of it
   when preferences exist, each relaxation trial at most a twentieth) and the wall-clock ceiling
   ``policy.max_seconds``.

Invariants: the result meets every required constraint and never over-commits a machine; equal
inputs give equal outputs; "unschedulable" is returned only on a proof of infeasibility.
"""

from __future__ import annotations

import time
from typing import Any

from scheduler.placement.explain import explain
from scheduler.placement.index import DomainIndex
from scheduler.placement.plan import NO_LEVEL, build_plan, index_tree, shapes_of
from scheduler.placement.search import INFEASIBLE, UNDECIDED, Budget, GangSearch
from scheduler.placement.types import (
    ClusterSnapshot,
    ConstraintReport,
    GroupRequest,
    Placement,
    Policy,
    ReasonCode,
    Unplaceable,
)


class _Context:
    """One solve call: the pool's index, the indexed tree and the search entry for a set of levels."""

    def __init__(self, cluster: ClusterSnapshot | DomainIndex, group: GroupRequest, policy: Policy) -> None:
        index = cluster if isinstance(cluster, DomainIndex) else DomainIndex(cluster)
        self.keys = index.keys
        self.group = group
        self.policy = policy
        self.ti = index_tree(group, index.keys)
        excluding = any(task.nodes_excluded for task in group.tasks)
        self.shapes, self.task_shape = shapes_of(group, index.nodes if excluding else ())
        special = frozenset().union(*(shape.excluded for shape in self.shapes))
        if not special <= index.special:
            # Excluded machines get classes of their own: a one-off index for this gang.
            index = DomainIndex(index.snapshot(), special | index.special)
        self.index = GangSearch(index, self.shapes)
        self.own = [lvl if lvl is not None else NO_LEVEL for lvl in self.ti.level]
        self.steps_used = 0
        self.timed_out = False
        self.deadline = None if policy.max_seconds is None else time.monotonic() + policy.max_seconds

    @property
    def steps_left(self) -> int:
        return self.policy.max_steps - self.steps_used

    def run(self, eff: list[int], max_steps: int | None = None) -> list[tuple[str, int]] | str:
        """One search with at most ``max_steps`` of what is left of the solve's budget."""
        steps = self.steps_left if max_steps is None else min(max_steps, self.steps_left)
        if steps <= 0 or self.timed_out:
            return UNDECIDED
        plan = build_plan(self.ti, eff, self.task_shape, self.shapes, self.own)
        budget = Budget(steps, self.deadline)
        try:
            return self.index.search(plan, self.task_shape, budget)
        finally:
            self.steps_used += budget.used
            self.timed_out = self.timed_out or budget.timed_out

    def shared_level(self, found: list[tuple[str, int]], tasks: tuple[int, ...], upto: int) -> int:
        """Finest level <= ``upto`` at which all ``tasks`` sit in one domain (NO_LEVEL if none)."""
        if not tasks:
            return upto
        paths = [self.index.path[found[t][1]] for t in tasks]
        best = NO_LEVEL
        for lvl in range(upto + 1):
            first = paths[0]
            if len(first) <= lvl or any(len(p) <= lvl or p[lvl] != first[lvl] for p in paths[1:]):
                break
            best = lvl
        return best


def solve(
    cluster: ClusterSnapshot | DomainIndex, group: GroupRequest, policy: Policy | None = None
) -> Placement | Unplaceable:
    """Place every task of ``group`` at once on ``cluster`` (all or nothing): a snapshot, or the
    :class:`DomainIndex` a placement cycle builds once and keeps current with
    :meth:`DomainIndex.place` (the result does not depend on which).

    Returns a :class:`Placement` (task -> machine, plus one :class:`ConstraintReport` per tree node)
    or an :class:`Unplaceable`: "unschedulable" when no placement meets the required constraints
    (proven), "undecided" when ``policy.max_steps`` ran out first. Raises ValueError only for
    malformed input (tree tasks and requests disagree)."""
    policy = policy or Policy()
    ctx = _Context(cluster, group, policy)
    ti = ctx.ti
    if not ti.task_names:
        return Placement(status="placed", assignments=(), report=_report(ctx, []))
    for i, node in enumerate(ti.nodes):
        if node.required and ti.level[i] is None:
            return explain(ctx.index, ti, ctx.task_shape, culprit_key=i)
    own = ctx.own
    required_only = [own[i] if node.required else NO_LEVEL for i, node in enumerate(ti.nodes)]
    # The strict attempt is only a shortcut when preferences exist: it gets a quarter of the budget.
    found = ctx.run(own, None if own == required_only else policy.max_steps // 4)
    if isinstance(found, list):
        return _placed(ctx, found)
    if own != required_only:
        found = ctx.run(required_only)
    if found == INFEASIBLE:
        return explain(ctx.index, ti, ctx.task_shape)
    if found == UNDECIDED:
        reason: dict[str, Any] = {"code": ReasonCode.UNDECIDED, "steps": ctx.steps_used, "max_steps": policy.max_steps}
        if ctx.timed_out:
            reason["max_seconds"] = policy.max_seconds
            message = (
                f"the wall-clock ceiling of {policy.max_seconds} s was reached"
                " before a placement was found or ruled out"
            )
        else:
            message = f"search budget of {policy.max_steps} steps ran out before a placement was found or ruled out"
        return Unplaceable(status="undecided", reason=reason, message=message)
    assert isinstance(found, list)
    return _placed(ctx, _relax(ctx, found, own, required_only))


def _relax(
    ctx: _Context, witness: list[tuple[str, int]], own: list[int], required_only: list[int]
) -> list[tuple[str, int]]:
    """Fix each preferred node at the finest level a placement still allows (docs/design.md §5).

    Order, never names: finest own level first (finer constraints carry more bandwidth), then fewer
    tasks, then the node's structure (keys, requirements, task shapes of its subtree and ancestors), so
    renaming groups or reordering the spec cannot change which levels are met; only nodes with equal
    structure, interchangeable by symmetry, fall back to tree order. Each node gets the finest level
    (own key, then the next coarser, ...) at which a placement exists given the levels already fixed,
    later nodes free. The last placement found is a witness: levels it already meets need no search."""
    ti = ctx.ti
    eff = list(required_only)
    # A relaxation trial only decides how well a preference is met, so it gets a smaller budget; running
    # out just means the preference is relaxed further (the witness stays valid).
    trial_steps = max(1_000, ctx.policy.max_steps // 20)
    canon = _canonical_sigs(ctx)
    chain: list[tuple[Any, ...]] = []
    for i in range(len(ti.nodes)):
        up = ti.parent[i]
        chain.append((canon[i],) + (chain[up] if up >= 0 else ()))
    order = sorted(
        (i for i, node in enumerate(ti.nodes) if not node.required and ti.level[i] is not None),
        key=lambda i: (-own[i], len(ti.subtree[i]), chain[i], i),
    )
    proven: set[tuple[Any, ...]] = set()  # (parent, fixed subtree, level) shown infeasible for an identical node

    def fixed_subtree(i: int) -> tuple[Any, ...]:
        kids = tuple(sorted((eff[c], fixed_subtree(c)) for c in ti.children[i]))
        return (canon[i], kids)

    for i in order:
        target = own[i]
        have = ctx.shared_level(witness, ti.subtree[i], target)
        fixed = have
        mine = fixed_subtree(i)
        for lvl in range(target, have, -1):
            if (ti.parent[i], mine, lvl) in proven:
                continue
            eff[i] = lvl
            trial = ctx.run(eff, trial_steps)
            if isinstance(trial, list):
                witness, fixed = trial, lvl
                break
            if trial == INFEASIBLE:
                # Mirror argument: a later sibling with an identical subtree, fixed identically (finer
                # nodes are fixed first and never change), faces this problem with the two swapped and
                # more nodes fixed, so it fails at this level too.
                proven.add((ti.parent[i], mine, lvl))
        eff[i] = fixed
    return witness


def _canonical_sigs(ctx: _Context) -> list[tuple[Any, ...]]:
    """Per node: a value equal for nodes with isomorphic subtrees (keys, requirements, task requests),
    independent of group and task names."""
    ti = ctx.ti
    req = [ctx.shapes[s].req for s in ctx.task_shape]
    sigs: list[tuple[Any, ...]] = [()] * len(ti.nodes)
    for i in range(len(ti.nodes) - 1, -1, -1):
        node = ti.nodes[i]
        sigs[i] = (
            node.key,
            node.requirement,
            tuple(sorted(req[t] for t in ti.direct[i])),
            tuple(sorted(sigs[c] for c in ti.children[i])),
        )
    return sigs


def _placed(ctx: _Context, found: list[tuple[str, int]]) -> Placement:
    names = ctx.ti.task_names
    assignments = tuple(sorted((names[t], found[t][0]) for t in range(len(names))))
    return Placement(status="placed", assignments=assignments, report=_report(ctx, found))


def _report(ctx: _Context, found: list[tuple[str, int]]) -> tuple[ConstraintReport, ...]:
    ti, index = ctx.ti, ctx.index
    nkeys = len(ctx.keys)
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
                    p = index.path[found[t][1]]
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
                met_key=ctx.keys[shared] if shared >= 0 else None,
                domains=tuple(sorted(domains, key=lambda p: tuple(x or "" for x in p))),
            )
        )
    return tuple(out)
