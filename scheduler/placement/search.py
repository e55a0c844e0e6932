"""The complete two-phase search of one gang over a :class:`~scheduler.placement.index.DomainIndex`.

1. *Domain phase*: every constraint node with an effective level finer than its context's gets a
   domain step, in depth-first order (children before a node's own tasks, larger subtrees first).
   A step picks a domain at its level inside its context's domain and *reserves* the counts of the
   tasks bound to it on that domain and its ancestors. Candidates are pruned by (a) the whole
   subtree's per-shape counts and resource totals against ``cap - reserved`` and (b) for each group of
   identical child steps, the number of copies the candidate's sub-domains can host; every ancestor
   must stay within capacity after a reservation (Hall's condition on the laminar family of
   domains, exact for a single shape). Candidates are tried tightest first (best fit); identical
   sibling steps ("twins") reuse the first twin's order and never go back in it (symmetry breaking).
   With several shapes the counts are only an upper bound, so a candidate must also pass two
   packing checks: the step's whole subtree fits the domain's machines alone (memoised per solve: a
   domain shown unable to host a subtree is never tried again for an identical one, a *nogood*), and
   the tasks bound so far in domains nested with it still fit together.
2. *Packing phase*: once every step has a domain, tasks are put on machines, finest bound domain
   first, one *component* (bound domains nested in one another; components share no machine) at a
   time. With one shape a greedy best-fit descent cannot fail (laminar Hall); otherwise a
   forward-checked depth-first search over machine classes, and CP-SAT (:mod:`scheduler.placement.exact`)
   when that gives up. A component that cannot be packed sends phase 1 back to the deepest step it
   involves (conflict-directed backjumping), skipping every later step's alternatives.

Invariants: the search restores all mutable state before returning (it borrows the index's arrays);
it is deterministic (domain ids follow label-path order, every sort has a total key); every
candidate tried costs one budget step, and an exhausted budget yields ``UNDECIDED``, never
``INFEASIBLE``.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from scheduler.placement.exact import FEASIBLE as EXACT_FEASIBLE
from scheduler.placement.exact import INFEASIBLE as EXACT_INFEASIBLE
from scheduler.placement.exact import Machine, pack_exact
from scheduler.placement.index import UNBOUNDED_FIT, DomainIndex, Shape, Vec, fit_count

INFEASIBLE = "infeasible"
UNDECIDED = "undecided"


@dataclass(slots=True)
class Block:
    """Identical child steps of one step: ``count`` copies of (level, need, need_tot)."""

    level: int
    need: list[tuple[int, int]]  # (shape, count) with count > 0
    need_tot: list[tuple[int, int]]  # (resource, amount) with amount > 0
    count: int


@dataclass(slots=True)
class Step:
    """One domain choice of phase 1."""

    node: int  # index into the tree index's nodes
    level: int
    ctx: int  # index of the context step, -1 for the pool
    tasks: list[int] = field(default_factory=list)  # task indices bound to this step's domain
    direct: list[tuple[int, int]] = field(default_factory=list)  # reserved counts (shape, n)
    direct_tot: Vec = (0, 0, 0, 0)
    need: list[tuple[int, int]] = field(default_factory=list)  # whole subtree, per shape
    need_tot: list[tuple[int, int]] = field(default_factory=list)
    twin: int = -1
    blocks: list[Block] = field(default_factory=list)
    sig: tuple[Any, ...] = ()
    # Relaxed preferred nodes whose tasks are bound here: (own level, tasks per shape, resource totals).
    spread: list[tuple[int, list[int], Vec]] = field(default_factory=list)
    under: tuple[int, ...] = ()  # relaxed preferred tree nodes strictly above this step's node
    # The nearest of them: (its own level, its whole subtree's tasks per shape), or None.
    pull: tuple[int, list[int]] | None = None


@dataclass(slots=True)
class Plan:
    steps: list[Step]
    root_tasks: list[int]
    root_direct: list[tuple[int, int]]
    root_direct_tot: Vec
    root_blocks: list[Block]
    owner: list[int] = field(default_factory=list)  # per task index: its tree node (-1 = root)
    spread: list[int] = field(default_factory=list)  # per tree node: own level if relaxed, else -1


@dataclass(slots=True)
class Spread:
    """The tasks of a relaxed node in one bound domain: spread over the fewest domains of ``level``.
    ``used`` counts the group's placed tasks per domain at that level or coarser (shared by the group's
    positions); ``left`` is, per shape, the group's tasks from this position on."""

    level: int
    used: dict[int, int]
    left: tuple[int, ...]


class OutOfBudget(Exception):
    """Raised inside the search when the step budget (or the wall-clock ceiling) is exhausted."""


