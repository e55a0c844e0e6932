"""Entry point :func:`victims_choose`: the cheapest set of whole LOW gangs whose eviction lets a gang fit.

Algorithm (docs/design.md §9), every feasibility question answered by :func:`scheduler.placement.solve`
through :class:`scheduler.preemption.feasibility.Feasibility` (memoised, monotone inference, capacity
arithmetic when that decides; at most ``max_solves`` questions not inferred, the arithmetic ones counted):
1. Relevance: machines the preemptor could use with every candidate evicted (schedulable, labelled for
   its required keys, not excluded, large enough); a candidate holding nothing there is dropped.
2. All released: one solve with every relevant candidate evicted (none when the capacity alone is
   short). No placement: return None. Its cover (below) is the first incumbent.
3. Scopes: when one required constraint holds every task (a chain of single required children from
   the root), every placement lies in one domain of its finest such key, and an irreducible victim
   set holds capacity in that domain; the search runs per domain (else once, on the whole pool),
   asking each question of the domain's machines only (:meth:`Feasibility.scoped`: "does it fit
   there"; the optimum fits in its own domain, and a placement there is one of the pool).
   Scopes are visited by a lower bound; one whose bound is worse than the best set is skipped.
4. Incumbents per scope: a *cover* takes a placement and picks, machine by machine, the cheapest
   candidates holding there until what the placement needs beyond the free capacity is released,
   then drops those not needed (arithmetic, no solve). Covered: the scope's all-released placement
   and the shortest feasible prefix of its candidates ordered cheapest first, then cheapest per GPU
   first (binary search from the shortest prefix with capacity enough, asked first; about log2 n
   solves); each is then made irreducible (repeatedly: the shortest fitting prefix, in the same order,
   of what is left; its last member is kept).
5. Exact branch and bound per scope, candidates ordered most expensive first: a node keeps some
   candidates (I), has excluded some, and leaves the rest open (U); I + U is known to fit. It tries
   excluding the next candidate (one solve, unless inferred) before keeping it. A node is cut when a
   lower bound on the cost of any set from it (the capacity the scope still misses: in GPUs, in
   gangs, and in GPUs not covered by borrowing gangs) is worse than the best set so far; candidates
   that alone would make I worse than the best are excluded together (one solve), and so are those
   whose reduced cost (their work less what their release saves the work bound at its margin, the
   bound being convex in what it needs) exceeds the gap between the bound and the best set. When every scope
   is done the best set is optimal; when the budget runs out the best set found so far is returned
   (step 2 always provides one), with the solver's placement for exactly that set if a solve is left.

Objective, lexicographic (smaller is better): GPUs of non-borrowing victims, work lost (GPUs times
time run up to ``now``; 0 without it), GPUs of all victims, number of victims, then the victims'
start times sorted descending compared element by element (the later the better), then their sorted
keys. Lower bounds on the work lost: the cheapest work per unit of each missing resource, taken
fractionally.

Invariants: a returned set fits (its placement is a solver result or a placement valid on its
snapshot); it is irreducible when the search completed; equal inputs in any candidate order give
equal outputs; at most ``max_solves`` questions not inferred (solver calls and capacity answers).
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Sequence

from scheduler.placement import ClusterSnapshot, GangRequest, Placement, Policy, Vec
from scheduler.preemption.feasibility import (
    ZERO,
    Budget,
    BudgetSpent,
    Feasibility,
    add,
    held_per_node,
    usable_nodes,
)
from scheduler.preemption.scopes import Scope, scopes_build
from scheduler.preemption.types import Candidate, VictimChoice

DEFAULT_MAX_SOLVES = 256  # enough to finish the exact search on <= 8 candidates (256 subsets)

# (non-borrowing GPUs, work lost, GPUs, gangs): the additive part of the objective
Additive = tuple[int, float, int, int]
Cost = tuple[int, float, int, int, tuple[float, ...], tuple[str, ...]]
_Margin = tuple[int, float]  # (resource, work per unit at the relaxation's margin)


def victims_choose(
    snapshot: ClusterSnapshot,
    preemptor: GangRequest,
    candidates: Sequence[Candidate],
    policy: Policy = Policy(),
    *,
    max_solves: int = DEFAULT_MAX_SOLVES,
    max_seconds: float | None = None,
    now: float | None = None,
    budget: Budget | None = None,
    ceiling: int | None = None,
) -> VictimChoice | None:
    """Choose whole LOW gangs to evict so that ``preemptor`` fits on ``snapshot`` (the pool now, every
    candidate still running), or None when evicting every candidate would not be enough (nothing is
    evicted then). See the module docstring for the objective and the search.

    ``now`` (epoch seconds, the candidates' ``started`` clock): the work each candidate would lose,
    its GPUs times how long it has run, enters the objective; None counts no work lost (the objective
    is then GPUs alone, as before the work term).

    ``max_seconds`` bounds the search in wall-clock time like ``max_solves`` bounds it in solver calls
    (no new solve starts after it; the first, the all-evicted case, always runs, so completeness holds).

    ``budget``: draw the solves from this one, shared with other searches (``max_solves`` and
    ``max_seconds`` are then its own); :class:`BudgetSpent` when it is spent before the first solve.
    ``ceiling``: only sets evicting at most this many GPUs within their teams' quota count (None
    when there is none; the search prunes by it as by a best set of that cost).

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
    if budget is None:
        budget = Budget(max_solves, None if max_seconds is None else time.monotonic() + max_seconds)
    pool = Feasibility(snapshot, preemptor, relevant, policy, budget,
                       {i: held[c.key] for i, c in enumerate(relevant) if held[c.key]})
    search = _Search(pool, usable, now, ceiling)
    return search.run()


