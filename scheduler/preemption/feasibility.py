"""The pool as the victim search sees it (docs/design.md §9): free capacity, what each relevant
candidate would release, and a memoised feasibility check over candidate subsets.

Subsets are bit masks over the relevant candidates (bit ``i`` = ``candidates[i]``, candidates sorted
by key). Releasing a subset adds its holdings back to the free capacity of their machines; the
preemptor "fits" a subset when :func:`scheduler.placement.solve` places it on the snapshot with that
subset released. Feasibility is monotone (more capacity never hurts a complete solver), so a check
first looks for a known feasible subset (whose placement stays valid on the superset: a *witness*) or a
known infeasible superset, then whether the machines hold, in total, as much as the gang asks (a
necessary condition: when they do not, "does not fit" without the solver), and solves only when none
decides.

Invariants: at most ``max_solves`` questions not inferred, solver calls and capacity answers together
(then :class:`BudgetSpent`); a witness is always a
placement that meets every required constraint and over-commits no machine on its subset's snapshot.
"""

from __future__ import annotations

import time
from collections.abc import Container, Sequence
from dataclasses import replace

from scheduler.placement import (
    ClusterSnapshot,
    DomainIndex,
    GangRequest,
    NodeState,
    Placement,
    Policy,
    Resources,
    Vec,
    solve,
)
from scheduler.preemption.types import Candidate

ZERO: Vec = (0, 0, 0, 0)


class BudgetSpent(Exception):
    """The search used its ``max_solves`` questions."""


def vec(res: Resources) -> Vec:
    return (res.gpu, res.cpu, res.memory, res.storage)


def add(a: Vec, b: Vec) -> Vec:
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2], a[3] + b[3])


def fits(free: Vec, req: Vec) -> bool:
    return free[0] >= req[0] and free[1] >= req[1] and free[2] >= req[2] and free[3] >= req[3]


def usable_nodes(snapshot: ClusterSnapshot, preemptor: GangRequest, released: dict[str, Vec]) -> frozenset[str]:
    """Machines that could host some task of the preemptor once ``released`` is added back: schedulable,
    not excluded for that task, labelled down to the finest key its required constraints name, and
    large enough for its request. A machine outside this set is in no placement, whatever is evicted."""
    level = {key: i for i, key in enumerate(snapshot.keys)}
    depth: dict[str, int] = {task: -1 for task in preemptor.tree.all_tasks()}
    for constraint in preemptor.tree.nodes():
        if not constraint.required:
            continue
        lvl = level.get(constraint.key)
        for task in constraint.all_tasks():
            # A required key the pool lacks: the task fits nowhere (the solver says unknown_key).
            depth[task] = max(depth[task], len(level) if lvl is None else lvl)
    # Tasks alike (same exclusions, request and depth) ask the same of a machine: each kind once.
    tasks = list(dict.fromkeys((t.nodes_excluded, vec(t.resources), depth.get(t.name, -1)) for t in preemptor.tasks))
    usable: set[str] = set()
    for node in snapshot.nodes:
        if not node.schedulable:
            continue
        free = add(vec(node.free), released.get(node.name, ZERO))
        labels = node.labels
        for excluded, req, lvl in tasks:
            if node.name in excluded or not fits(free, req):
                continue
            if lvl >= 0 and (lvl >= len(labels) or lvl >= len(snapshot.keys) or None in labels[: lvl + 1]):
                continue
            usable.add(node.name)
            break
    return frozenset(usable)


def held_per_node(candidate: Candidate, known: Container[str]) -> dict[str, Vec]:
    """The candidate's holdings summed per machine, for machines in ``known`` that it holds something on."""
    held: dict[str, Vec] = {}
    for name, res in candidate.holdings:
        if name in known:
            held[name] = add(held.get(name, ZERO), vec(res))
    return {name: v for name, v in held.items() if v != ZERO}


def bits_of(mask: int) -> list[int]:
    """The set bits of ``mask``, lowest first: by peeling the lowest bit when few are set (work
    proportional to the bits set), else by scanning its binary digits once (each peel of a wide
    integer copies it)."""
    if mask.bit_count() * 32 >= mask.bit_length():
        return [i for i, digit in enumerate(bin(mask)[:1:-1]) if digit == "1"]
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out