class Budget:
    """A work counter shared by the searches of one solve.

    Work is counted evenly: a candidate domain tried, a domain scanned for candidates or for room, a
    machine class tried and, per machine placement, one step per task shape (the counts it updates),
    so a step costs about the same time whatever the gang's size or number of shapes. ``deadline``
    (``time.monotonic()`` value) is a wall-clock ceiling checked every :data:`CLOCK_EVERY` steps; it only
    ever turns a result into "undecided", never into "unschedulable"."""

    __slots__ = ("deadline", "left", "timed_out", "used", "_tick")

    def __init__(self, steps: int, deadline: float | None = None) -> None:
        self.left = steps
        self.used = 0
        self.deadline = deadline
        self.timed_out = False
        self._tick = 0

    def spend(self, n: int = 1) -> None:
        self.left -= n
        self.used += n
        if self.left < 0:
            raise OutOfBudget
        if self.deadline is not None:
            self._tick += n
            if self._tick >= CLOCK_EVERY:
                self._tick = 0
                if time.monotonic() > self.deadline:
                    self.timed_out = True
                    raise OutOfBudget


CLOCK_EVERY = 512  # steps between two reads of the clock


class _GiveUp(Exception):
    """Raised by a bounded packing check that ran past its own step limit (no verdict)."""


HOST_CHECK_STEPS = 2_000  # depth-first steps of one nogood check (:meth:`GangSearch.can_host`)
PACK_DFS_STEPS = 5_000  # depth-first steps on one component before the exact packer decides it
EXACT_WORK = 2.0  # CP-SAT deterministic time limit of one exact packing (work units, not seconds)
EXACT_MAX_VARS = 200_000  # larger components are left to the depth-first search


