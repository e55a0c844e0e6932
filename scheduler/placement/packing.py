"""The packing phase of one gang's search: tasks onto machines once the domain phase bound every step
(:mod:`scheduler.placement.search`) to a domain (docs/design.md §5).

Tasks are put on machines finest bound domain first, one *component* (bound domains nested in one
another; components share no machine) at a time. With one shape a greedy best-fit descent cannot fail
(laminar Hall); otherwise a forward-checked depth-first search over machine classes, and CP-SAT
(:mod:`scheduler.placement.exact`) when that gives up. A component that cannot be packed names the
deepest step it involves (the *culprit*), so the domain phase can backjump to it. The machine state
and the best-fit order are :mod:`scheduler.placement.machines`.

Invariants: every place is undone before a packing returns; deterministic (every sort has a total
key); each machine class tried costs one budget step. Pure: stdlib only (CP-SAT through
:mod:`scheduler.placement.exact`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import NamedTuple

from scheduler.placement import exact
from scheduler.placement.budget import INFEASIBLE, PACK_DFS_STEPS, UNDECIDED, Budget, GiveUp, OutOfBudget
from scheduler.placement.machines import Machines, Spread, neg
from scheduler.placement.plan import Plan
from scheduler.placement.records import NO_SEAT, ClassKey, Component, Move, Seat, Slot, record


class Bound(NamedTuple):
    """Tasks bound to one domain by one step (``step`` = the number of steps for the root's tasks)."""

    domain: int
    step: int
    tasks: list[int]


class Packed(NamedTuple):
    """The packing of every bound task (``seats`` per task index), or None with the ``culprit``: the
    deepest step of a component that cannot be packed (changing any later step cannot help)."""

    seats: list[Seat] | None
    culprit: int


def pack(
    machines: Machines,
    plan: Plan,
    chosen: list[int],
    task_shape: Sequence[int],
    budget: Budget,
    packed: dict[tuple[tuple[int, int], ...], Component | None],
) -> Packed:
    """Put every task on a machine of its bound domain (``chosen[i]``: step ``i``'s domain).

    Bound domains split into components (domains nested in one another); components share no
    machine, so each is packed on its own, in the order of the deepest step it involves, and
    memoised in ``packed`` by its (domain, step) pairs."""
    bound: list[Bound] = []
    n = len(plan.steps)
    for i, step in enumerate(plan.steps):
        if step.tasks:
            bound.append(Bound(chosen[i], i, step.tasks))
    if plan.root_tasks:
        bound.append(Bound(0, n, plan.root_tasks))
    end = machines.index.end
    bound.sort(key=lambda b: (b.domain, b.step))
    components: list[list[Bound]] = []
    reach = -1
    for b in bound:
        if components and b.domain < reach:
            components[-1].append(b)
            reach = max(reach, end[b.domain])
        else:
            components.append([b])
            reach = end[b.domain]
    components.sort(key=lambda comp: max(b.step for b in comp))
    result: list[Seat] = [NO_SEAT] * len(task_shape)
    for comp in components:
        deepest = max(b.step for b in comp)
        key = tuple((b.domain, b.step) for b in comp)
        if key in packed:
            got = packed[key]
        else:
            got = packed[key] = _pack_component(machines, plan, comp, n, task_shape, budget)
        if got is None:
            return Packed(None, deepest if deepest < n else n - 1)
        for t, seat in zip(got.tasks, got.seats, strict=True):
            result[t] = seat
    return Packed(result, -1)


def _pack_component(
    machines: Machines, plan: Plan, comp: list[Bound], n: int, task_shape: Sequence[int], budget: Budget
) -> Component | None:
    # Finest bound domain first (the root's tasks last); a bundle is the tasks of one tree node in one
    # bound domain, so a relaxed node's tasks are packed into the fewest domains on their own.
    # A relaxed node's tasks come first in their bound domain and are spread over the fewest
    # domains at the node's own level (``spread``: bundle -> that level).
    level = machines.level
    ordered_bound = sorted(comp, key=lambda b: (1 if b.step == n else -level[b.domain], b.step))
    seq: list[Slot] = []
    owner = plan.owner
    relaxed = plan.spread
    spread: dict[int, int] = {}

    def own_spread(t: int) -> int:
        return relaxed[owner[t]] if relaxed and owner and owner[t] >= 0 else -1

    for g, (d, _i, tasks) in enumerate(ordered_bound):
        ordered = sorted(
            tasks,
            key=lambda t: (
                0 if own_spread(t) >= 0 else 1,
                owner[t] if owner else 0,
                neg(machines.shapes[task_shape[t]].req),
                task_shape[t],
                t,
            ),
        )
        for t in ordered:
            bundle = g * (len(owner) + 2) + (owner[t] + 1 if owner else 0)
            lvl = own_spread(t)
            if lvl > level[d]:
                spread[bundle] = lvl
            seq.append(record(Slot, (t, task_shape[t], d, bundle)))
    # The domains of a relaxed node's constrained descendants count as used by its spread.
    pre: dict[int, dict[int, int]] = {}
    if spread:
        below: dict[int, list[int]] = {}
        for dom, i, _tasks in comp:
            if i < n:
                for up in plan.steps[i].under:
                    below.setdefault(up, []).append(dom)
        if below:
            width = len(owner) + 2
            for bundle, lvl in spread.items():
                doms = below.get(bundle % width - 1)
                if doms:
                    marks = pre[bundle] = {}
                    for dom in doms:
                        for a in machines.anc[dom]:
                            if level[a] <= lvl:
                                marks[a] = marks.get(a, 0) + 1
    found: list[Seat] | None = None
    if machines.nshapes == 1:
        budget.spend(len(seq))
        found = pack_greedy(machines, seq, spread, pre)
    if found is None:
        try:
            found = pack_dfs(machines, seq, budget, PACK_DFS_STEPS if machines.nshapes > 1 else None, spread, pre)
        except GiveUp:
            decided = exact.decide(machines, seq, budget)
            if decided == UNDECIDED:
                raise OutOfBudget from None
            found = None if decided == INFEASIBLE else decided  # type: ignore[assignment]
    if found is None:
        return None
    if spread and machines.nshapes > 1 and len(spread) == 1 and not pre:
        found = exact.spread_tighten(machines, seq, found, spread, budget)
    return Component([slot.task for slot in seq], found)


def _spread_state(
    machines: Machines, seq: list[Slot], spread: dict[int, int] | None, pre: dict[int, dict[int, int]] | None = None
) -> list[Spread | None]:
    """Per position of ``seq``: the :class:`Spread` of its task's bundle (None when not relaxed),
    with the bundle's tasks left from that position on, per shape."""
    out: list[Spread | None] = [None] * len(seq)
    if not spread:
        return out
    acc: dict[int, list[int]] = {}
    used: dict[int, dict[int, int]] = {}
    for p in range(len(seq) - 1, -1, -1):
        _t, s, _d, g = seq[p]
        lvl = spread.get(g)
        if lvl is None:
            continue
        left = acc.setdefault(g, [0] * machines.nshapes)
        left[s] += 1
        got = used.get(g)
        if got is None:
            got = used[g] = dict(pre[g]) if pre and g in pre else {}
        out[p] = Spread(lvl, got, tuple(left))
    return out


def pack_greedy(
    machines: Machines,
    seq: list[Slot],
    spread: dict[int, int] | None = None,
    pre: dict[int, dict[int, int]] | None = None,
) -> list[Seat] | None:
    """Best-fit descent, no backtracking; the result is indexed by position in ``seq``."""
    done: list[Move] = []
    result: list[Seat] = [NO_SEAT] * len(seq)
    spreads = _spread_state(machines, seq, spread, pre)
    try:
        for p, (_t, s, d, _g) in enumerate(seq):
            sp = spreads[p]
            pick = machines.best(d, s, sp)
            if pick is None:
                return None
            dom, key = pick
            move = machines.place(dom, key, s)
            machines.mark(sp, dom, 1)
            done.append(move)
            result[p] = record(Seat, (move.machine, dom))
        return result
    finally:
        for move in reversed(done):
            machines.unplace(move)


def pack_dfs(
    machines: Machines,
    seq: list[Slot],
    budget: Budget,
    limit: int | None = None,
    spread: dict[int, int] | None = None,
    pre: dict[int, dict[int, int]] | None = None,
) -> list[Seat] | None:
    """Depth-first search over machine classes; the result is indexed by position in ``seq``.

    Forward check: before a task is placed, the tasks left in its run of equal bound domain must
    still fit that domain by counts. With ``limit``, raises :class:`GiveUp` after that many steps."""
    total = len(seq)
    # need_from[p]: (shape, count) of the tasks from p to the end of p's run of equal domain.
    need_from: list[list[tuple[int, int]]] = [[] for _ in range(total)]
    acc: dict[int, int] = {}
    for p in range(total - 1, -1, -1):
        if p + 1 < total and seq[p + 1].domain != seq[p].domain:
            acc = {}
        acc[seq[p].shape] = acc.get(seq[p].shape, 0) + 1
        need_from[p] = list(acc.items())
    gens: list[Iterator[tuple[int, ClassKey]] | None] = [None] * total
    placed: list[Move | None] = [None] * total
    first = [True] * total
    # Per position: the order key of the class taken, (domain, -free, special name).
    keys: list[tuple[int, tuple[int, ...], str] | None] = [None] * total
    result: list[Seat] = [NO_SEAT] * total
    spreads = _spread_state(machines, seq, spread, pre)
    spent = 0
    p = 0
    try:
        while p >= 0:
            if p == total:
                return list(result)
            _t, s, d, g = seq[p]
            move = placed[p]
            if move is not None:
                machines.unplace(move)
                machines.mark(spreads[p], move.domain, -1)
                placed[p] = None
            gen = gens[p]
            if gen is None:
                cap = machines.cap[d]
                if any(cap[s2] < k for s2, k in need_from[p]):
                    p -= 1
                    continue
                gen = gens[p] = machines.ordered(d, s, spreads[p])
                first[p] = True
            # Symmetry: an identical task right before this one fixes a lower bound on the class key.
            floor = keys[p - 1] if p > 0 and seq[p - 1].shape == s and seq[p - 1].bundle == g else None
            moved = False
            for dom, key in gen:
                budget.spend()
                spent += 1
                if limit is not None and spent > limit:
                    raise GiveUp
                ckey = (dom, tuple(-x for x in key[0]), key[1])
                if not first[p] and floor is not None and ckey < floor:
                    continue
                first[p] = False
                if key not in machines.classes[dom]:
                    continue  # emptied by an earlier placement on this path
                budget.spend(machines.nshapes)
                move = machines.place(dom, key, s)
                machines.mark(spreads[p], dom, 1)
                placed[p] = move
                keys[p] = ckey
                result[p] = record(Seat, (move.machine, dom))
                moved = True
                break
            if moved:
                p += 1
            else:
                gens[p] = None
                p -= 1
        return None
    finally:
        for q in range(total - 1, -1, -1):
            move = placed[q]
            if move is not None:
                machines.unplace(move)
                machines.mark(spreads[q], move.domain, -1)
