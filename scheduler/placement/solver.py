"""Entry point :func:`solve`: required constraints hard, preferred ones met whenever possible.

Algorithm (docs/design.md §4, docs/design.md §5):
1. Index the tree (pre-order), map each node's key to its level in the snapshot's key order and each
   task to a *shape* (request + excluded machines present in the pool); aggregate the pool once
   (:class:`scheduler.placement.index.DomainIndex`).
2. Strict attempt: every node at its own level (preferred treated as required). Success means every
   constraint is met.
3. Otherwise the required-only problem decides the verdict: infeasible means "unschedulable" (with a
   structured reason from :mod:`scheduler.placement.explain`), an exhausted budget means "undecided".
4. Otherwise maximise the preferred objective (docs/design.md §5, :func:`_relax`), which never depends
   on names or on the order of the spec as long as no trial runs out of budget: per preferred node n,
   a(n) is the finest level <= its own at which all its tasks share one domain (-1 if none); compared
   lexicographically, (c_L, ..., c_0) with c_l = #{n : a(n) >= l} (finest level first), then the
   number of nodes met (a(n) = own level), then the tightest spread, then the packing rule. Levels are
   fixed from the finest down, each time the largest set of candidates that can be kept together; the
   last found placement is a witness that is always valid. Tasks of a relaxed node are packed into
   the fewest domains at its own level.
5. The whole solve shares one budget (``policy.max_steps``, the strict attempt at most a quarter of it
   when preferences exist, each relaxation trial at most a quarter of what is left when relaxing
   starts, or a twentieth of the whole if that is more) and the wall-clock ceiling ``policy.max_seconds``.

Invariants: the result meets every required constraint and never over-commits a machine; equal
inputs give equal outputs; "unschedulable" is returned only on a proof of infeasibility.
"""

from __future__ import annotations

import itertools
import time
from typing import Any

from scheduler.placement.budget import INFEASIBLE, UNDECIDED, Budget
from scheduler.placement.explain import explain
from scheduler.placement.index import DomainIndex
from scheduler.placement.plan import NO_LEVEL, build_plan, index_tree, shapes_of
from scheduler.placement.records import Seat
from scheduler.placement.search import GangSearch
from scheduler.placement.types import (
    ClusterSnapshot,
    ConstraintReport,
    GangRequest,
    Placement,
    Policy,
    ReasonCode,
    Unplaceable,
)


class _Context:
    """One solve call: the pool's index, the indexed tree and the search entry for a set of levels."""

    def __init__(self, cluster: ClusterSnapshot | DomainIndex, gang: GangRequest, policy: Policy) -> None:
        index = cluster if isinstance(cluster, DomainIndex) else DomainIndex(cluster)
        self.keys = index.keys
        self.gang = gang
        self.policy = policy
        self.ti = index_tree(gang, index.keys)
        excluding = any(task.nodes_excluded for task in gang.tasks)
        self.shapes, self.task_shape = shapes_of(gang, index.nodes if excluding else ())
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

    def run(self, eff: list[int], max_steps: int | None = None) -> list[Seat] | str:
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

    def shared_level(self, found: list[Seat], tasks: tuple[int, ...], upto: int) -> int:
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
    cluster: ClusterSnapshot | DomainIndex, gang: GangRequest, policy: Policy | None = None
) -> Placement | Unplaceable:
    """Place every task of ``gang`` at once on ``cluster`` (all or nothing): a snapshot, or the
    :class:`DomainIndex` a placement cycle builds once and keeps current with
    :meth:`DomainIndex.place` (the result does not depend on which).

    Returns a :class:`Placement` (task -> machine, plus one :class:`ConstraintReport` per tree node)
    or an :class:`Unplaceable`: "unschedulable" when no placement meets the required constraints
    (proven), "undecided" when ``policy.max_steps`` ran out first. Raises ValueError only for
    malformed input (tree tasks and requests disagree)."""
    policy = policy or Policy()
    ctx = _Context(cluster, gang, policy)
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


MAX_BRANCHES = 8  # extra final placements a solve may compare when count vectors tie at a level
EXACT_VECTORS = 64  # a level whose classes allow at most this many count vectors is searched exhaustively


