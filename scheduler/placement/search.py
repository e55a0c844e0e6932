"""The domain phase of one gang's search over a :class:`~scheduler.placement.index.DomainIndex`, and
:class:`GangSearch`, which runs it and hands bound domains to the packing (docs/design.md §5).

1. *Domain phase* (here): every constraint node with an effective level finer than its context's gets
   a domain step (:class:`~scheduler.placement.plan.Step`), in depth-first order (children before a
   node's own tasks, larger subtrees first). A step picks a domain at its level inside its context's
   domain and *claims* the counts of the tasks bound to it on that domain and its ancestors.
   Candidates are pruned by (a) the whole subtree's per-shape counts and resource totals against
   ``cap - claimed`` and (b) for each set of identical child steps (a :class:`Block`), the number of
   copies the candidate's sub-domains can host; every ancestor must stay within capacity after a
   claim (Hall's condition on the laminar family of domains, exact for a single shape). Candidates
   are tried tightest first (best fit); identical sibling steps ("twins") reuse the first twin's
   order and never go back in it (symmetry breaking). With several shapes the counts are only an
   upper bound, so a candidate must also pass two packing checks: the step's whole subtree fits the
   domain's machines alone (memoised per solve: a domain shown unable to host a subtree is never
   tried again for an identical one, a *nogood*), and the tasks bound so far in domains nested with
   it still fit together.
2. *Packing phase* (:mod:`scheduler.placement.packing`, CP-SAT through
   :mod:`scheduler.placement.exact`): once every step has a domain, tasks are put on machines one
   component at a time. A component that cannot be packed sends the domain phase back to the
   deepest step it involves (conflict-directed backjumping), skipping every later step's
   alternatives.

The work budget is :mod:`scheduler.placement.budget`. Invariants: the search restores all mutable
state before returning (it borrows the index's arrays); it is deterministic (domain ids follow
label-path order, every sort has a total key); every candidate tried costs one budget step, and an
exhausted budget yields ``UNDECIDED``, never ``INFEASIBLE``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import overload

from scheduler.placement import exact, packing
from scheduler.placement.budget import HOST_CHECK_STEPS, INFEASIBLE, UNDECIDED, Budget, GiveUp, OutOfBudget
from scheduler.placement.index import UNBOUNDED_FIT, DomainIndex, Shape
from scheduler.placement.machines import Machines, neg
from scheduler.placement.plan import Block, Counts, Plan, SpreadNeed, Step, Totals
from scheduler.placement.records import Component, Seat, Slot, record
from scheduler.placement.types import Vec


class GangSearch:
    """The search state of one gang over a :class:`DomainIndex` (see the module docstring): the
    domain phase's claims here, the shapes' counts and the machine classes in its :class:`Machines`.
    All are the index's own arrays, not copies: every search changes them only through paired
    place/unplace and claim/unclaim steps and restores them before it returns (also when its budget
    runs out), so a gang costs no allocation proportional to the pool."""

    def __init__(self, index: DomainIndex, shapes: Sequence[Shape]) -> None:
        self.machines = machines = Machines(index, shapes)
        self.index = index
        self.keys = index.keys
        self.shapes = machines.shapes
        self.nshapes = machines.nshapes
        self.path = index.path
        self.level = index.level
        self.anc = index.anc
        self.cap = machines.cap
        self.tot = machines.tot
        self.stats = machines.stats
        self.claimed, self.claimed_tot = index.claims(self.nshapes)
        self._hosts: dict[tuple[int, tuple[tuple[int, int], ...]], bool] = {}
        self._components: dict[tuple[tuple[int, tuple[tuple[int, int], ...]], ...], bool] = {}

    lazy_orders = True  # False: every candidate order is built whole (the reference the tests compare with)

    # -- counts --------------------------------------------------------------------------------------

    def descendants(self, d: int, level: int) -> list[int]:
        return self.index.descendants(d, level)

    def at_level(self, level: int) -> list[int]:
        return self.descendants(0, level)

    def copies(self, d: int, need: Counts, need_tot: Totals) -> int:
        """Upper bound on how many copies of a subtree with these needs fit in domain ``d``."""
        cap, claimed = self.cap[d], self.claimed[d]
        best = UNBOUNDED_FIT
        for s, k in need:
            n = (cap[s] - claimed[s]) // k
            if n < best:
                best = n
        tot, ct = self.tot[d], self.claimed_tot[d]
        for r, v in need_tot:
            n = (tot[r] - ct[r]) // v
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

    def fits(self, d: int, need: Counts, need_tot: Totals, blocks: list[Block], budget: Budget | None = None) -> bool:
        cap, claimed = self.cap[d], self.claimed[d]
        for s, k in need:
            if cap[s] - claimed[s] < k:
                return False
        tot, ct = self.tot[d], self.claimed_tot[d]
        for r, v in need_tot:
            if tot[r] - ct[r] < v:
                return False
        for block in blocks:
            if self.block_room(d, block, budget) < block.count:
                return False
        return True

    def claim(self, d: int, direct: Counts, direct_tot: Vec, sign: int) -> bool:
        """Add (sign=1) or remove (sign=-1) a claim on ``d`` and its ancestors; True if within capacity."""
        ok = True
        for a in self.anc[d]:
            claimed, cap = self.claimed[a], self.cap[a]
            for s, k in direct:
                claimed[s] += sign * k
                if claimed[s] > cap[s]:
                    ok = False
            ct, tot = self.claimed_tot[a], self.tot[a]
            for r in range(4):
                v = direct_tot[r]
                if v:
                    ct[r] += sign * v
                    if ct[r] > tot[r]:
                        ok = False
        return ok

    # -- the domain phase ------------------------------------------------------------------------------

    def search(self, plan: Plan, task_shape: Sequence[int], budget: Budget) -> list[Seat] | str:
        """Find a :class:`Seat` (machine name, domain) per task index, or INFEASIBLE / UNDECIDED.
        Restores all state."""
        steps = plan.steps
        n = len(steps)
        chosen = [-1] * n
        orders: list[Sequence[int] | None] = [None] * n
        nxt = [0] * n
        # A twin reads its source's order after the source has claimed: that order is built whole.
        sources = {step.twin for step in steps if step.twin >= 0}
        packed: dict[tuple[tuple[int, int], ...], Component | None] = {}
        root_ok = self.claim(0, plan.root_direct, plan.root_direct_tot, 1)
        try:
            if not root_ok or not self.fits(0, [], [], plan.root_blocks, budget):
                return INFEASIBLE
            i = 0
            while i >= 0:
                if i == n:
                    found, culprit = packing.pack(self.machines, plan, chosen, task_shape, budget, packed)
                    if found is not None:
                        return found
                    # Conflict-directed backjump: the unpackable component depends only on the choices
                    # of its own steps, so every step after the deepest of them is undone untried.
                    for k in range(n - 1, culprit, -1):
                        if chosen[k] >= 0:
                            self.claim(chosen[k], steps[k].direct, steps[k].direct_tot, -1)
                            chosen[k] = -1
                        orders[k] = None
                    i = culprit
                    if i < 0:
                        break
                if self._advance(i, steps, chosen, orders, nxt, budget, i not in sources):
                    i += 1
                else:
                    i -= 1
            return INFEASIBLE
        except OutOfBudget:
            return UNDECIDED
        finally:
            for i in range(n):
                if chosen[i] >= 0:
                    self.claim(chosen[i], steps[i].direct, steps[i].direct_tot, -1)
            self.claim(0, plan.root_direct, plan.root_direct_tot, -1)

    def _advance(
        self,
        i: int,
        steps: list[Step],
        chosen: list[int],
        orders: list[Sequence[int] | None],
        nxt: list[int],
        budget: Budget,
        lazy: bool = False,
    ) -> bool:
        step = steps[i]
        if chosen[i] >= 0:
            self.claim(chosen[i], step.direct, step.direct_tot, -1)
            chosen[i] = -1
        order = orders[i]
        recheck = step.twin >= 0
        if order is None:
            if recheck:
                order = orders[step.twin]
                nxt[i] = nxt[step.twin] - 1
            else:
                ctx = 0 if step.ctx < 0 else chosen[step.ctx]
                order = self._candidates(ctx, step, budget, steps, chosen, lazy and self.lazy_orders)
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
            if self.claim(d, step.direct, step.direct_tot, 1):
                chosen[i] = d
                return True
            self.claim(d, step.direct, step.direct_tot, -1)
        orders[i] = None
        return False

    def can_host(self, d: int, need: Counts, budget: Budget) -> bool:
        """Nogood memo: False when ``need`` (shape, count) provably cannot be packed on the machines of
        ``d`` even with nothing else placed there. Machine state is constant while a gang is solved, so a
        domain shown unable to host a subtree's tasks is never tried again for an identical subtree, in
        this search or a later one of the same solve. With one shape the counts are exact: no check."""
        if self.nshapes == 1 or not need:
            return True
        key = (d, tuple(need))
        got = self._hosts.get(key)
        if got is None:
            seq: list[Slot] = []
            for s, k in sorted(need, key=lambda sk: (neg(self.shapes[sk[0]].req), sk[0])):
                seq.extend(record(Slot, (len(seq) + j, s, d, 0)) for j in range(k))
            try:
                got = packing.pack_dfs(self.machines, seq, budget, HOST_CHECK_STEPS) is not None
            except GiveUp:
                got = exact.decide(self.machines, seq, budget) != INFEASIBLE  # undecided: the full search decides
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
            seq: list[Slot] = []
            level = self.level
            for g, (e, step) in enumerate(sorted(members, key=lambda m: (-level[m[0]], m[0]))):
                for s, k in sorted(step.direct, key=lambda sk: (neg(self.shapes[sk[0]].req), sk[0])):
                    seq.extend(record(Slot, (len(seq) + j, s, e, g)) for j in range(k))
            try:
                got = packing.pack_dfs(self.machines, seq, budget, HOST_CHECK_STEPS) is not None
            except GiveUp:
                got = exact.decide(self.machines, seq, budget) != INFEASIBLE
            self._components[key] = got
        return got

    def _candidates(
        self,
        ctx: int,
        step: Step,
        budget: Budget,
        steps: list[Step] | None = None,
        chosen: list[int] | None = None,
        lazy: bool = False,
    ) -> Sequence[int]:
        """Domains at the step's level inside ``ctx`` that pass the count bounds, tightest first; among
        equally tight ones, fewest free GPUs in the domain, then in its parent, then in each coarser
        ancestor (docs/design.md §5, packing): a gang that must open a fresh domain opens it where the
        pool is already fullest, so the free domains stay together in the emptier spines and zones.

        Relaxed spread (docs/design.md §5): a step binding a relaxed node's tasks ranks first by how many
        domains at that node's level they need; a step under a relaxed node first by its domain's
        ancestor at that node's level: one its earlier constrained descendants use, then one holding
        all of the node's tasks, else the one holding most.

        The filter and the (pull, spread, slack) part of the key are computed for every domain; the
        ancestors' free GPUs only per group of equal (pull, spread, slack), when the search first reads
        that far (:class:`_Order`; a small gang reads one candidate of ~1,000 domains). ``lazy`` is
        only for a step whose order is read again at the same claims (not a twin's source, see
        :meth:`search`); otherwise the whole order is built now. Both give the very same sequence."""
        tot, claimed_tot = self.tot, self.claimed_tot
        cap, claimed = self.cap, self.claimed
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
                        if self.level[a] == pull.level:
                            near.add(a)
        need, need_tot, blocks = step.need, step.need_tot, step.blocks
        groups: dict[tuple[int, int, int], list[int]] = {}
        for d in domains:
            # Inlined :meth:`fits` (the hot loop of a deep queue's first cycle), slack summed on the way.
            c, cl = cap[d], claimed[d]
            slack = 0
            for s, k in need:
                room = c[s] - cl[s] - k
                if room < 0:
                    break
                slack += room
            else:
                t, ct = tot[d], claimed_tot[d]
                for r, v in need_tot:
                    if t[r] - ct[r] < v:
                        break
                else:
                    if blocks and any(self.block_room(d, block, budget) < block.count for block in blocks):
                        continue
                    spread = self._spread_count(d, step.spread, budget) if step.spread else 0
                    first = 0
                    if pull is not None and self.level[d] > pull.level:
                        a = next(a for a in self.anc[d] if self.level[a] == pull.level)
                        if a in near:
                            first = -(1 << 30)
                        else:
                            ca, ra = self.cap[a], self.claimed[a]
                            first = -sum(min(max(ca[s] - ra[s], 0), k) for s, k in enumerate(pull.per_shape) if k)
                    key = (first, spread, slack)
                    group = groups.get(key)
                    if group is None:
                        groups[key] = [d]
                    else:
                        group.append(d)
        order = _Order(groups, self.anc, tot, claimed_tot)
        return order if lazy else order.whole()

    def _spread_count(self, d: int, needs: list[SpreadNeed], budget: Budget) -> int:
        """Estimated number of domains at their own levels that the relaxed nodes' tasks bound to a step
        need inside candidate ``d``, following the packing's spread order (one domain holding all the
        remaining tasks, else the one holding most of them); capacity claimed by other steps is left out."""
        total = 0
        cap, claimed, tot, ct = self.cap, self.claimed, self.tot, self.claimed_tot
        for lvl, counts, need_tot in needs:
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
                    cc, rc = cap[c], claimed[c]
                    cov = 0
                    for s, k in enumerate(left):
                        if k:
                            cov += min(max(cc[s] - rc[s], 0), k)
                    if cov >= want and all(tot[c][r] - ct[c][r] >= rest[r] for r in range(4)):
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
                cc, rc = cap[best], claimed[best]
                for s, k in enumerate(left):
                    if k:
                        take = min(max(cc[s] - rc[s], 0), k)
                        left[s] -= take
                        want -= take
                        req = self.shapes[s].req
                        for r in range(4):
                            rest[r] -= take * req[r]
        return total



class _Order(Sequence[int]):
    """A step's candidates in the order of :meth:`GangSearch._candidates`' key (pull, spread, slack,
    free GPUs of the domain and of each ancestor, domain id), sorted one group of equal (pull, spread,
    slack) at a time when first read: the groups come in key order and each is sorted by the rest of
    the key, so the sequence equals a sort of the whole list. Reads free GPUs and claims when a group
    is sorted, hence only valid while the claims are those of when it was built (docs/design.md §5)."""

    __slots__ = ("_anc", "_claimed_tot", "_done", "_keys", "_groups", "_len", "_tot")

    def __init__(
        self,
        groups: dict[tuple[int, int, int], list[int]],
        anc: list[tuple[int, ...]],
        tot: list[list[int]],
        claimed_tot: list[list[int]],
    ) -> None:
        self._groups = groups
        self._keys = sorted(groups, reverse=True)  # pop() yields the next group
        self._anc, self._tot, self._claimed_tot = anc, tot, claimed_tot
        self._done: list[int] = []
        self._len = sum(len(group) for group in groups.values())

    def __len__(self) -> int:
        return self._len

    @overload
    def __getitem__(self, i: int) -> int: ...

    @overload
    def __getitem__(self, i: slice) -> list[int]: ...

    def __getitem__(self, i: int | slice) -> int | list[int]:
        if isinstance(i, slice) or i < 0:
            return self.whole()[i]
        done = self._done
        while i >= len(done) and self._keys:
            self._sort_next()
        return done[i]

    def _sort_next(self) -> None:
        group = self._groups.pop(self._keys.pop())
        if len(group) > 1:
            anc, tot, ct = self._anc, self._tot, self._claimed_tot
            group.sort(key=lambda d: (tuple(tot[a][0] - ct[a][0] for a in anc[d]), d))
        self._done.extend(group)

    def whole(self) -> list[int]:
        while self._keys:
            self._sort_next()
        return self._done