class GangSearch:
    """The search state of one gang over a :class:`DomainIndex` (see the module docstring): its
    shapes' counts, the reservations of the domain phase and the machine classes. All three are the
    index's own arrays, not copies: every search changes them only through paired place/unplace and
    reserve/release steps and restores them before it returns (also when its budget runs out), so a
    gang costs no allocation proportional to the pool."""

    def __init__(self, index: DomainIndex, shapes: Sequence[Shape]) -> None:
        table = index.table(shapes)
        self.index = index
        self.keys = index.keys
        self.shapes = list(shapes)
        self.nshapes = len(shapes)
        self._fit_cache = table.fit_cache
        self.dom_id = index.dom_id
        self.path = index.path
        self.level = index.level
        self.parent = index.parent
        self.children = index.children
        self.anc = index.anc
        self.classes = index.classes
        self.cap: list[list[int]] = table.cap
        self.tot: list[list[int]] = table.tot
        self.stats = table.stats
        self.res, self.res_tot = index.reservations(self.nshapes)
        self._hosts: dict[tuple[int, tuple[tuple[int, int], ...]], bool] = {}
        self._components: dict[tuple[tuple[int, tuple[tuple[int, int], ...]], ...], bool] = {}

    # -- helpers ---------------------------------------------------------------------------------

    def fit(self, free: Vec, sp: str, s: int) -> int:
        """How many tasks of shape ``s`` fit on one machine with ``free`` capacity."""
        if sp and sp in self.shapes[s].excluded:
            return 0
        cache = self._fit_cache[s]
        n = cache.get(free)
        if n is None:
            n = cache[free] = fit_count(free, self.shapes[s].req)
        return n

    def descendants(self, d: int, level: int) -> list[int]:
        return self.index.descendants(d, level)

    def at_level(self, level: int) -> list[int]:
        return self.descendants(0, level)

    def copies(self, d: int, need: list[tuple[int, int]], need_tot: list[tuple[int, int]]) -> int:
        """Upper bound on how many copies of a subtree with these needs fit in domain ``d``."""
        cap, res = self.cap[d], self.res[d]
        best = UNBOUNDED_FIT
        for s, k in need:
            n = (cap[s] - res[s]) // k
            if n < best:
                best = n
        tot, rt = self.tot[d], self.res_tot[d]
        for r, v in need_tot:
            n = (tot[r] - rt[r]) // v
            if n < best:
                best = n
        return max(best, 0)

    def block_room(self, d: int, block: Block, budget: Budget | None = None) -> int:
        """Copies of ``block`` that the sub-domains of ``d`` at the block's level can host (capped).
        With a ``budget``, a sub-domain known (or shown, :meth:`can_host`) unable to host one copy counts 0."""
        total = 0
        for sub in self.descendants(d, block.level):
            if budget is not None:
                budget.spend()
            n = self.copies(sub, block.need, block.need_tot)
            if n and budget is not None and not self.can_host(sub, block.need, budget):
                n = 0
            total += n
            if total >= block.count:
                return total
        return total

    def fits(
        self,
        d: int,
        need: list[tuple[int, int]],
        need_tot: list[tuple[int, int]],
        blocks: list[Block],
        budget: Budget | None = None,
    ) -> bool:
        cap, res = self.cap[d], self.res[d]
        for s, k in need:
            if cap[s] - res[s] < k:
                return False
        tot, rt = self.tot[d], self.res_tot[d]
        for r, v in need_tot:
            if tot[r] - rt[r] < v:
                return False
        for block in blocks:
            if self.block_room(d, block, budget) < block.count:
                return False
        return True

    def reserve(self, d: int, direct: list[tuple[int, int]], direct_tot: Vec, sign: int) -> bool:
        """Add (sign=1) or remove (sign=-1) a reservation on ``d`` and its ancestors; True if within capacity."""
        ok = True
        for a in self.anc[d]:
            res, cap = self.res[a], self.cap[a]
            for s, k in direct:
                res[s] += sign * k
                if res[s] > cap[s]:
                    ok = False
            rt, tot = self.res_tot[a], self.tot[a]
            for r in range(4):
                v = direct_tot[r]
                if v:
                    rt[r] += sign * v
                    if rt[r] > tot[r]:
                        ok = False
        return ok

    # -- phase 1: domains --------------------------------------------------------------------------

    def search(self, plan: Plan, task_shape: Sequence[int], budget: Budget) -> list[tuple[str, int]] | str:
        """Find (machine name, domain) per task index, or INFEASIBLE / UNDECIDED. Restores all state."""
        steps = plan.steps
        n = len(steps)
        chosen = [-1] * n
        orders: list[list[int] | None] = [None] * n
        nxt = [0] * n
        packed: dict[tuple[tuple[int, int], ...], list[tuple[int, str, int]] | None] = {}
        root_ok = self.reserve(0, plan.root_direct, plan.root_direct_tot, 1)
        try:
            if not root_ok or not self.fits(0, [], [], plan.root_blocks, budget):
                return INFEASIBLE
            i = 0
            while i >= 0:
                if i == n:
                    found, culprit = self._pack(plan, chosen, task_shape, budget, packed)
                    if found is not None:
                        return found
                    # Conflict-directed backjump: the unpackable component depends only on the choices
                    # of its own steps, so every step after the deepest of them is undone untried.
                    for k in range(n - 1, culprit, -1):
                        if chosen[k] >= 0:
                            self.reserve(chosen[k], steps[k].direct, steps[k].direct_tot, -1)
                            chosen[k] = -1
                        orders[k] = None
                    i = culprit
                    if i < 0:
                        break
                if self._advance(i, steps, chosen, orders, nxt, budget):
                    i += 1
                else:
                    i -= 1
            return INFEASIBLE
        except OutOfBudget:
            return UNDECIDED
        finally:
            for i in range(n):
                if chosen[i] >= 0:
                    self.reserve(chosen[i], steps[i].direct, steps[i].direct_tot, -1)
            self.reserve(0, plan.root_direct, plan.root_direct_tot, -1)

    def _advance(
        self,
        i: int,
        steps: list[Step],
        chosen: list[int],
        orders: list[list[int] | None],
        nxt: list[int],
        budget: Budget,
    ) -> bool:
        step = steps[i]
        if chosen[i] >= 0:
            self.reserve(chosen[i], step.direct, step.direct_tot, -1)
            chosen[i] = -1
        order = orders[i]
        recheck = step.twin >= 0
        if order is None:
            if recheck:
                order = orders[step.twin]
                nxt[i] = nxt[step.twin] - 1
            else:
                ctx = 0 if step.ctx < 0 else chosen[step.ctx]
                order = self._candidates(ctx, step, budget, steps, chosen)
                nxt[i] = 0
            orders[i] = order
        assert order is not None
        while nxt[i] < len(order):
            d = order[nxt[i]]
            nxt[i] += 1
            budget.spend()
            if recheck and not self.fits(d, step.need, step.need_tot, step.blocks, budget):
                continue
            if not self.can_host(d, step.need, budget):
                continue
            if self.nshapes > 1 and step.tasks and not self._packs_with(d, i, steps, chosen, budget):
                continue
            if self.reserve(d, step.direct, step.direct_tot, 1):
                chosen[i] = d
                return True
            self.reserve(d, step.direct, step.direct_tot, -1)
        orders[i] = None
        return False

    def can_host(self, d: int, need: list[tuple[int, int]], budget: Budget) -> bool:
        """Nogood memo: False when ``need`` (shape, count) provably cannot be packed on the machines of
        ``d`` even with nothing else placed there. Machine state is constant while a gang is solved, so a
        domain shown unable to host a subtree's tasks is never tried again for an identical subtree, in
        this search or a later one of the same solve. With one shape the counts are exact: no check."""
        if self.nshapes == 1 or not need:
            return True
        key = (d, tuple(need))
        got = self._hosts.get(key)
        if got is None:
            seq: list[tuple[int, int, int, int]] = []
            for s, k in sorted(need, key=lambda sk: (_neg(self.shapes[sk[0]].req), sk[0])):
                seq.extend((len(seq) + j, s, d, 0) for j in range(k))
            try:
                got = self._pack_dfs(seq, budget, HOST_CHECK_STEPS) is not None
            except _GiveUp:
                exact = self._pack_exact(seq, budget)
                got = exact != INFEASIBLE  # undecided: the full search decides
            self._hosts[key] = got
        return got

    def _packs_with(self, d: int, i: int, steps: list[Step], chosen: list[int], budget: Budget) -> bool:
        """Eager packing check (several shapes): the tasks bound so far in domains nested with ``d``,
        step ``i``'s own included, still fit their machines. A failure is step ``i``'s conflict (it is
        the deepest step of that component), so its next candidate is tried at once. Memoised by
        content: (domain, counts) per bound step."""
        end = self.index.end
        top = d
        for j in range(i):
            e = chosen[j]
            if e >= 0 and steps[j].tasks and e < top and end[e] >= end[top]:
                top = e
        members = [(d, steps[i])]
        for j in range(i):
            e = chosen[j]
            if e >= 0 and steps[j].tasks and top <= e < end[top]:
                members.append((e, steps[j]))
        key = tuple(sorted((e, tuple(step.direct)) for e, step in members))
        got = self._components.get(key)
        if got is None:
            seq: list[tuple[int, int, int, int]] = []
            level = self.level
            for g, (e, step) in enumerate(sorted(members, key=lambda m: (-level[m[0]], m[0]))):
                for s, k in sorted(step.direct, key=lambda sk: (_neg(self.shapes[sk[0]].req), sk[0])):
                    seq.extend((len(seq) + j, s, e, g) for j in range(k))
            try:
                got = self._pack_dfs(seq, budget, HOST_CHECK_STEPS) is not None
            except _GiveUp:
                got = self._pack_exact(seq, budget) != INFEASIBLE
            self._components[key] = got
        return got

    def _candidates(
        self, ctx: int, step: Step, budget: Budget, steps: list[Step] | None = None, chosen: list[int] | None = None
    ) -> list[int]:
        """Domains at the step's level inside ``ctx`` that pass the count bounds, tightest first.

        Relaxed spread (docs/design.md §5): a step binding a relaxed node's tasks ranks first by how many
        domains at that node's level they need; a step under a relaxed node first by its domain's
        ancestor at that node's level: one its earlier constrained descendants use, then one holding
        all of the node's tasks, else the one holding most."""
        scored: list[tuple[int, int, int, int, int]] = []
        domains = self.descendants(ctx, step.level)
        budget.spend(len(domains))
        pull = step.pull
        near: set[int] = set()
        if pull is not None and steps is not None and chosen is not None:
            top = step.under[0]
            for j, other in enumerate(steps):
                e = chosen[j]
                if e >= 0 and other.under and other.under[0] == top:
                    for a in self.anc[e]:
                        if self.level[a] == pull[0]:
                            near.add(a)
        for d in domains:
            if self.fits(d, step.need, step.need_tot, step.blocks, budget):
                cap, res = self.cap[d], self.res[d]
                slack = sum(cap[s] - res[s] - k for s, k in step.need)
                spread = self._spread_count(d, step.spread, budget) if step.spread else 0
                first = 0
                if pull is not None and self.level[d] > pull[0]:
                    a = next(a for a in self.anc[d] if self.level[a] == pull[0])
                    if a in near:
                        first = -(1 << 30)
                    else:
                        ca, ra = self.cap[a], self.res[a]
                        first = -sum(min(max(ca[s] - ra[s], 0), k) for s, k in enumerate(pull[1]) if k)
                scored.append((first, spread, slack, self.tot[d][0] - self.res_tot[d][0], d))
        scored.sort()
        return [item[-1] for item in scored]

    def _spread_count(self, d: int, groups: list[tuple[int, list[int], Vec]], budget: Budget) -> int:
        """Estimated number of domains at their own levels that the relaxed nodes' tasks bound to a step
        need inside candidate ``d``, following the packing's spread order (one domain holding all the
        remaining tasks, else the one holding most of them); capacity reserved by other steps is left out."""
        total = 0
        cap, res, tot, rt = self.cap, self.res, self.tot, self.res_tot
        for lvl, counts, need_tot in groups:
            subs = self.descendants(d, lvl)
            budget.spend(len(subs))
            left = list(counts)
            want = sum(left)
            rest = list(need_tot)
            used: set[int] = set()
            while want > 0:
                best, best_cov, done = -1, 0, False
                for c in subs:
                    if c in used:
                        continue
                    cc, rc = cap[c], res[c]
                    cov = 0
                    for s, k in enumerate(left):
                        if k:
                            cov += min(max(cc[s] - rc[s], 0), k)
                    if cov >= want and all(tot[c][r] - rt[c][r] >= rest[r] for r in range(4)):
                        done = True
                        break
                    if cov > best_cov:
                        best, best_cov = c, cov
                total += 1
                if done:
                    break
                if best < 0:
                    total += len(subs) + want  # cannot hold them all: rank last
                    break
                used.add(best)
                cc, rc = cap[best], res[best]
                for s, k in enumerate(left):
                    if k:
                        take = min(max(cc[s] - rc[s], 0), k)
                        left[s] -= take
                        want -= take
                        req = self.shapes[s].req
                        for r in range(4):
                            rest[r] -= take * req[r]
        return total

    # -- phase 2: machines -------------------------------------------------------------------------

    def _pack(
        self,
        plan: Plan,
        chosen: list[int],
        task_shape: Sequence[int],
        budget: Budget,
        packed: dict[tuple[tuple[int, int], ...], list[tuple[int, str, int]] | None],
    ) -> tuple[list[tuple[str, int]] | None, int]:
        """Put every task on a machine of its bound domain. Returns (result, -1) or (None, culprit).

        Bound domains split into *components* (domains nested in one another); components share no
        machine, so each is packed on its own, in the order of the deepest step it involves. When one
        cannot be packed, ``culprit`` is that deepest step: changing any later step cannot help."""
        bound: list[tuple[int, int, list[int]]] = []  # (domain, step, tasks); step n = the root
        n = len(plan.steps)
        for i, step in enumerate(plan.steps):
            if step.tasks:
                bound.append((chosen[i], i, step.tasks))
        if plan.root_tasks:
            bound.append((0, n, plan.root_tasks))
        end = self.index.end
        bound.sort(key=lambda b: (b[0], b[1]))
        components: list[list[tuple[int, int, list[int]]]] = []
        reach = -1
        for b in bound:
            if components and b[0] < reach:
                components[-1].append(b)
                reach = max(reach, end[b[0]])
            else:
                components.append([b])
                reach = end[b[0]]
        components.sort(key=lambda comp: max(b[1] for b in comp))
        result: list[tuple[str, int]] = [("", -1)] * len(task_shape)
        for comp in components:
            deepest = max(b[1] for b in comp)
            key = tuple((b[0], b[1]) for b in comp)
            if key in packed:
                got = packed[key]
            else:
                got = packed[key] = self._pack_component(plan, comp, n, task_shape, budget)
            if got is None:
                return None, (deepest if deepest < n else n - 1)
            for t, name, dom in got:
                result[t] = (name, dom)
        return result, -1

    def _pack_component(
        self,
        plan: Plan,
        comp: list[tuple[int, int, list[int]]],
        n: int,
        task_shape: Sequence[int],
        budget: Budget,
    ) -> list[tuple[int, str, int]] | None:
        # Finest bound domain first (the root's tasks last); (task, shape, domain, group): a group is
        # the tasks of one tree node in one bound domain, so a relaxed node's tasks are packed into the
        # fewest domains on their own.
        # A relaxed node's tasks come first in their bound domain and are spread over the fewest
        # domains at the node's own level (``spread``: group -> that level).
        level = self.level
        ordered_bound = sorted(comp, key=lambda b: (1 if b[1] == n else -level[b[0]], b[1]))
        seq: list[tuple[int, int, int, int]] = []
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
                    _neg(self.shapes[task_shape[t]].req),
                    task_shape[t],
                    t,
                ),
            )
            for t in ordered:
                gid = g * (len(owner) + 2) + (owner[t] + 1 if owner else 0)
                lvl = own_spread(t)
                if lvl > level[d]:
                    spread[gid] = lvl
                seq.append((t, task_shape[t], d, gid))
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
                for gid, lvl in spread.items():
                    doms = below.get(gid % width - 1)
                    if doms:
                        marks = pre[gid] = {}
                        for dom in doms:
                            for a in self.anc[dom]:
                                if level[a] <= lvl:
                                    marks[a] = marks.get(a, 0) + 1
        found: list[tuple[str, int]] | None = None
        if self.nshapes == 1:
            budget.spend(len(seq))
            found = self._pack_greedy(seq, spread, pre)
        if found is None:
            try:
                found = self._pack_dfs(seq, budget, PACK_DFS_STEPS if self.nshapes > 1 else None, spread, pre)
            except _GiveUp:
                exact = self._pack_exact(seq, budget)
                if exact == UNDECIDED:
                    raise OutOfBudget from None
                found = None if exact == INFEASIBLE else exact  # type: ignore[assignment]
        if found is None:
            return None
        if spread and self.nshapes > 1 and len(spread) == 1 and not pre:
            found = self._spread_tighten(seq, found, spread, budget)
        return [(seq[p][0], found[p][0], found[p][1]) for p in range(len(seq))]

    def _spread_used(self, seq: list[tuple[int, int, int, int]], found: list[tuple[str, int]], gid: int,
                     lvl: int) -> tuple[int, int]:
        """(domains of level ``lvl``, coarser domains under the bound one) that group ``gid`` uses."""
        level, anc = self.level, self.anc
        mine: set[object] = set()
        above: set[int] = set()
        for p, (_t, _s, d, g) in enumerate(seq):
            if g != gid:
                continue
            name, dom = found[p]
            at = [a for a in anc[dom] if level[a] == lvl]
            mine.add(at[0] if at else name)
            above.update(a for a in anc[dom] if level[d] < level[a] < lvl)
        return len(mine), len(above)

    def _spread_tighten(self, seq: list[tuple[int, int, int, int]], found: list[tuple[str, int]],
                        spread: dict[int, int], budget: Budget) -> list[tuple[str, int]]:
        """Several shapes: the best-fit packing may spread a relaxed node over one domain too many (a
        larger task took the machine two smaller ones needed). CP-SAT minimises the domains it uses
        (:func:`scheduler.placement.exact.pack_exact` with ``spread``); its packing replaces
        ``found`` only when it uses fewer (domains at the node's level, then coarser)."""
        ((gid, lvl),) = spread.items()
        have = self._spread_used(seq, found, gid, lvl)
        if have[0] <= 1:
            return found
        model = _ExactModel(self, seq, gid)
        level, anc = self.level, self.anc
        bound = min(d for _s, d, mine in model.order if mine)
        domains: list[tuple[object, ...]] = []
        for machine, dom in zip(model.machines, model.doms, strict=True):
            at = [a for a in anc[dom] if level[a] == lvl]
            coarser = tuple(a for a in sorted(anc[dom], key=lambda a: -level[a]) if level[bound] < level[a] < lvl)
            domains.append(((at[0] if at else ("machine", machine.name)), *coarser))
        nvars = 2 * model.nvars  # a domain flag per relaxed count as well
        if nvars > EXACT_MAX_VARS or nvars > budget.left:
            return found
        budget.spend(nvars)
        verdict, taken = pack_exact(model.types(), model.machines, EXACT_WORK,
                                    spread=([key[2] for key in model.order], domains))
        if verdict != EXACT_FEASIBLE:
            return found
        result = model.result(taken)
        return result if self._spread_used(seq, result, gid, lvl) < have else found

    def _pack_exact(self, seq: list[tuple[int, int, int, int]], budget: Budget) -> list[tuple[str, int]] | str:
        """Decide a component with CP-SAT (:mod:`scheduler.placement.exact`): the result indexed by
        position in ``seq``, INFEASIBLE (proven) or UNDECIDED. Costs one budget step per variable."""
        model = _ExactModel(self, seq)
        if model.nvars > EXACT_MAX_VARS:
            return UNDECIDED
        budget.spend(model.nvars)
        verdict, taken = pack_exact(model.types(), model.machines, EXACT_WORK)
        if verdict == EXACT_INFEASIBLE:
            return INFEASIBLE
        if verdict != EXACT_FEASIBLE:
            return UNDECIDED
        return model.result(taken)

    def _spread_state(
        self,
        seq: list[tuple[int, int, int, int]],
        spread: dict[int, int] | None,
        pre: dict[int, dict[int, int]] | None = None,
    ) -> list[Spread | None]:
        """Per position of ``seq``: the :class:`Spread` of its task's group (None when not relaxed),
        with the group's tasks left from that position on, per shape."""
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
            left = acc.setdefault(g, [0] * self.nshapes)
            left[s] += 1
            got = used.get(g)
            if got is None:
                got = used[g] = dict(pre[g]) if pre and g in pre else {}
            out[p] = Spread(lvl, got, tuple(left))
        return out

    def _mark(self, sp: Spread | None, dom: int, sign: int) -> None:
        if sp is None:
            return
        level, used = self.level, sp.used
        for a in self.anc[dom]:
            if level[a] <= sp.level:
                used[a] = used.get(a, 0) + sign

    def _pack_greedy(
        self,
        seq: list[tuple[int, int, int, int]],
        spread: dict[int, int] | None = None,
        pre: dict[int, dict[int, int]] | None = None,
    ) -> list[tuple[str, int]] | None:
        """Best-fit descent, no backtracking; the result is indexed by position in ``seq``."""
        done: list[tuple[int, tuple[Vec, str], tuple[Vec, str] | None, str, int]] = []
        result: list[tuple[str, int]] = [("", -1)] * len(seq)
        spreads = self._spread_state(seq, spread, pre)
        try:
            for p, (_t, s, d, _g) in enumerate(seq):
                sp = spreads[p]
                pick = self._best(d, s, sp)
                if pick is None:
                    return None
                dom, key = pick
                name, nkey = self._place(dom, key, s)
                self._mark(sp, dom, 1)
                done.append((dom, key, nkey, name, s))
                result[p] = (name, dom)
            return result
        finally:
            for dom, key, nkey, name, s in reversed(done):
                self._unplace(dom, key, nkey, name, s)

    def _pack_dfs(
        self,
        seq: list[tuple[int, int, int, int]],
        budget: Budget,
        limit: int | None = None,
        spread: dict[int, int] | None = None,
        pre: dict[int, dict[int, int]] | None = None,
    ) -> list[tuple[str, int]] | None:
        """Depth-first search over machine classes; the result is indexed by position in ``seq``.

        Forward check: before a task is placed, the tasks left in its run of equal bound domain must
        still fit that domain by counts. With ``limit``, raises :class:`_GiveUp` after that many steps."""
        total = len(seq)
        # need_from[p]: (shape, count) of the tasks from p to the end of p's run of equal domain.
        need_from: list[list[tuple[int, int]]] = [[] for _ in range(total)]
        acc: dict[int, int] = {}
        for p in range(total - 1, -1, -1):
            if p + 1 < total and seq[p + 1][2] != seq[p][2]:
                acc = {}
            acc[seq[p][1]] = acc.get(seq[p][1], 0) + 1
            need_from[p] = list(acc.items())
        gens: list[Iterator[tuple[int, tuple[Vec, str]]] | None] = [None] * total
        placed: list[tuple[int, tuple[Vec, str], tuple[Vec, str] | None, str] | None] = [None] * total
        first = [True] * total
        keys: list[tuple[int, tuple[int, ...], str] | None] = [None] * total
        result: list[tuple[str, int]] = [("", -1)] * total
        spreads = self._spread_state(seq, spread, pre)
        spent = 0
        p = 0
        try:
            while p >= 0:
                if p == total:
                    return list(result)
                _t, s, d, g = seq[p]
                if placed[p] is not None:
                    dom, key, nkey, name = placed[p]  # type: ignore[misc]
                    self._unplace(dom, key, nkey, name, s)
                    self._mark(spreads[p], dom, -1)
                    placed[p] = None
                gen = gens[p]
                if gen is None:
                    cap = self.cap[d]
                    if any(cap[s2] < k for s2, k in need_from[p]):
                        p -= 1
                        continue
                    gen = gens[p] = self._ordered(d, s, spreads[p])
                    first[p] = True
                # Symmetry: an identical task right before this one fixes a lower bound on the class key.
                floor = keys[p - 1] if p > 0 and seq[p - 1][1] == s and seq[p - 1][3] == g else None
                moved = False
                for dom, key in gen:
                    budget.spend()
                    spent += 1
                    if limit is not None and spent > limit:
                        raise _GiveUp
                    ckey = (dom, tuple(-x for x in key[0]), key[1])
                    if not first[p] and floor is not None and ckey < floor:
                        continue
                    first[p] = False
                    if key not in self.classes[dom]:
                        continue  # emptied by an earlier placement on this path
                    budget.spend(self.nshapes)
                    name, nkey = self._place(dom, key, s)
                    self._mark(spreads[p], dom, 1)
                    placed[p] = (dom, key, nkey, name)
                    keys[p] = ckey
                    result[p] = (name, dom)
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
                item = placed[q]
                if item is not None:
                    dom, key, nkey, name = item
                    self._unplace(dom, key, nkey, name, seq[q][1])
                    self._mark(spreads[q], dom, -1)

    def _choices(self, d: int, s: int, sp: Spread | None, *, first: bool = False,
                 ) -> list[tuple[Any, int, tuple[Vec, str] | None]]:
        """What sits under ``d`` for a task of shape ``s``, best first: (sort key, domain, machine class
        in that domain or None for the domain itself).

        Best fit (the packing rule, docs/design.md §5): machines and sub-domains are ranked together by
        how many tasks of the shape they still hold, tightest first (then free capacity), so a pool with
        a per-host key packs like one without and large free machines and domains stay whole. Above
        the level of a relaxed node (``sp``), a group spreads over the fewest domains of that level
        instead, chosen among all of them under ``d``: domains it (or its constrained descendants)
        already uses first, then one that holds all its remaining tasks (tightest), else the largest
        (most of its remaining tasks); ties go to the domain that opens the fewest new coarser domains;
        machines missing the labels down to that level last.

        ``first``: only the best entry is wanted (it is the same): when the group already uses a domain
        of the level under ``d`` that still fits the shape, only those domains are ranked, since each
        of them comes before every domain it does not use (no scan of all the level's domains)."""
        out: list[tuple[Any, int, tuple[Vec, str] | None]] = []
        level, cap = self.level, self.cap
        if sp is not None and level[d] < sp.level:
            want = sum(sp.left)
            used = sp.used
            candidates: Iterable[int] = ()
            if first:
                end = self.index.end[d]
                candidates = [c for c, n in used.items()
                              if n and level[c] == sp.level and d <= c < end and cap[c][s] > 0]
            only_used = bool(candidates)
            if not only_used:
                candidates = self.descendants(d, sp.level)
            # (fresh, not full, room or -cover, domain) first; the count of new coarser domains, third in
            # the order, only for the domains that can still be first (it walks the ancestors).
            ranked: list[tuple[int, int, int, int]] = []
            for c in candidates:
                cc = cap[c]
                if cc[s] <= 0:
                    continue
                cov = room = 0
                for s2, k in enumerate(sp.left):
                    if k:
                        cov += min(cc[s2], k)
                        room += cc[s2]
                fresh = 0 if used.get(c) else 1
                full = cov >= want and (len(sp.left) == 1 or self._holds(c, sp.left))
                ranked.append((fresh, 0 if full else 1, room if full else -cov, c))
            if first and ranked:
                best = min(r[:2] for r in ranked)
                ranked = [r for r in ranked if r[:2] == best]
            anc, top = self.anc, sp.level
            for fresh, notfull, size, c in ranked:
                new_above = sum(1 for a in anc[c] if level[d] < level[a] < top and not used.get(a))
                out.append(((fresh, notfull, new_above, size, c), c, None))
            # Machines missing the labels down to the node's level: last.
            for e in range(d, self.index.end[d]) if not only_used else ():
                if level[e] >= sp.level:
                    continue
                for key in self.classes[e]:
                    f = self.fit(key[0], key[1], s)
                    if f > 0:
                        out.append(((2, f, key[0], key[1], e), e, key))
        else:
            for key in self.classes[d]:
                f = self.fit(key[0], key[1], s)
                if f > 0:
                    out.append(((f, key[0], 0, key[1], -1), d, key))
            for c in self.children[d]:
                n = cap[c][s]
                if n > 0:
                    out.append(((n, self._tightness(c), 1, "", c), c, None))
        if first:  # the best entry only: one pass, no sort (the descent asks at every level)
            return [min(out, key=lambda item: item[0])] if out else []
        out.sort(key=lambda item: item[0])
        return out

    def _holds(self, c: int, left: tuple[int, ...]) -> bool:
        """Several shapes: the free totals of ``c`` (before this gang) cover the tasks ``left``."""
        tot = self.tot[c]
        for r in range(4):
            v = 0
            for s, k in enumerate(left):
                if k:
                    v += k * self.shapes[s].req[r]
            if v > tot[r]:
                return False
        return True

    def _tightness(self, c: int) -> Vec:
        """Free capacity that ranks domain ``c`` among machines: its one machine's when it holds a
        single machine (a per-host domain ranks exactly like that machine), else its total."""
        if not self.children[c]:
            classes = self.classes[c]
            if len(classes) == 1:
                (free, _sp), names = next(iter(classes.items()))
                if len(names) == 1:
                    return free
        t = self.tot[c]
        return (t[0], t[1], t[2], t[3])

    def _best(self, d: int, s: int, sp: Spread | None = None) -> tuple[int, tuple[Vec, str]] | None:
        """First candidate of :meth:`_ordered` without building the whole order."""
        while True:
            choices = self._choices(d, s, sp, first=True)
            if not choices:
                return None
            _k, c, key = choices[0]
            if key is not None:
                return c, key
            d = c

    def _ordered(self, d: int, s: int, sp: Spread | None = None) -> Iterator[tuple[int, tuple[Vec, str]]]:
        """Machine classes under ``d`` that fit shape ``s``, in the order of :meth:`_choices`."""
        for _k, c, key in self._choices(d, s, sp):
            if key is not None:
                yield c, key
            else:
                yield from self._ordered(c, s, sp)

    def _place(self, d: int, key: tuple[Vec, str], s: int) -> tuple[str, tuple[Vec, str] | None]:
        classes = self.classes[d]
        names = classes[key]
        name = names.pop()
        if not names:
            del classes[key]
        free, sp = key
        req = self.shapes[s].req
        nfree = (free[0] - req[0], free[1] - req[1], free[2] - req[2], free[3] - req[3])
        nkey: tuple[Vec, str] | None = (nfree, sp)
        useful = False
        for s2 in range(self.nshapes):
            after = self.fit(nfree, sp, s2)
            delta = after - self.fit(free, sp, s2)
            if after:
                useful = True
            if delta:
                for a in self.anc[d]:
                    self.cap[a][s2] += delta
        if useful:
            bucket = classes.get(nkey)  # type: ignore[arg-type]
            if bucket is None:
                classes[nkey] = [name]  # type: ignore[index]
            else:
                bucket.append(name)
        else:
            nkey = None
        return name, nkey

    def _unplace(self, d: int, key: tuple[Vec, str], nkey: tuple[Vec, str] | None, name: str, s: int) -> None:
        classes = self.classes[d]
        if nkey is not None:
            bucket = classes[nkey]
            popped = bucket.pop()
            assert popped == name
            if not bucket:
                del classes[nkey]
        classes.setdefault(key, []).append(name)
        free = key[0]
        req = self.shapes[s].req
        nfree = (free[0] - req[0], free[1] - req[1], free[2] - req[2], free[3] - req[3])
        for s2 in range(self.nshapes):
            delta = self.fit(free, key[1], s2) - self.fit(nfree, key[1], s2)
            if delta:
                for a in self.anc[d]:
                    self.cap[a][s2] += delta


