"""The packing phase of one gang's search: tasks onto machines once the domain phase bound every step
(:mod:`scheduler.placement.search`) to a domain (docs/design.md §5).

Tasks are put on machines finest bound domain first, one *component* (bound domains nested in one
another; components share no machine) at a time. With one shape a greedy best-fit descent cannot fail
(laminar Hall); otherwise a forward-checked depth-first search over machine classes, and CP-SAT
(:mod:`scheduler.placement.exact`) when that gives up. A component that cannot be packed names the
deepest step it involves (the *culprit*), so the domain phase can backjump to it.

Invariants: every :meth:`Packer.place` is undone by :meth:`Packer.unplace` before a packing returns
(the packer borrows the index's classes and counts, it does not copy them); deterministic (every sort
has a total key); each machine class tried costs one budget step. Pure: stdlib only (CP-SAT through
:mod:`scheduler.placement.exact`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from scheduler.placement import exact
from scheduler.placement.budget import INFEASIBLE, PACK_DFS_STEPS, UNDECIDED, Budget, GiveUp, OutOfBudget
from scheduler.placement.index import DomainIndex, Shape, fit_count
from scheduler.placement.plan import Plan
from scheduler.placement.records import NO_SEAT, ClassKey, Move, Seat, Seated, Slot
from scheduler.placement.types import Vec

#: One entry of :meth:`Packer.choices`: (rank, domain, machine class in that domain or None for the
#: domain itself). Plain tuples: the descent builds one per machine class and sub-domain it ranks.
Choice = tuple[tuple[Any, ...], int, ClassKey | None]


@dataclass(slots=True)
class Spread:
    """The tasks of a relaxed node in one bound domain: spread over the fewest domains of ``level``.
    ``used`` counts the bundle's placed tasks per domain at that level or coarser (shared by the bundle's
    positions); ``left`` is, per shape, the bundle's tasks from this position on."""

    level: int
    used: dict[int, int]
    left: tuple[int, ...]


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


def neg(v: Vec) -> Vec:
    return (-v[0], -v[1], -v[2], -v[3])