def work_lost(candidate: Candidate, now: float | None) -> float:
    """GPU-seconds of work evicting ``candidate`` at ``now`` throws away (0 without ``now``)."""
    return 0.0 if now is None else candidate.gpu * max(0.0, now - candidate.started)


def _additive(candidate: Candidate, now: float | None) -> Additive:
    gpu = candidate.gpu
    return (0 if candidate.borrowing else gpu, work_lost(candidate, now), gpu, 1)


def _plus(a: Additive, b: Additive) -> Additive:
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2], a[3] + b[3])


class _Search:
    def __init__(self, pool: Feasibility, usable: frozenset[str], now: float | None,
                 ceiling: int | None = None) -> None:
        self.pool = pool
        cands = pool.candidates
        self.n = len(cands)
        self.full = (1 << self.n) - 1
        self.now = now
        self.parts = [_additive(c, now) for c in cands]
        # Cheapest to evict first: lowest cost alone, the latest start, then key.
        self.cheap_first = sorted(range(self.n), key=lambda i: (self.parts[i], -cands[i].started, cands[i].key))
        self.rank = {i: r for r, i in enumerate(self.cheap_first)}
        # Cheapest per GPU first (GPUs within quota, then work lost, per GPU the gang holds): the
        # order in which a fractional choice would take them.
        self.dense_first = sorted(range(self.n), key=lambda i: (
            self.parts[i][0] / max(1, self.parts[i][2]), self.parts[i][1] / max(1, self.parts[i][2]),
            self.parts[i], -cands[i].started, cands[i].key))
        self.suffixes: list[int] | None = None  # masks of the cheap-first order's suffixes (built when needed)
        self.scopes = scopes_build(pool, usable)
        self.best: int | None = None
        self.best_cost: Cost | None = None
        self.ceiling = ceiling
        self.best_pool: Feasibility = pool

    def cost(self, mask: int) -> Cost:
        members = [self.pool.candidates[i] for i in self.pool.bits(mask)]
        total = self._additive(mask)
        starts = tuple(-s for s in sorted((c.started for c in members), reverse=True))
        return (*total, starts, tuple(sorted(c.key for c in members)))

    def offer(self, mask: int, pool: Feasibility) -> None:
        """A fitting set, known to ``pool`` (its witness placement is there)."""
        cost = self.cost(mask)
        if self.ceiling is not None and cost[0] > self.ceiling:
            return
        if self.best_cost is None or cost < self.best_cost:
            self.best, self.best_cost, self.best_pool = mask, cost, pool

    def pool_of(self, scope: Scope) -> Feasibility:
        """The feasibility questions of ``scope``: does the preemptor fit on its machines."""
        if scope.pool is None:
            scope.pool = self.pool.scoped(scope.machines, scope.mask)
        return scope.pool

    def run(self) -> VictimChoice | None:
        pool = self.pool
        if not pool.may_fit(self.full):
            return None  # not capacity enough even with every candidate evicted: no solve needed
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
        return None if self.best is None else self.choice(self.best)

    def done(self, low: Additive) -> bool:
        """No set from a scope with this lower bound can beat the best one."""
        if self.best_cost is None:
            return self.ceiling is not None and low[0] > self.ceiling
        return low > self.best_cost[:4] or self.best == 0

    def incumbent(self, scope: Scope) -> None:
        """Step 3 in one scope: covers of the all-released placement and of the shortest feasible
        prefix, cheapest first and then cheapest per GPU first, each then made irreducible."""
        pool = self.pool_of(scope)
        witness = pool.check(scope.mask)
        if witness is None:
            return
        self.offer(pool.cover(witness, scope.mask, [i for i in self.cheap_first if scope.mask >> i & 1]), pool)
        for ranking in (self.cheap_first, self.dense_first):
            if ranking is self.dense_first and ranking == self.cheap_first:
                break
            order = [i for i in ranking if scope.mask >> i & 1]
            # The whole scope fits; a prefix short of capacity does not.
            lo, hi = pool.first_enough(pool.capacity(0), pool.cumulative(order), len(order)), len(order)
            prefixes = self._prefixes(order)
            lo, hi = self._probe(pool, prefixes, 0, lo, hi)
            while lo < hi:
                mid = (lo + hi) // 2
                if pool.check(prefixes[mid]) is not None:
                    hi = mid
                else:
                    lo = mid + 1
            witness = pool.check(prefixes[lo])
            assert witness is not None
            found = pool.cover(witness, prefixes[lo], order)
            self.offer(found, pool)
            self.offer(self.minimal(found, pool, ranking), pool)

    @staticmethod
    def _probe(pool: Feasibility, prefixes: Sequence[int], kept: int, lo: int, hi: int) -> tuple[int, int]:
        """The range of a binary search for the shortest fitting prefix after asking about its low end
        first: when capacity is what the preemptor lacks (no topology in the way), the shortest prefix
        with capacity enough fits, and one question settles the search."""
        if lo >= hi:
            return lo, hi
        if pool.check(kept | prefixes[lo]) is not None:
            return lo, lo
        return lo + 1, hi

    @staticmethod
    def _prefixes(order: Sequence[int]) -> list[int]:
        """``out[k]``: the mask of the first ``k`` candidates of ``order``."""
        out = [0]
        for i in order:
            out.append(out[-1] | 1 << i)
        return out

    def minimal(self, mask: int, pool: Feasibility, ranking: Sequence[int]) -> int:
        """An irreducible subset of a fitting ``mask``: the shortest fitting prefix (in ``ranking``'s
        order) of what is left is found by binary search and its last member kept, until the kept
        ones fit. Prefixes short of capacity (:meth:`Feasibility.first_enough`) are passed over unasked."""
        kept = 0
        rest = [i for i in ranking if mask >> i & 1]
        cumulative = pool.cumulative(rest)  # what is left is always a prefix of ``rest``
        prefixes = self._prefixes(rest)
        left = len(rest)
        have = pool.capacity(0)
        while not pool.enough(have) or pool.check(kept) is None:
            # kept + the first ``left`` fits, kept alone does not
            lo, hi = max(1, pool.first_enough(have, cumulative, left)), left
            lo, hi = self._probe(pool, prefixes, kept, lo, hi)
            while lo < hi:
                mid = (lo + hi) // 2
                if pool.check(kept | prefixes[mid]) is not None:
                    hi = mid
                else:
                    lo = mid + 1
            kept |= 1 << rest[lo - 1]
            have = add(have, pool.gain.get(rest[lo - 1], ZERO))
            left = lo - 1
        return kept

    def bound(self, kept: int, open_: int, scope: Scope) -> Additive | None:
        return self.bound_and_margin(kept, open_, scope)[0]

    def bound_and_margin(self, kept: int, open_: int, scope: Scope) -> tuple[Additive | None, _Margin | None]:
        """:meth:`bound`, and the resource that sets its work term with the work per unit at which
        the relaxation stops (for :meth:`fixed`; None without a work term).

        A lower bound on the additive cost of any fitting set between ``kept`` and ``kept | open_``
        whose placement lies in ``scope`` (None: none fits by capacity alone). Work lost: the cheapest
        work per unit of each missing resource, fractionally (the relaxation of a knapsack)."""
        total = self._additive(kept)
        have = ZERO
        for i in self.pool.bits(kept):
            have = add(have, scope.release.get(i, ZERO))
        need = [m - h for m, h in zip(scope.missing, have, strict=True)]
        if max(need) <= 0:
            if self.pool_of(scope).inferred(kept) == (True, None):
                return _plus(total, (0, 0.0, 0, 1)), None
            return total, None
        gpu = max(0, need[0])
        borrowed = sum(scope.release[i][0] for i in self.pool.bits(open_ & scope.borrowing))
        own = total[0] + max(0, gpu - borrowed)
        limit = self.best_cost[0] if self.best_cost is not None else self.ceiling
        if limit is not None and own > limit:
            return (own, math.inf, sys.maxsize, sys.maxsize), None  # worse in the first term: no more needed
        largest, cheapest = self.presort(scope)
        opened = bin(open_)[:1:-1]  # digit i: candidate i is open (one scan, not a shift per test)
        width = len(opened)
        gangs = 0
        work = 0.0
        margin: _Margin | None = None
        for r in range(4):
            if need[r] <= 0:
                continue
            got, count = 0, 0
            for amount, i in largest[r]:
                if got >= need[r]:
                    break
                if i < width and opened[i] == "1":
                    got += amount
                    count += 1
            if got < need[r]:
                return None, None
            gangs = max(gangs, count)
            if self.now is not None:
                least, per_unit = self._work_at_least(opened, cheapest[r], need[r])
                if margin is None or least > work:
                    work, margin = least, (r, per_unit)
        return (own, total[1] + work, total[2] + gpu, total[3] + gangs), margin

    def presort(self, scope: Scope) -> tuple[list[list[tuple[int, int]]], list[list[tuple[float, int, int]]]]:
        """The scope's candidates in the orders :meth:`bound` walks (sorted once, not at every node)."""
        if scope.largest is None or scope.cheapest is None:
            release = scope.release
            scope.largest = [sorted(((v[r], i) for i, v in release.items()), reverse=True) for r in range(4)]
            scope.cheapest = [sorted((self.parts[i][1] / v[r], v[r], i) for i, v in release.items() if v[r] > 0)
                              for r in range(4)]
        return scope.largest, scope.cheapest

    @staticmethod
    def _work_at_least(opened: str, cheapest: list[tuple[float, int, int]], need: int) -> tuple[float, float]:
        """The least work lost to release ``need`` of a resource from the open candidates (``opened``:
        digit i is "1" for an open one; ``cheapest``: by work per unit of it), were candidates
        divisible (each gives its release at its work per unit): a lower bound; and the work per unit
        of the last one taken (what one unit less of ``need`` saves at most)."""
        total = 0.0
        width = len(opened)
        per_unit = 0.0
        for per_unit, amount, i in cheapest:
            if i >= width or opened[i] != "1":
                continue
            take = min(amount, need)
            total += per_unit * take
            need -= take
            if need <= 0:
                break
        return total, per_unit

    def fixed(self, open_: int, scope: Scope, low: Additive, margin: _Margin) -> int:
        """Candidates of ``open_`` no set from a node whose bound is ``low`` can hold and beat the best
        set: reduced-cost fixing of the work term. With candidate i kept, the relaxation needs
        ``release_i`` less of resource r, which saves at most ``per_unit`` a unit (the relaxation's
        cost is convex in what it needs), so such a set loses at least ``low``'s work plus
        ``work_i - per_unit * release_i``; when that exceeds the best set's work (GPUs within quota
        equal: ``low``'s cannot be lower), i is out. A small tolerance keeps ties in."""
        best = self.best_cost
        if best is None or low[0] != best[0]:
            return 0
        r, per_unit = margin
        limit = best[1] - low[1] + 1e-9 * max(1.0, abs(best[1]))
        release = scope.release
        digits = ["0"] * self.n
        any_ = False
        for i in self.pool.bits(open_):
            have = release.get(i)
            if self.parts[i][1] - per_unit * (have[r] if have is not None else 0) > limit:
                digits[self.n - 1 - i] = "1"
                any_ = True
        return int("".join(digits), 2) if any_ else 0

    def branch_and_bound(self, scope: Scope) -> None:
        """Step 4 in one scope: depth first, excluding before keeping, most expensive decided first."""
        pool = self.pool_of(scope)
        if pool.check(scope.mask) is None:
            return  # no placement in this scope, whatever is evicted
        order = sorted(pool.bits(scope.mask), key=self.rank.__getitem__, reverse=True)
        stack: list[tuple[int, int, int]] = [(0, scope.mask, 0)]  # (kept, open, position in order)
        while stack:
            kept, open_, at = stack.pop()
            low, margin = self.bound_and_margin(kept, open_, scope)
            if low is None or self.done(low):
                continue
            decided, witness = pool.inferred(kept)
            if decided and witness is not None:
                self.offer(kept, pool)
                continue
            # Candidates that alone would make the kept set worse than the best: exclude them together.
            hopeless = open_ & self.hopeless(self._additive(kept))
            if margin is not None:
                hopeless |= self.fixed(open_ & ~hopeless, scope, low, margin)
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

    def hopeless(self, base: Additive) -> int:
        """Candidates each of which, added to a set costing ``base``, makes it worse than the best set
        in GPUs within quota or, those equal, in work lost: the cheapest-first order's suffix from the
        first such candidate (it is sorted by those two terms; a sum with equal terms compares further
        and is left in, which only prunes less). Without a best set yet, the ceiling's GPUs."""
        if self.best_cost is not None:
            own, work = self.best_cost[0], self.best_cost[1]
        elif self.ceiling is not None:
            own, work = self.ceiling, math.inf
        else:
            return 0
        if self.suffixes is None:
            self.suffixes = [0] * (self.n + 1)
            for k in range(self.n - 1, -1, -1):
                self.suffixes[k] = self.suffixes[k + 1] | 1 << self.cheap_first[k]
        lo, hi = 0, self.n
        while lo < hi:
            mid = (lo + hi) // 2
            part = self.parts[self.cheap_first[mid]]
            if base[0] + part[0] > own or (base[0] + part[0] == own and base[1] + part[1] > work):
                hi = mid
            else:
                lo = mid + 1
        return self.suffixes[lo]

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
