"""Entry point :func:`victims_choose`: the cheapest set of whole LOW gangs whose eviction lets a gang fit.

Algorithm (docs/design.md §9), every feasibility question answered by :func:`scheduler.placement.solve`
through :class:`scheduler.preemption.feasibility.Feasibility` (memoised, monotone inference, at most ``max_solves``):
1. Relevance: machines the preemptor could use with every candidate evicted (schedulable, labelled for
   its required keys, not excluded, large enough); a candidate holding nothing there is dropped.
2. All released: one solve with every relevant candidate evicted. No placement: return None. Its
   cover (below) is the first incumbent.
3. Scopes: when one required constraint holds every task (a chain of single required children from
   the root), every placement lies in one domain of its finest such key, and an irreducible victim
   set holds capacity in that domain; the search runs per domain (else once, on the whole pool),
   asking each question of the domain's machines only (:meth:`Feasibility.scoped`: "does it fit
   there"; the optimum fits in its own domain, and a placement there is one of the pool).
   Scopes are visited by a lower bound; one whose bound is worse than the best set is skipped.
4. Incumbents per scope: a *cover* takes a placement and picks, machine by machine, the cheapest
   candidates holding there until what the placement needs beyond the free capacity is released,
   then drops those not needed (arithmetic, no solve). Covered: the scope's all-released placement
   and the shortest feasible prefix of its candidates ordered cheapest first (binary search, about
   log2 n solves); the latter is then made irreducible (repeatedly: the shortest fitting prefix,
   cheapest first, of what is left; its last member is kept).
5. Exact branch and bound per scope, candidates ordered most expensive first: a node keeps some
   candidates (I), has excluded some, and leaves the rest open (U); I + U is known to fit. It tries
   excluding the next candidate (one solve, unless inferred) before keeping it. A node is cut when a
   lower bound on the cost of any set from it (the capacity the scope still misses: in GPUs, in
   gangs, and in GPUs not covered by borrowing gangs) is worse than the best set so far; candidates
   that alone would make I worse than the best are excluded together (one solve). When every scope
   is done the best set is optimal; when the budget runs out the best set found so far is returned
   (step 2 always provides one), with the solver's placement for exactly that set if a solve is left.

Objective, lexicographic (smaller is better): GPUs of non-borrowing victims, work lost (GPUs times
time run up to ``now``; 0 without it), GPUs of all victims, number of victims, then the victims'
start times sorted descending compared element by element (the later the better), then their sorted
keys. Lower bounds on the work lost: the cheapest work per unit of each missing resource, taken
fractionally.

Invariants: a returned set fits (its placement is a solver result or a placement valid on its
snapshot); it is irreducible when the search completed; equal inputs in any candidate order give
equal outputs; at most ``max_solves`` solver calls.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from scheduler.placement import ClusterSnapshot, GangRequest, Placement, Policy, Vec
from scheduler.preemption.feasibility import (
    ZERO,
    Budget,
    BudgetSpent,
    Feasibility,
    add,
    held_per_node,
    usable_nodes,
    vec,
)
from scheduler.preemption.types import Candidate, VictimChoice

DEFAULT_MAX_SOLVES = 256  # enough to finish the exact search on <= 8 candidates (256 subsets)

# (non-borrowing GPUs, work lost, GPUs, gangs): the additive part of the objective
Additive = tuple[int, float, int, int]
Cost = tuple[int, float, int, int, tuple[float, ...], tuple[str, ...]]


def victims_choose(
    snapshot: ClusterSnapshot,
    preemptor: GangRequest,
    candidates: Sequence[Candidate],
    policy: Policy = Policy(),
    *,
    max_solves: int = DEFAULT_MAX_SOLVES,
    max_seconds: float | None = None,
    now: float | None = None,
) -> VictimChoice | None:
    """Choose whole LOW gangs to evict so that ``preemptor`` fits on ``snapshot`` (the pool now, every
    candidate still running), or None when evicting every candidate would not be enough (nothing is
    evicted then). See the module docstring for the objective and the search.

    ``now`` (epoch seconds, the candidates' ``started`` clock): the work each candidate would lose,
    its GPUs times how long it has run, enters the objective; None counts no work lost (the objective
    is then GPUs alone, as before the work term).

    ``max_seconds`` bounds the search in wall-clock time like ``max_solves`` bounds it in solver calls
    (no new solve starts after it; the first, the all-evicted case, always runs, so completeness holds).

    Raises ValueError when two candidates share a key or ``max_solves`` is below 1."""
    if max_solves < 1:
        raise ValueError("max_solves must be at least 1")
    if len({c.key for c in candidates}) != len(candidates):
        raise ValueError("candidate keys must be unique")
    names = {node.name for node in snapshot.nodes}
    held = {candidate.key: held_per_node(candidate, names) for candidate in candidates}
    every: dict[str, Vec] = {}
    for per_node in held.values():
        for name, v in per_node.items():
            every[name] = add(every.get(name, ZERO), v)
    usable = usable_nodes(snapshot, preemptor, every)
    relevant = sorted((c for c in candidates if any(name in usable for name in held[c.key])), key=lambda c: c.key)
    deadline = None if max_seconds is None else time.monotonic() + max_seconds
    budget = Budget(max_solves, deadline)
    pool = Feasibility(snapshot, preemptor, relevant, policy, budget,
                       {i: held[c.key] for i, c in enumerate(relevant) if held[c.key]})
    search = _Search(pool, usable, now)
    return search.run()


def work_lost(candidate: Candidate, now: float | None) -> float:
    """GPU-seconds of work evicting ``candidate`` at ``now`` throws away (0 without ``now``)."""
    return 0.0 if now is None else candidate.gpu * max(0.0, now - candidate.started)


def _additive(candidate: Candidate, now: float | None) -> Additive:
    gpu = candidate.gpu
    return (0 if candidate.borrowing else gpu, work_lost(candidate, now), gpu, 1)


def _plus(a: Additive, b: Additive) -> Additive:
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2], a[3] + b[3])


@dataclass(slots=True)
class _Scope:
    """Where a placement can lie: its machines, the candidates holding capacity there (``mask``), the
    capacity the preemptor needs beyond what is free there (``missing``), and what each candidate of
    ``mask`` frees there (``release``, by candidate; the others free nothing there). ``pool``: the
    feasibility questions asked of these machines only (built when the scope is first searched)."""

    machines: frozenset[str]
    mask: int
    missing: Vec
    release: dict[int, Vec]
    pool: Feasibility | None = None


def _domain_level(preemptor: GangRequest, keys: tuple[str, ...]) -> int | None:
    """The finest level at which one required constraint holds every task of the preemptor (a chain of
    single required children from the root), or None when there is none."""
    tree = preemptor.tree
    if tree.tasks:
        return None
    found = None
    children = tree.children
    while len(children) == 1 and children[0].required and children[0].key in keys:
        node = children[0]
        found = keys.index(node.key)
        if node.tasks:
            break
        children = node.children
    return found


class _Search:
    def __init__(self, pool: Feasibility, usable: frozenset[str], now: float | None) -> None:
        self.pool = pool
        cands = pool.candidates
        self.n = len(cands)
        self.full = (1 << self.n) - 1
        self.now = now
        self.parts = [_additive(c, now) for c in cands]
        # Cheapest to evict first: lowest cost alone, the latest start, then key.
        self.cheap_first = sorted(range(self.n), key=lambda i: (self.parts[i], -cands[i].started, cands[i].key))
        self.rank = {i: r for r, i in enumerate(self.cheap_first)}
        self.scopes = self._scopes(usable)
        self.best: int | None = None
        self.best_cost: Cost | None = None
        self.best_pool: Feasibility = pool

    def _scopes(self, usable: frozenset[str]) -> list[_Scope]:
        """One scope per domain of the level that holds the whole preemptor (docs/design.md §9: an
        irreducible victim set lies in the domain its placement uses), else the whole pool."""
        pool = self.pool
        demand = ZERO
        for task in pool.preemptor.tasks:
            demand = add(demand, vec(task.resources))
        level = _domain_level(pool.preemptor, pool.snapshot.keys)
        regions: dict[tuple[str | None, ...], set[str]] = {}
        for node in pool.snapshot.nodes:
            if node.name in usable:
                regions.setdefault(() if level is None else node.labels[: level + 1], set()).add(node.name)
        region_of: dict[str, int] = {}
        paths = sorted(regions, key=lambda path: tuple(str(x) for x in path))
        for r, path in enumerate(paths):
            for name in regions[path]:
                region_of[name] = r
        frees: list[Vec] = [ZERO] * len(paths)
        for node in pool.snapshot.nodes:
            at = region_of.get(node.name)
            if at is not None:
                frees[at] = add(frees[at], tuple(max(0, x) for x in vec(node.free)))  # type: ignore[arg-type]
        releases: list[dict[int, Vec]] = [{} for _ in paths]
        for i, per_node in pool.held.items():
            for name, v in per_node.items():
                at = region_of.get(name)
                if at is not None:
                    have = releases[at].get(i)
                    releases[at][i] = v if have is None else add(have, v)
        scopes = []
        for r in range(len(paths)):
            release = {i: v for i, v in releases[r].items() if v != ZERO}
            mask = 0
            for i in release:
                mask |= 1 << i
            missing = tuple(d - f for d, f in zip(demand, frees[r], strict=True))
            scopes.append(_Scope(frozenset(regions[paths[r]]), mask, missing, release))  # type: ignore[arg-type]
        if len(scopes) == 1 and level is None:
            scopes[0].pool = pool  # the whole pool: its own questions
        return scopes

    def cost(self, mask: int) -> Cost:
        members = [self.pool.candidates[i] for i in self.pool.bits(mask)]
        total = self._additive(mask)
        starts = tuple(-s for s in sorted((c.started for c in members), reverse=True))
        return (*total, starts, tuple(sorted(c.key for c in members)))

    def offer(self, mask: int, pool: Feasibility) -> None:
        """A fitting set, known to ``pool`` (its witness placement is there)."""
        cost = self.cost(mask)
        if self.best_cost is None or cost < self.best_cost:
            self.best, self.best_cost, self.best_pool = mask, cost, pool

    def pool_of(self, scope: _Scope) -> Feasibility:
        """The feasibility questions of ``scope``: does the preemptor fit on its machines."""
        if scope.pool is None:
            scope.pool = self.pool.scoped(scope.machines, scope.mask)
        return scope.pool

    def run(self) -> VictimChoice | None:
        pool = self.pool
        everything = pool.solve(self.full)
        if everything is None:
            return None
        self.offer(pool.cover(everything, self.full, self.cheap_first), pool)
        try:
            ranked = []
            for scope in self.scopes:
                low = self.bound(0, scope.mask, scope)
                if low is not None:
                    ranked.append((low, scope))
            ranked.sort(key=lambda item: item[0])
            for low, scope in ranked:
                if self.done(low):
                    break
                self.incumbent(scope)
            for low, scope in ranked:
                if self.done(low):
                    break
                self.branch_and_bound(scope)
        except BudgetSpent:
            pass
        assert self.best is not None
        return self.choice(self.best)

    def done(self, low: Additive) -> bool:
        """No set from a scope with this lower bound can beat the best one."""
        assert self.best_cost is not None
        return low > self.best_cost[:4] or self.best == 0

    def incumbent(self, scope: _Scope) -> None:
        """Step 3 in one scope: covers of the all-released placement and of the shortest feasible
        cheapest-first prefix, then an irreducible subset of the best one."""
        pool = self.pool_of(scope)
        witness = pool.check(scope.mask)
        if witness is None:
            return
        order = [i for i in self.cheap_first if scope.mask >> i & 1]
        self.offer(pool.cover(witness, scope.mask, order), pool)
        lo, hi = 0, len(order)  # the whole scope fits
        while lo < hi:
            mid = (lo + hi) // 2
            if pool.check(self._prefix(order, mid)) is not None:
                hi = mid
            else:
                lo = mid + 1
        prefix = self._prefix(order, lo)
        witness = pool.check(prefix)
        assert witness is not None
        found = pool.cover(witness, prefix, order)
        self.offer(found, pool)
        self.offer(self.minimal(found, pool), pool)

    @staticmethod
    def _prefix(order: Sequence[int], k: int) -> int:
        mask = 0
        for i in order[:k]:
            mask |= 1 << i
        return mask

    def minimal(self, mask: int, pool: Feasibility) -> int:
        """An irreducible subset of a fitting ``mask``: the shortest fitting prefix (cheapest first) of
        what is left is found by binary search and its last member kept, until the kept ones fit."""
        kept = 0
        rest = [i for i in self.cheap_first if mask >> i & 1]
        while pool.check(kept) is None:
            lo, hi = 1, len(rest)  # kept + all of rest fits, kept alone does not
            while lo < hi:
                mid = (lo + hi) // 2
                if pool.check(kept | self._prefix(rest, mid)) is not None:
                    hi = mid
                else:
                    lo = mid + 1
            kept |= 1 << rest[lo - 1]
            rest = rest[: lo - 1]
        return kept

    def bound(self, kept: int, open_: int, scope: _Scope) -> Additive | None:
        """A lower bound on the additive cost of any fitting set between ``kept`` and ``kept | open_``
        whose placement lies in ``scope`` (None: none fits by capacity alone). Work lost: the cheapest
        work per unit of each missing resource, fractionally (the relaxation of a knapsack)."""
        total = self._additive(kept)
        have = ZERO
        for i in self.pool.bits(kept):
            have = add(have, scope.release.get(i, ZERO))
        need = [m - h for m, h in zip(scope.missing, have, strict=True)]
        if max(need) <= 0:
            if self.pool_of(scope).inferred(kept) == (True, None):
                return _plus(total, (0, 0.0, 0, 1))
            return total
        others = self.pool.bits(open_)
        gangs = 0
        work = 0.0
        for r in range(4):
            if need[r] <= 0:
                continue
            got, count = 0, 0
            for amount in sorted((scope.release[i][r] for i in others if i in scope.release), reverse=True):
                if got >= need[r]:
                    break
                got += amount
                count += 1
            if got < need[r]:
                return None
            gangs = max(gangs, count)
            if self.now is not None:
                work = max(work, self._work_at_least(others, scope, r, need[r]))
        gpu = max(0, need[0])
        borrowed = sum(scope.release[i][0] for i in others if i in scope.release and self.pool.candidates[i].borrowing)
        return _plus(total, (max(0, gpu - borrowed), work, gpu, gangs))

    def _work_at_least(self, others: list[int], scope: _Scope, r: int, need: int) -> float:
        """The least work lost to release ``need`` of resource ``r`` in ``scope`` from ``others``, were
        candidates divisible (each gives its release at its work per unit): a lower bound."""
        items = sorted((self.parts[i][1] / scope.release[i][r], scope.release[i][r])
                       for i in others if i in scope.release and scope.release[i][r] > 0)
        total = 0.0
        for per_unit, amount in items:
            take = min(amount, need)
            total += per_unit * take
            need -= take
            if need <= 0:
                break
        return total

    def branch_and_bound(self, scope: _Scope) -> None:
        """Step 4 in one scope: depth first, excluding before keeping, most expensive decided first."""
        pool = self.pool_of(scope)
        if pool.check(scope.mask) is None:
            return  # no placement in this scope, whatever is evicted
        order = sorted(pool.bits(scope.mask), key=self.rank.__getitem__, reverse=True)
        stack: list[tuple[int, int, int]] = [(0, scope.mask, 0)]  # (kept, open, position in order)
        while stack:
            kept, open_, at = stack.pop()
            low = self.bound(kept, open_, scope)
            if low is None or self.done(low):
                continue
            decided, witness = pool.inferred(kept)
            if decided and witness is not None:
                self.offer(kept, pool)
                continue
            # Candidates that alone would make the kept set worse than the best: exclude them together.
            assert self.best_cost is not None
            base = self._additive(kept)
            hopeless = 0
            for i in pool.bits(open_):
                if _plus(base, self.parts[i]) > self.best_cost[:4]:
                    hopeless |= 1 << i
            if hopeless:
                if pool.check(kept | (open_ & ~hopeless)) is not None:
                    stack.append((kept, open_ & ~hopeless, at))
                continue
            while at < len(order) and not open_ >> order[at] & 1:
                at += 1
            if at == len(order):
                self.offer(kept, pool)  # kept | open == kept fits
                continue
            bit = 1 << order[at]
            stack.append((kept | bit, open_ & ~bit, at + 1))
            if pool.check(kept | (open_ & ~bit)) is not None:
                stack.append((kept, open_ & ~bit, at + 1))

    def _additive(self, mask: int) -> Additive:
        total: Additive = (0, 0.0, 0, 0)
        for i in self.pool.bits(mask):
            total = _plus(total, self.parts[i])
        return total

    def choice(self, mask: int) -> VictimChoice:
        pool = self.best_pool
        witness = pool.inferred(mask)[1]
        assert witness is not None
        placement: Placement = witness
        if mask not in pool.direct and pool.can_solve():
            # The solver's own placement on exactly this snapshot (it may meet more preferred constraints).
            placement = pool.solve(mask) or witness
        members = [pool.candidates[i] for i in pool.bits(mask)]
        return VictimChoice(
            victims=tuple(sorted(c.key for c in members)),
            placement=placement,
            gpu_evicted=sum(c.gpu for c in members),
            explored=pool.solves,
            work_lost=sum(work_lost(c, self.now) for c in members),
        )