class Packer:
    """The machine state of one gang over a :class:`DomainIndex`: its shapes' per-domain counts
    (``cap``, ``tot``) and the machine classes, all the index's own arrays. :meth:`place` and
    :meth:`unplace` keep them consistent; every packing undoes its places before it returns."""

    def __init__(self, index: DomainIndex, shapes: Sequence[Shape]) -> None:
        table = index.table(shapes)
        self.index = index
        self.shapes = list(shapes)
        self.nshapes = len(shapes)
        self._fit_cache = table.fit_cache
        self.level = index.level
        self.children = index.children
        self.anc = index.anc
        self.classes = index.classes
        self.cap: list[list[int]] = table.cap
        self.tot: list[list[int]] = table.tot
        self.stats = table.stats

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

    # -- components --------------------------------------------------------------------------------

    def pack(
        self,
        plan: Plan,
        chosen: list[int],
        task_shape: Sequence[int],
        budget: Budget,
        packed: dict[tuple[tuple[int, int], ...], list[Seated] | None],
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
        end = self.index.end
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
                got = packed[key] = self._pack_component(plan, comp, n, task_shape, budget)
            if got is None:
                return Packed(None, deepest if deepest < n else n - 1)
            for t, name, dom in got:
                result[t] = Seat(name, dom)
        return Packed(result, -1)

    def _pack_component(
        self, plan: Plan, comp: list[Bound], n: int, task_shape: Sequence[int], budget: Budget
    ) -> list[Seated] | None:
        # Finest bound domain first (the root's tasks last); a bundle is the tasks of one tree node in one
        # bound domain, so a relaxed node's tasks are packed into the fewest domains on their own.
        # A relaxed node's tasks come first in their bound domain and are spread over the fewest
        # domains at the node's own level (``spread``: bundle -> that level).
        level = self.level
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
                    neg(self.shapes[task_shape[t]].req),
                    task_shape[t],
                    t,
                ),
            )
            for t in ordered:
                bundle = g * (len(owner) + 2) + (owner[t] + 1 if owner else 0)
                lvl = own_spread(t)
                if lvl > level[d]:
                    spread[bundle] = lvl
                seq.append(Slot(t, task_shape[t], d, bundle))
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
                            for a in self.anc[dom]:
                                if level[a] <= lvl:
                                    marks[a] = marks.get(a, 0) + 1
        found: list[Seat] | None = None
        if self.nshapes == 1:
            budget.spend(len(seq))
            found = self.pack_greedy(seq, spread, pre)
        if found is None:
            try:
                found = self.pack_dfs(seq, budget, PACK_DFS_STEPS if self.nshapes > 1 else None, spread, pre)
            except GiveUp:
                decided = exact.decide(self, seq, budget)
                if decided == UNDECIDED:
                    raise OutOfBudget from None
                found = None if decided == INFEASIBLE else decided  # type: ignore[assignment]
        if found is None:
            return None
        if spread and self.nshapes > 1 and len(spread) == 1 and not pre:
            found = exact.spread_tighten(self, seq, found, spread, budget)
        return [Seated(seq[p].task, found[p].machine, found[p].domain) for p in range(len(seq))]

    def spread_used(self, seq: list[Slot], found: list[Seat], bundle: int, lvl: int) -> tuple[int, int]:
        """(domains of level ``lvl``, coarser domains under the bound one) that ``bundle`` uses."""
        level, anc = self.level, self.anc
        mine: set[object] = set()
        above: set[int] = set()
        for p, slot in enumerate(seq):
            if slot.bundle != bundle:
                continue
            name, dom = found[p]
            at = [a for a in anc[dom] if level[a] == lvl]
            mine.add(at[0] if at else name)
            above.update(a for a in anc[dom] if level[slot.domain] < level[a] < lvl)
        return len(mine), len(above)

    # -- spread bookkeeping ----------------------------------------------------------------------------

    def _spread_state(
        self, seq: list[Slot], spread: dict[int, int] | None, pre: dict[int, dict[int, int]] | None = None
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

    # -- the two packers ---------------------------------------------------------------------------------

    def pack_greedy(
        self, seq: list[Slot], spread: dict[int, int] | None = None, pre: dict[int, dict[int, int]] | None = None
    ) -> list[Seat] | None:
        """Best-fit descent, no backtracking; the result is indexed by position in ``seq``."""
        done: list[Move] = []
        result: list[Seat] = [NO_SEAT] * len(seq)
        spreads = self._spread_state(seq, spread, pre)
        try:
            for p, (_t, s, d, _g) in enumerate(seq):
                sp = spreads[p]
                pick = self._best(d, s, sp)
                if pick is None:
                    return None
                dom, key = pick
                move = self.place(dom, key, s)
                self._mark(sp, dom, 1)
                done.append(move)
                result[p] = Seat(move.machine, dom)
            return result
        finally:
            for move in reversed(done):
                self.unplace(move)

    def pack_dfs(
        self,
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
        spreads = self._spread_state(seq, spread, pre)
        spent = 0
        p = 0
        try:
            while p >= 0:
                if p == total:
                    return list(result)
                _t, s, d, g = seq[p]
                move = placed[p]
                if move is not None:
                    self.unplace(move)
                    self._mark(spreads[p], move.domain, -1)
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
                    if key not in self.classes[dom]:
                        continue  # emptied by an earlier placement on this path
                    budget.spend(self.nshapes)
                    move = self.place(dom, key, s)
                    self._mark(spreads[p], dom, 1)
                    placed[p] = move
                    keys[p] = ckey
                    result[p] = Seat(move.machine, dom)
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
                    self.unplace(move)
                    self._mark(spreads[q], move.domain, -1)

    # -- the best-fit order ------------------------------------------------------------------------------

    def choices(self, d: int, s: int, sp: Spread | None, *, first: bool = False) -> list[Choice]:
        """What sits under ``d`` for a task of shape ``s``, best first (:data:`Choice` entries).

        Best fit (the packing rule, docs/design.md §5): machines and sub-domains are ranked together by
        how many tasks of the shape they still hold, tightest first (then free capacity), so a pool with
        a per-host key packs like one without and large free machines and domains stay whole. Above
        the level of a relaxed node (``sp``), a bundle spreads over the fewest domains of that level
        instead, chosen among all of them under ``d``: domains it (or its constrained descendants)
        already uses first, then one that holds all its remaining tasks (tightest), else the largest
        (most of its remaining tasks); ties go to the domain that opens the fewest new coarser domains;
        machines missing the labels down to that level last.

        ``first``: only the best entry is wanted (it is the same): when the bundle already uses a domain
        of the level under ``d`` that still fits the shape, only those domains are ranked, since each
        of them comes before every domain it does not use (no scan of all the level's domains)."""
        out: list[Choice] = []
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

    def _best(self, d: int, s: int, sp: Spread | None = None) -> tuple[int, ClassKey] | None:
        """First candidate of :meth:`_ordered` without building the whole order."""
        while True:
            choices = self.choices(d, s, sp, first=True)
            if not choices:
                return None
            _k, c, key = choices[0]
            if key is not None:
                return c, key
            d = c

    def _ordered(self, d: int, s: int, sp: Spread | None = None) -> Iterator[tuple[int, ClassKey]]:
        """Machine classes under ``d`` that fit shape ``s``, in the order of :meth:`choices`."""
        for _k, c, key in self.choices(d, s, sp):
            if key is not None:
                yield c, key
            else:
                yield from self._ordered(c, s, sp)

    # -- one machine ---------------------------------------------------------------------------------------

    def place(self, d: int, key: ClassKey, s: int) -> Move:
        """Take a machine of class ``key`` in domain ``d`` for a task of shape ``s`` (the smallest name)."""
        classes = self.classes[d]
        names = classes[key]
        name = names.pop()
        if not names:
            del classes[key]
        free, sp = key
        req = self.shapes[s].req
        nfree = (free[0] - req[0], free[1] - req[1], free[2] - req[2], free[3] - req[3])
        nkey: ClassKey | None = (nfree, sp)
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
        return Move(d, key, nkey, name, s)

    def unplace(self, move: Move) -> None:
        """Undo :meth:`place` (moves are undone in reverse order)."""
        d, key, nkey, name, s = move
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
