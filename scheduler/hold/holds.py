"""The starvation guard's holds within one walk (docs/design.md §6, §9): the machines kept for starving
gangs, and for HIGH or NORMAL gangs that wait before they evict LOW work, in queue order and on
disjoint machines. While a gang is decided, the free capacity of the holds that bind it is taken off
the walk's index (:meth:`Holds.bind`), and what it decides there is memoised apart from a decision on
the whole pool (:meth:`Holds.memo_key`). No database: the walk gives the index and the holders.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from scheduler.hold.ends import Holder, soonest_hold, where
from scheduler.placement import ClusterSnapshot, DomainIndex, GangRequest, Placement, Policy, Vec, solve


@dataclass(frozen=True, slots=True)
class Hold:
    """One of the starvation guard's holds: the machines kept for a starving gang, which binds the
    gangs of its priority and below behind it in the queue (those after ``order``)."""

    order: list[Any]  # the starving gang's place in the queue
    machines: tuple[str, ...] | None  # None: no placement on the idle pool, hold every such gang (first hold)
    # By expected end: when the kept machines are free (epoch seconds; None: held by the idle pool's
    # placement, no time), whether that time is a bound, and the machines as people name them.
    free_by: float | None = None
    bounded: bool = False
    where: str = ""
    # A HIGH or NORMAL gang waiting before it evicts LOW work (the pool's minimum runtime, docs/design.md
    # §9): its machines are kept from LOW gangs only, until ``free_by`` (when it evicts; None: a gang that
    # found no victims, for as long as it waits); not a starving gang.
    low_only: bool = False


class Holds:
    """The holds of one walk, in queue order, on disjoint machines. ``active``: the indexes of those
    whose free capacity is taken off the index now (``blocked``: what was taken)."""

    def __init__(self, index: Callable[[], DomainIndex], pool_name: str) -> None:
        self._index = index
        self._pool_name = pool_name
        self._holds: list[Hold] = []
        self.active: tuple[int, ...] = ()
        self.blocked: list[tuple[str, Vec]] = []

    def __getitem__(self, i: int) -> Hold:
        return self._holds[i]

    def __iter__(self) -> Iterator[Hold]:
        return iter(self._holds)

    def binding(self, order: list[Any], *, low: bool) -> list[int]:
        """The holds that bind a gang at ``order`` (``low``: of LOW priority): those ahead of it, but a
        hold kept from LOW work only binds LOW gangs."""
        return [i for i, hold in enumerate(self._holds) if order > hold.order and (low or not hold.low_only)]

    def starving(self) -> list[Hold]:
        """The starvation guard's holds (not the machines kept by gangs waiting before they evict)."""
        return [hold for hold in self._holds if not hold.low_only]

    def bind(self, which: tuple[int, ...]) -> None:
        """Take the free capacity of the holds ``which`` off the index while a gang they bind is
        decided (its verdicts and victim searches are memoised apart: :meth:`memo_key`), and give
        back that of the others."""
        if which == self.active:
            return
        index = self._index()
        if self.blocked:
            index.release(self.blocked)
            self.blocked = []
        if which:
            nodes = index.nodes
            for i in which:
                for name in self._holds[i].machines or ():
                    f = nodes[name].free
                    if f.gpu or f.cpu or f.memory or f.storage:
                        self.blocked.append((name, (f.gpu, f.cpu, f.memory, f.storage)))
            index.place(self.blocked)
        self.active = which

    @contextmanager
    def unbound(self) -> Iterator[None]:
        """The whole pool on the index for a while, then the same holds taken off again."""
        active = self.active
        self.bind(())
        try:
            yield
        finally:
            self.bind(active)

    def refresh(self) -> None:
        """Take off the held machines again what was freed there (victims evicted)."""
        with self.unbound():
            pass

    def kept(self) -> frozenset[str]:
        """The machines of the holds taken off the index now."""
        return frozenset(name for i in self.active for name in self._holds[i].machines or ())

    def memo_key(self, signature: str) -> str:
        """A gang's signature, told apart while kept machines are held back (a verdict there is not
        one on the whole pool; each set of holds held back is its own view)."""
        kept = [i for i in self.active if self._holds[i].machines]
        if not signature or not kept:
            return signature
        return f"{signature}|held" if kept == [0] else f"{signature}|held{','.join(map(str, kept))}"

    def seek(self, order: list[Any], request: GangRequest, holders: list[Holder], policy: Policy,
             idle: Callable[[], DomainIndex]) -> Hold | None:
        """Keep machines for a starving gang: those of the placement where it can start soonest as the
        gangs holding the pool end (:func:`scheduler.hold.soonest_hold`) on the machines no earlier
        hold keeps, else, for the first hold only, those of its placement on the idle pool (None: hold
        every such gang). A later gang without a soonest placement gets no hold (None)."""
        hold: Hold | None = None
        with self.unbound():  # sought on the whole pool but the earlier holds' machines
            taken = {name for earlier in self._holds for name in earlier.machines or ()}
            if holders:
                snapshot = self._index().snapshot(self._pool_name)
                if taken:
                    snapshot = ClusterSnapshot(snapshot.pool, snapshot.keys,
                                               tuple(node for node in snapshot.nodes if node.name not in taken))
                found = soonest_hold(snapshot, request, holders, policy)
                if found is not None:
                    hold = Hold(order, tuple(sorted(found.machines)), found.free_by, found.bounded,
                                where(snapshot, found.machines))
            if hold is None and not self.starving():
                outcome = solve(idle(), request, policy)
                hold = Hold(order, tuple(sorted(outcome.nodes)) if isinstance(outcome, Placement) else None)
            if hold is not None:
                self._holds.append(hold)
        return hold

    def keep_from_low(self, order: list[Any], there: frozenset[str], until: float | None) -> str:
        """Keep the machines ``there`` from the LOW gangs behind ``order`` until ``until`` (None: as
        long as it waits), a hold binding LOW gangs only; the machines as a reason names them."""
        index = self._index()
        nodes = index.nodes
        named = where(ClusterSnapshot(self._pool_name, index.keys, tuple(nodes[name] for name in sorted(there))), there)
        self._holds.append(Hold(order, tuple(sorted(there)), until, False, named, low_only=True))
        return named
