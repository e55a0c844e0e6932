"""The machine state of one gang's packing over a :class:`~scheduler.placement.index.DomainIndex`
(docs/design.md §5): the machine classes and the per-domain counts of the gang's shapes, the best-fit
order the packing tries machines in, and :meth:`Machines.place` / :meth:`Machines.unplace`, which keep
classes and counts consistent. The packers themselves are :mod:`scheduler.placement.packing`.

Invariants: the state is the index's own arrays (borrowed, not copied); every place is undone by an
unplace before a packing returns; every order has a total key. Pure: stdlib only.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from scheduler.placement.index import DomainIndex, Shape, fit_count
from scheduler.placement.records import ClassKey, Move, Seat, Slot, record
from scheduler.placement.types import Vec

#: One entry of :meth:`Machines.choices`: (rank, domain, machine class in that domain or None for the
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


def neg(v: Vec) -> Vec:
    return (-v[0], -v[1], -v[2], -v[3])


class Machines:
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

    # -- a relaxed node's spread -----------------------------------------------------------------------

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
    def mark(self, sp: Spread | None, dom: int, sign: int) -> None:
        if sp is None:
            return
        level, used = self.level, sp.used
        for a in self.anc[dom]:
            if level[a] <= sp.level:
                used[a] = used.get(a, 0) + sign
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

    def best(self, d: int, s: int, sp: Spread | None = None) -> tuple[int, ClassKey] | None:
        """First candidate of :meth:`ordered` without building the whole order."""
        while True:
            choices = self.choices(d, s, sp, first=True)
            if not choices:
                return None
            _k, c, key = choices[0]
            if key is not None:
                return c, key
            d = c

    def ordered(self, d: int, s: int, sp: Spread | None = None) -> Iterator[tuple[int, ClassKey]]:
        """Machine classes under ``d`` that fit shape ``s``, in the order of :meth:`choices`."""
        for _k, c, key in self.choices(d, s, sp):
            if key is not None:
                yield c, key
            else:
                yield from self.ordered(c, s, sp)
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
        return record(Move, (d, key, nkey, name, s))

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