def mask_of(bits: set[int]) -> int:
    """The mask with exactly ``bits`` set (built from its binary digits when there are many)."""
    if len(bits) < 64:
        mask = 0
        for i in bits:
            mask |= 1 << i
        return mask
    digits = ["0"] * (max(bits) + 1)
    for i in bits:
        digits[i] = "1"
    return int("".join(reversed(digits)), 2)


class Budget:
    """Questions left to a search (solver calls, and capacity answers counted alike), shared by every
    :class:`Feasibility` it uses and, in :func:`~scheduler.preemption.near.victims_choose_near`, by
    the searches of every region: ``max_solves`` of them, and no new one after ``deadline``
    (``time.monotonic()``) once the first has run."""

    def __init__(self, max_solves: int, deadline: float | None = None) -> None:
        self.max_solves = max_solves
        self.deadline = deadline
        self.solves = 0

    def can_solve(self) -> bool:
        if self.solves >= self.max_solves:
            return False
        return self.solves == 0 or self.deadline is None or time.monotonic() < self.deadline


EMPTY: dict[str, Vec] = {}


class Feasibility:
    """The snapshot, the relevant candidates' releases and the memoised feasibility of subsets.

    Solves run on one :class:`~scheduler.placement.DomainIndex` of the snapshot, moved from the subset
    it last stood for to the next by releasing and taking back only the candidates that differ, or
    built afresh when that is most of the pool (the solver's result does not depend on whether it is
    given a snapshot or an index of it). :meth:`scoped` gives the same questions asked of one domain
    only: "does the preemptor fit *there*" (a placement there is one of the pool)."""

    def __init__(
        self,
        snapshot: ClusterSnapshot,
        preemptor: GangRequest,
        candidates: Sequence[Candidate],
        policy: Policy,
        budget: Budget,
        held: dict[int, dict[str, Vec]] | None = None,
    ) -> None:
        self.snapshot = snapshot
        self.preemptor = preemptor
        self.candidates = candidates
        self.policy = policy
        self.budget = budget
        self.position = {node.name: i for i, node in enumerate(snapshot.nodes)}
        # ``held``: each candidate's holdings per machine of the snapshot (by candidate, those holding
        # something), when the caller has them.
        if held is None:
            held = {i: h for i, c in enumerate(candidates) if (h := held_per_node(c, self.position))}
        self.held = held
        # Capacity arithmetic (:meth:`may_fit`): what the gang asks in all, what is free on the
        # schedulable machines and what each candidate gives back there.
        self.demand = ZERO
        for task in preemptor.tasks:
            self.demand = add(self.demand, vec(task.resources))
        gpu = cpu = memory = storage = 0
        names = set()
        for node in snapshot.nodes:
            if node.schedulable:
                free = node.free
                gpu += free.gpu if free.gpu > 0 else 0
                cpu += free.cpu if free.cpu > 0 else 0
                memory += free.memory if free.memory > 0 else 0
                storage += free.storage if free.storage > 0 else 0
                names.add(node.name)
        self.base: Vec = (gpu, cpu, memory, storage)
        self.gain: dict[int, Vec] = {}
        self.gaining = 0  # the candidates that give something back there
        self.everything = self.base  # what is there with every candidate evicted
        for i, per_node in held.items():
            total = ZERO
            for name, v in per_node.items():
                if name in names:
                    total = add(total, v)
            if total != ZERO:
                self.gain[i] = total
                self.gaining |= 1 << i
                self.everything = add(self.everything, total)
        self.known: dict[int, Placement | None] = {}
        self.feasible: list[tuple[int, Placement]] = []
        self.infeasible: list[int] = []
        self.direct: set[int] = set()  # subsets whose placement the solver computed on exactly that subset
        self.index: DomainIndex | None = None  # built on the first solve
        self.at = 0  # the subset the index stands for (released on it)

    @property
    def solves(self) -> int:
        return self.budget.solves

    def scoped(self, machines: frozenset[str], mask: int) -> Feasibility:
        """The same questions on ``machines`` only, for the candidates of ``mask`` (the others release
        nothing there); the budget is shared."""
        snapshot = replace(self.snapshot, nodes=tuple(n for n in self.snapshot.nodes if n.name in machines))
        held = {}
        for i in bits_of(mask):
            there = {name: v for name, v in self.held.get(i, EMPTY).items() if name in machines}
            if there:
                held[i] = there
        scoped = Feasibility(snapshot, self.preemptor, self.candidates, self.policy, self.budget, held)
        # What is known carries over: a subset that does not fit the pool fits none of its domains; a
        # witness lying on these machines is one here.
        for sup in self.infeasible:
            scoped.learn(sup, None)
        for sub, placement in self.feasible:
            if placement.nodes <= machines:
                scoped.learn(sub, placement)
                if sub in self.direct:
                    scoped.direct.add(sub)
        return scoped

    def bits(self, mask: int) -> list[int]:
        return bits_of(mask)

    def released(self, mask: int) -> dict[str, Vec]:
        """Capacity given back per machine when the subset is evicted."""
        total: dict[str, Vec] = {}
        for i in bits_of(mask):
            for name, v in self.held.get(i, EMPTY).items():
                have = total.get(name)
                total[name] = v if have is None else add(have, v)
        return total

    def index_for(self, mask: int) -> DomainIndex:
        """The index with exactly ``mask`` released: moved by the difference from the subset it stood
        for, or built afresh when more machines would change than an eighth of the pool."""
        give = [(name, v) for i in bits_of(mask & ~self.at) for name, v in self.held.get(i, EMPTY).items()]
        take = [(name, v) for i in bits_of(self.at & ~mask) for name, v in self.held.get(i, EMPTY).items()]
        if self.index is None or 8 * (len(give) + len(take)) > len(self.snapshot.nodes):
            excluded = frozenset().union(*(task.nodes_excluded for task in self.preemptor.tasks))
            self.index = DomainIndex(self.snapshot_for(mask), excluded)
        else:
            if take:
                self.index.place(take)
            if give:
                self.index.release(give)
        self.at = mask
        return self.index

    def snapshot_for(self, mask: int) -> ClusterSnapshot:
        """The snapshot with ``mask`` released."""
        released = self.released(mask)
        if not released:
            return self.snapshot
        nodes = list(self.snapshot.nodes)
        for name, v in released.items():
            at = self.position[name]
            node = nodes[at]
            nodes[at] = NodeState(node.name, node.labels, Resources(*add(vec(node.free), v)), node.schedulable)
        return ClusterSnapshot(pool=self.snapshot.pool, keys=self.snapshot.keys, nodes=tuple(nodes))

    def inferred(self, mask: int) -> tuple[bool, Placement | None]:
        """(decided, witness) from what is known, without solving."""
        if mask in self.known:
            return True, self.known[mask]
        for sub, placement in self.feasible:
            if sub & ~mask == 0:
                return True, placement
        for sup in self.infeasible:
            if mask & ~sup == 0:
                return True, None
        return False, None

    def check(self, mask: int) -> Placement | None:
        """A witness placement when the preemptor fits with ``mask`` evicted, else None. "Undecided"
        counts as infeasible: a set is only chosen on a placement the solver found."""
        decided, witness = self.inferred(mask)
        if decided:
            return witness
        if not self.can_solve():
            raise BudgetSpent
        if not self.may_fit(mask):
            # Decided by arithmetic, no solver call, but a step of the search like one: the budget
            # bounds the search's work, which continues past this answer as past a solve's.
            self.budget.solves += 1
            self.known[mask] = None
            return None
        return self.solve(mask)

    def capacity(self, mask: int) -> Vec:
        """What the schedulable machines hold of each resource with ``mask`` evicted: summed over the
        candidates of ``mask`` or, when fewer stay, taken from everything over those that stay."""
        gain = self.gain
        mask &= self.gaining
        stay = self.gaining & ~mask
        if stay.bit_count() < mask.bit_count():
            total = self.everything
            for i in bits_of(stay):
                have = gain[i]
                total = (total[0] - have[0], total[1] - have[1], total[2] - have[2], total[3] - have[3])
            return total
        total = self.base
        for i in bits_of(mask):
            total = add(total, gain[i])
        return total

    def enough(self, capacity: Vec) -> bool:
        """Whether ``capacity`` holds as much of every resource as the gang asks in all."""
        return fits(capacity, self.demand)

    def may_fit(self, mask: int) -> bool:
        """Whether the schedulable machines hold, with ``mask`` evicted, as much of every resource as
        the gang asks in all: a necessary condition (no placement exceeds the capacity), so False
        decides "does not fit" without the solver."""
        return self.enough(self.capacity(mask))

    def cumulative(self, order: Sequence[int]) -> list[Vec]:
        """``out[k]``: what the first ``k`` candidates of ``order`` give back on the schedulable machines."""
        out = [ZERO]
        gain = self.gain
        for i in order:
            have = gain.get(i)
            out.append(out[-1] if have is None else add(out[-1], have))
        return out

    def first_enough(self, have: Vec, cumulative: Sequence[Vec], upto: int) -> int:
        """The smallest ``k <= upto`` for which ``have`` plus ``cumulative[k]`` is :meth:`enough`
        (``upto`` when none is: the caller knows that prefix fits). Binary search: the sums grow with
        ``k``. No prefix shorter than the result fits, so no question about one needs asking."""
        lo, hi = 0, upto
        while lo < hi:
            mid = (lo + hi) // 2
            if self.enough(add(have, cumulative[mid])):
                hi = mid
            else:
                lo = mid + 1
        return lo

    def can_solve(self) -> bool:
        """Whether another solve fits the budget: ``max_solves`` calls, and the wall-clock deadline once
        the first (the all-evicted case, which decides completeness) has run."""
        return self.budget.can_solve()

    def solve(self, mask: int) -> Placement | None:
        if not self.can_solve():
            raise BudgetSpent
        self.budget.solves += 1
        result = solve(self.index_for(mask), self.preemptor, self.policy)
        placement = result if isinstance(result, Placement) else None
        self.direct.add(mask)
        self.learn(mask, placement)
        return placement

    def learn(self, mask: int, placement: Placement | None) -> None:
        self.known[mask] = placement
        if placement is None:
            self.infeasible.append(mask)
        else:
            self.feasible.append((mask, placement))

    def cover(self, placement: Placement, allowed: int, order: Sequence[int]) -> int:
        """The subset of ``allowed`` that frees what ``placement`` needs beyond the current free
        capacity, machine by machine, taking candidates in ``order`` (cheapest first), then dropping
        every chosen candidate whose release is not needed (most expensive first). Checked by
        arithmetic, no solve; ``placement`` is recorded as the subset's witness. Needs ``placement`` to
        be valid with ``allowed`` evicted (else ``allowed`` is returned unchanged)."""
        requests = {t.name: vec(t.resources) for t in self.preemptor.tasks}
        demand: dict[str, Vec] = {}
        for task, name in placement.assignments:
            demand[name] = add(demand.get(name, ZERO), requests[task])
        nodes = self.snapshot.nodes
        deficit: dict[str, Vec] = {}
        for name, want in sorted(demand.items()):
            free = vec(nodes[self.position[name]].free)
            short = tuple(max(0, w - f) for w, f in zip(want, free, strict=True))
            if short != ZERO:
                deficit[name] = short  # type: ignore[assignment]
        # The allowed candidates holding on each machine short of capacity, cheapest first.
        holders: dict[str, list[int]] = {name: [] for name in deficit}
        digits = bin(allowed)[:1:-1]  # digit i: candidate i is allowed (one scan, not a shift per test)
        ranked = [i for i in order if i < len(digits) and digits[i] == "1"]
        for i in ranked:
            for name in self.held.get(i, EMPTY):
                if name in holders:
                    holders[name].append(i)
        freed: dict[str, Vec] = {}
        chosen: set[int] = set()
        for name, short in deficit.items():
            for i in holders[name]:
                if fits(freed.get(name, ZERO), short):
                    break
                if i not in chosen:
                    chosen.add(i)
                    for where, v in self.held.get(i, EMPTY).items():
                        freed[where] = add(freed.get(where, ZERO), v)
        if not all(fits(freed.get(name, ZERO), short) for name, short in deficit.items()):
            return allowed
        for i in reversed(ranked):
            if i not in chosen:
                continue
            held = self.held.get(i, EMPTY)
            if all(fits(tuple(f - h for f, h in zip(freed[name], held[name], strict=True)), deficit[name])  # type: ignore[arg-type]
                   for name in held if name in deficit):
                chosen.discard(i)
                for where, v in held.items():
                    freed[where] = tuple(f - h for f, h in zip(freed[where], v, strict=True))  # type: ignore[assignment]
        mask = mask_of(chosen)
        if not self.inferred(mask)[0]:
            self.learn(mask, placement)
        return mask