def _relax(
    ctx: _Context, witness: list[Seat], own: list[int], required_only: list[int]
) -> list[Seat]:
    """Meet the preferred objective of docs/design.md §5, given a placement ``witness`` that meets the
    required constraints (and keeping one at every moment, so a budget running out leaves a valid,
    partly relaxed placement).

    Objective, compared lexicographically: (c_L, ..., c_0), where c_l counts the preferred nodes whose
    tasks share one domain at level l or finer (up to their own level: finer constraints carry more
    bandwidth), then the number of preferred nodes met; spread and packing as built break ties.

    Algorithm: levels from the finest down. At level l the candidates are the preferred nodes of own
    level >= l not yet kept at a finer level; the largest set of them that can be kept inside one
    domain of l together with every choice made so far is fixed at l (an effective level, so later
    searches keep it). Candidates split into *classes* of interchangeable nodes: siblings with equal
    structure (keys, requirements, requests and excluded machines of their subtree, never names) and
    equal levels fixed below them; by symmetry only how many of a class are kept matters, and feasible
    counts are closed downwards. The current witness gives a feasible count vector for free (levels it
    already meets need no search). When the classes allow at most :data:`EXACT_VECTORS` count vectors,
    each class is first bounded by one trial (one more member than the witness keeps, that class
    alone), then vectors are tried by decreasing total (then more nodes met at their own level),
    skipping vectors above one shown infeasible; several vectors of the same largest total are each
    followed to the end (at most :data:`MAX_BRANCHES` extra per solve) and the final placement with the
    best objective is kept, the first in class order on a tie. Otherwise each class in turn gets the
    largest count a binary search finds. The class order and the choice of members never depend on names or on the
    order of the spec (members of a class are symmetric: the witness's own first, then tree order).
    A search that runs out of its trial budget counts as infeasible; only then can names matter (the
    search's path, hence where a budget runs out, follows names among otherwise equal choices)."""
    ti = ctx.ti
    # A relaxation trial only decides how well a preference is met, so it gets a smaller budget: a quarter
    # of what is left when relaxing starts (at least a twentieth of the whole); running out just means
    # the preference is relaxed further (the witness stays valid).
    trial_steps = max(1_000, ctx.policy.max_steps // 20, ctx.steps_left // 4)
    prefs = [i for i, node in enumerate(ti.nodes) if not node.required and ti.level[i] is not None]
    if not prefs:
        return witness
    canon = _canonical_sigs(ctx)
    chain: list[tuple[Any, ...]] = []
    for i in range(len(ti.nodes)):
        up = ti.parent[i]
        chain.append((canon[i],) + (chain[up] if up >= 0 else ()))
    finest = max(own[i] for i in prefs)
    spare = [MAX_BRANCHES]

    def score(found: list[Seat]) -> tuple[int, ...]:
        got = [(own[i], ctx.shared_level(found, ti.subtree[i], own[i])) for i in prefs]
        counts = tuple(sum(1 for _o, a in got if a >= lvl) for lvl in range(finest, -1, -1))
        return counts + (sum(1 for o, a in got if a == o),)

    def fixed_subtree(eff: list[int], i: int) -> tuple[Any, ...]:
        return (canon[i], tuple(sorted((eff[c], fixed_subtree(eff, c)) for c in ti.children[i])))

    def trial(eff: list[int]) -> list[Seat] | None:
        found = ctx.run(eff, trial_steps)
        return found if isinstance(found, list) else None

    def level(
        lvl: int, eff: list[int], found: list[Seat]
    ) -> list[tuple[list[int], list[Seat]]]:
        """The best choices at ``lvl``: (effective levels, witness) per tied count vector, best first."""
        cands = [i for i in prefs if own[i] >= lvl and eff[i] < lvl]
        if not cands:
            return [(eff, found)]
        by_class: dict[tuple[Any, ...], list[int]] = {}
        for i in cands:
            by_class.setdefault((ti.parent[i], fixed_subtree(eff, i)), []).append(i)
        classes = sorted(
            by_class.values(),
            key=lambda ms: (0 if own[ms[0]] == lvl else 1, -own[ms[0]], len(ti.subtree[ms[0]]),
                            chain[ms[0]], fixed_subtree(eff, ms[0]), ms[0]),
        )

        def members(witness: list[Seat]) -> tuple[list[list[int]], list[int]]:
            """Per class: its members, the ones the witness keeps at ``lvl`` first; and their counts."""
            kept = {i for i in cands if ctx.shared_level(witness, ti.subtree[i], lvl) >= lvl}
            ordered = [sorted(ms, key=lambda i: (0 if i in kept else 1, i)) for ms in classes]
            return ordered, [sum(1 for i in ms if i in kept) for ms in ordered]

        def raised(ordered: list[list[int]], vec: tuple[int, ...] | list[int]) -> list[int]:
            out = list(eff)
            for ms, k in zip(ordered, vec, strict=True):
                for i in ms[:k]:
                    out[i] = lvl
            return out

        ordered, have = members(found)
        sizes = [len(ms) for ms in classes]
        total = 1
        for m in sizes:
            total *= m + 1
        if total <= EXACT_VECTORS and len(classes) > 1:
            met_class = [1 if own[ms[0]] == lvl else 0 for ms in classes]
            vectors = sorted(
                itertools.product(*(range(m + 1) for m in sizes)),
                key=lambda v: (-sum(v), -sum(k * c for k, c in zip(v, met_class, strict=True)), tuple(-k for k in v)),
            )
            bad: list[tuple[int, ...]] = []
            best: list[tuple[list[int], list[Seat]]] = []
            best_sum = -1
            base = tuple(have)
            # Upper bounds first: one more member of a class than the witness keeps, that class alone.
            # When it fails, no vector with that many of the class can hold: without this, a level
            # where nothing more fits would try every vector above the witness's, largest first.
            for j, m in enumerate(sizes):
                if have[j] < m:
                    alone = tuple(have[j] + 1 if k == j else 0 for k in range(len(sizes)))
                    if trial(raised(ordered, alone)) is None:
                        bad.append(alone)
            for v in vectors:
                if sum(v) < best_sum or len(best) > max(spare[0], 0):
                    break
                if v == base:
                    best.append((raised(ordered, v), found))
                    best_sum = sum(v)
                    continue
                if any(all(x >= y for x, y in zip(v, b, strict=True)) for b in bad):
                    continue
                if all(x <= y for x, y in zip(v, base, strict=True)):
                    continue  # below the witness's vector: a strictly smaller total
                eff_v = raised(ordered, v)
                got = trial(eff_v)
                if got is None:
                    bad.append(v)
                    continue
                best.append((eff_v, got))
                best_sum = sum(v)
            return best
        # One class at a time, in class order: the largest count a binary search finds (counts of a
        # class are closed downwards; the witness's count is feasible). Any members will do: symmetric.
        eff = list(eff)
        for j in range(len(classes)):
            ordered, have = members(found)
            chosen = ordered[j]
            lo, hi = have[j], sizes[j]
            while lo < hi:
                mid = (lo + hi + 1) // 2
                eff_v = list(eff)
                for i in chosen[:mid]:
                    eff_v[i] = lvl
                got = trial(eff_v)
                if got is None:
                    hi = mid - 1
                else:
                    found, lo = got, mid
            for i in chosen[:lo]:
                eff[i] = lvl
        return [(eff, found)]

    def descend(lvl: int, eff: list[int], found: list[Seat]) -> list[Seat]:
        while lvl >= 0:
            options = level(lvl, eff, found)
            if len(options) > 1:
                take = options[: 1 + max(0, spare[0])]
                spare[0] -= len(take) - 1
                results = [descend(lvl - 1, e, w) for e, w in take]
                return max(results, key=score)  # the first on a tie
            eff, found = options[0]
            lvl -= 1
        return found

    return descend(finest, list(required_only), witness)


def _canonical_sigs(ctx: _Context) -> list[tuple[Any, ...]]:
    """Per node: a value equal for nodes with isomorphic subtrees (keys, requirements, task requests and
    excluded machines), independent of group and task names."""
    ti = ctx.ti
    req = [(ctx.shapes[s].req, tuple(sorted(ctx.shapes[s].excluded))) for s in ctx.task_shape]
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


def _placed(ctx: _Context, found: list[Seat]) -> Placement:
    names = ctx.ti.task_names
    assignments = tuple(sorted((names[t], found[t][0]) for t in range(len(names))))
    return Placement(status="placed", assignments=assignments, report=_report(ctx, found))


def _report(ctx: _Context, found: list[Seat]) -> tuple[ConstraintReport, ...]:
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
