"""The pool as the victim search sees it (docs/design.md §9): free capacity, what each relevant
candidate would release, and a memoised feasibility check over candidate subsets.

Subsets are bit masks over the relevant candidates (bit ``i`` = ``candidates[i]``, candidates sorted
by key). Releasing a subset adds its holdings back to the free capacity of their machines; the
preemptor "fits" a subset when :func:`scheduler.placement.solve` places it on the snapshot with that
subset released. Feasibility is monotone (more capacity never hurts a complete solver), so a check
first looks for a known feasible subset (whose placement stays valid on the superset: a *witness*) or a
known infeasible superset, and solves only when neither decides.

Invariants: at most ``max_solves`` solver calls (then :class:`BudgetSpent`); a witness is always a
placement that meets every required constraint and over-commits no machine on its subset's snapshot.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence

from scheduler.placement import ClusterSnapshot, GangRequest, NodeState, Placement, Policy, Resources, Vec, solve
from scheduler.preemption.types import Candidate

ZERO: Vec = (0, 0, 0, 0)


class BudgetSpent(Exception):
    """The search used its ``max_solves`` solver calls."""


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
    tasks = [(t.nodes_excluded, vec(t.resources), depth.get(t.name, -1)) for t in preemptor.tasks]
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


def held_per_node(candidate: Candidate, names: Iterable[str]) -> dict[str, Vec]:
    """The candidate's holdings summed per machine, for machines in ``names`` that it holds something on."""
    known = set(names)
    held: dict[str, Vec] = {}
    for name, res in candidate.holdings:
        if name in known:
            held[name] = add(held.get(name, ZERO), vec(res))
    return {name: v for name, v in held.items() if v != ZERO}


class Feasibility:
    """The snapshot, the relevant candidates' releases and the memoised feasibility of subsets."""

    def __init__(
        self,
        snapshot: ClusterSnapshot,
        preemptor: GangRequest,
        candidates: Sequence[Candidate],
        policy: Policy,
        max_solves: int,
        deadline: float | None = None,
    ) -> None:
        self.snapshot = snapshot
        self.preemptor = preemptor
        self.candidates = candidates
        self.policy = policy
        self.max_solves = max_solves
        self.deadline = deadline  # time.monotonic() after which no further solve starts (the first always runs)
        self.solves = 0
        self.position = {node.name: i for i, node in enumerate(snapshot.nodes)}
        self.held = [held_per_node(c, self.position) for c in candidates]
        self.known: dict[int, Placement | None] = {}
        self.feasible: list[tuple[int, Placement]] = []
        self.infeasible: list[int] = []
        self.direct: set[int] = set()  # subsets whose placement the solver computed on exactly that subset

    def bits(self, mask: int) -> list[int]:
        return [i for i in range(len(self.candidates)) if mask >> i & 1]

    def released(self, mask: int) -> dict[str, Vec]:
        """Capacity given back per machine when the subset is evicted."""
        total: dict[str, Vec] = {}
        for i in self.bits(mask):
            for name, v in self.held[i].items():
                total[name] = add(total.get(name, ZERO), v)
        return total

    def snapshot_for(self, mask: int) -> ClusterSnapshot:
        nodes = list(self.snapshot.nodes)
        for name, v in self.released(mask).items():
            node = nodes[self.position[name]]
            nodes[self.position[name]] = NodeState(
                name=node.name,
                labels=node.labels,
                free=Resources(*add(vec(node.free), v)),
                schedulable=node.schedulable,
            )
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
        return self.solve(mask)

    def can_solve(self) -> bool:
        """Whether another solve fits the budget: ``max_solves`` calls, and the wall-clock deadline once
        the first (the all-evicted case, which decides completeness) has run."""
        if self.solves >= self.max_solves:
            return False
        return self.solves == 0 or self.deadline is None or time.monotonic() < self.deadline

    def solve(self, mask: int) -> Placement | None:
        if not self.can_solve():
            raise BudgetSpent
        self.solves += 1
        result = solve(self.snapshot_for(mask), self.preemptor, self.policy)
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

        def covered(mask: int) -> bool:
            released = self.released(mask)
            return all(fits(released.get(name, ZERO), short) for name, short in deficit.items())

        ranked = [i for i in order if allowed >> i & 1]
        chosen = 0
        for name in deficit:
            for i in ranked:
                if covered(chosen) or fits(self.released(chosen).get(name, ZERO), deficit[name]):
                    break
                if name in self.held[i] and not chosen >> i & 1:
                    chosen |= 1 << i
        if not covered(chosen):
            return allowed
        for i in reversed(ranked):
            if chosen >> i & 1 and covered(chosen & ~(1 << i)):
                chosen &= ~(1 << i)
        if not self.inferred(chosen)[0]:
            self.learn(chosen, placement)
        return chosen