class _ExactModel:
    """A component's packing as CP-SAT sees it (:mod:`scheduler.placement.exact`): task *types* (shape,
    bound domain, whether the task is relaxed group ``gid``'s) with their positions in ``seq``, and
    every machine under the bound domains with how many tasks of each type it fits alone."""

    def __init__(self, search: GangSearch, seq: list[tuple[int, int, int, int]], gid: int | None = None) -> None:
        self.seq = seq
        self.shapes = search.shapes
        self.positions: dict[tuple[int, int, bool], list[int]] = {}
        for p, (_t, s, d, g) in enumerate(seq):
            self.positions.setdefault((s, d, g == gid), []).append(p)
        self.order = sorted(self.positions)
        end = search.index.end
        self.machines: list[Machine] = []
        self.doms: list[int] = []  # per machine: its finest domain
        self.where: dict[str, int] = {}
        self.nvars = 0
        seen = -1
        for top in sorted({d for _s, d, _m in self.order}):
            if top < seen:
                continue  # nested in a domain already listed
            seen = end[top]
            for dom in range(top, end[top]):
                for (free, sp), names in sorted(search.classes[dom].items()):
                    fits = tuple(search.fit(free, sp, s) if d <= dom < end[d] else 0 for s, d, _m in self.order)
                    if not any(fits):
                        continue
                    for name in sorted(names):
                        self.machines.append(Machine(name, free, fits))
                        self.doms.append(dom)
                        self.where[name] = dom
                        self.nvars += sum(1 for n in fits if n)

    def types(self) -> list[tuple[Vec, int]]:
        return [(self.shapes[key[0]].req, len(self.positions[key])) for key in self.order]

    def result(self, taken: list[list[tuple[str, int]]]) -> list[tuple[str, int]]:
        """CP-SAT's counts as (machine, domain) per position of ``seq``."""
        out: list[tuple[str, int]] = [("", -1)] * len(self.seq)
        for k, key in enumerate(self.order):
            slots = iter(self.positions[key])
            for name, count in taken[k]:
                for _ in range(count):
                    out[next(slots)] = (name, self.where[name])
        return out


def _neg(v: Vec) -> tuple[int, int, int, int]:
    return (-v[0], -v[1], -v[2], -v[3])
