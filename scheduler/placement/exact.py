"""The CP-SAT adapter: exact packing of one component's tasks on machines with OR-Tools CP-SAT
(docs/design.md §5).

Used only where the depth-first packing of :mod:`scheduler.placement.packing` gives up: several task
shapes and several resources make packing inside a domain a (small) bin-packing problem, which a
depth-first search over machine classes can take exponentially long to decide. The model counts, per
(task type, machine), how many tasks of the type the machine takes (tasks of one type are
interchangeable, so there is no task symmetry to break):

- a *type* is (shape, bound domain): ``count`` tasks that must sit on machines under that domain;
- ``n[type, m]`` in ``0 .. fit(machine, shape)`` for each machine ``m`` under the type's domain;
- per type, the counts add up to ``count``; per machine and resource, the requests fit the free amount.

Deterministic: one worker, a fixed seed and a *deterministic* time limit (CP-SAT's work units, not the
wall clock), so equal inputs give equal answers on any machine.

:func:`pack_exact` is the model alone (requests and machines in, counts out); :func:`decide` and
:func:`spread_tighten` translate a packing sequence of :mod:`scheduler.placement.packing` into it
(:class:`ExactModel`) and its answer back, spending one budget step per variable. Pure: stdlib, and
OR-Tools imported on first use.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from scheduler.placement import budget as verdicts
from scheduler.placement.machines import Machines
from scheduler.placement.records import NO_SEAT, Seat, Slot, record
from scheduler.placement.types import Vec

FEASIBLE = "feasible"
INFEASIBLE = "infeasible"
UNKNOWN = "unknown"

EXACT_WORK = 2.0  # CP-SAT deterministic time limit of one exact packing (work units, not seconds)
EXACT_MAX_VARS = 200_000  # larger components are left to the depth-first search


@dataclass(frozen=True, slots=True)
class Machine:
    name: str
    free: Vec
    fits: tuple[int, ...]  # per type: how many tasks of the type fit alone (0 = not allowed)


def pack_exact(
    types: Sequence[tuple[Vec, int]], machines: Sequence[Machine], work_limit: float,
    spread: tuple[Sequence[bool], Sequence[tuple[object, ...]]] | None = None,
) -> tuple[str, list[list[tuple[str, int]]]]:
    """Decide whether ``types`` ((request, count) each) fit on ``machines``.

    ``spread`` = (per type: whether it is a relaxed node's, per machine: its domains, the relaxed
    node's level first, then each coarser one): the relaxed types then use the fewest domains of that
    level, then of each coarser level (a boolean per domain that the relaxed counts on its machines
    imply; the objective weighs a domain of the node's level above all coarser ones together).

    Returns (FEASIBLE, per type the (machine name, tasks) it takes, in machine order), (INFEASIBLE, [])
    with a proof, or (UNKNOWN, []) when ``work_limit`` deterministic seconds ran out (with ``spread``,
    FEASIBLE is the best placement found, optimal or not)."""
    from ortools.sat.python import cp_model

    model = cp_model.CpModel()
    per_type: list[list[tuple[int, cp_model.IntVar]]] = [[] for _ in types]
    for m, machine in enumerate(machines):
        terms: list[tuple[int, cp_model.IntVar]] = []
        for k, n in enumerate(machine.fits):
            if n > 0 and types[k][1] > 0:
                var = model.new_int_var(0, min(n, types[k][1]), f"n_{k}_{m}")
                per_type[k].append((m, var))
                terms.append((k, var))
        if len(terms) > 1:  # one type alone is bounded by its fit
            for r in range(4):
                used = [(types[k][0][r], var) for k, var in terms if types[k][0][r] > 0]
                if len(used) > 1:
                    model.add(sum(c * var for c, var in used) <= machine.free[r])
    for k, (_req, count) in enumerate(types):
        if sum(min(count, machines[m].fits[k]) for m, _v in per_type[k]) < count:
            return INFEASIBLE, []
        model.add(sum(var for _m, var in per_type[k]) == count)
    if spread is not None:
        relaxed, domains = spread
        depth = max((len(d) for d in domains), default=0)
        opened: list[dict[object, cp_model.IntVar]] = [{} for _ in range(depth)]
        for k, items in enumerate(per_type):
            if not relaxed[k]:
                continue
            for m, var in items:
                for lvl, dom in enumerate(domains[m]):
                    flag = opened[lvl].get(dom)
                    if flag is None:
                        flag = opened[lvl][dom] = model.new_bool_var(f"u_{lvl}_{len(opened[lvl])}")
                    model.add(var <= min(machines[m].fits[k], types[k][1]) * flag)
        if opened and opened[0]:
            coarser = [flag for level in opened[1:] for flag in level.values()]
            model.minimize((len(coarser) + 1) * sum(opened[0].values()) + sum(coarser))
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = 0
    solver.parameters.max_deterministic_time = work_limit
    status = solver.solve(model)
    if status == cp_model.INFEASIBLE:
        return INFEASIBLE, []
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return UNKNOWN, []
    out: list[list[tuple[str, int]]] = []
    for k in range(len(types)):
        out.append([(machines[m].name, v) for m, var in per_type[k] if (v := int(solver.value(var))) > 0])
    return FEASIBLE, out


class ExactModel:
    """A component's packing as CP-SAT sees it: task *types* (shape, bound domain, whether the task is
    in the relaxed ``bundle``) with their positions in ``seq``, and every machine under the bound
    domains with how many tasks of each type it fits alone."""

    def __init__(self, state: Machines, seq: list[Slot], bundle: int | None = None) -> None:
        self.seq = seq
        self.shapes = state.shapes
        self.positions: dict[tuple[int, int, bool], list[int]] = {}
        for p, slot in enumerate(seq):
            self.positions.setdefault((slot.shape, slot.domain, slot.bundle == bundle), []).append(p)
        self.order = sorted(self.positions)
        end = state.index.end
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
                for (free, sp), names in sorted(state.classes[dom].items()):
                    fits = tuple(state.fit(free, sp, s) if d <= dom < end[d] else 0 for s, d, _m in self.order)
                    if not any(fits):
                        continue
                    for name in sorted(names):
                        self.machines.append(Machine(name, free, fits))
                        self.doms.append(dom)
                        self.where[name] = dom
                        self.nvars += sum(1 for n in fits if n)

    def types(self) -> list[tuple[Vec, int]]:
        return [(self.shapes[key[0]].req, len(self.positions[key])) for key in self.order]

    def result(self, taken: list[list[tuple[str, int]]]) -> list[Seat]:
        """CP-SAT's counts as a :class:`Seat` per position of ``seq``."""
        out: list[Seat] = [NO_SEAT] * len(self.seq)
        for k, key in enumerate(self.order):
            slots = iter(self.positions[key])
            for name, count in taken[k]:
                for _ in range(count):
                    out[next(slots)] = record(Seat, (name, self.where[name]))
        return out


def decide(state: Machines, seq: list[Slot], budget: verdicts.Budget) -> list[Seat] | str:
    """Decide a component with CP-SAT: the result indexed by position in ``seq``,
    ``budget.INFEASIBLE`` (proven) or ``budget.UNDECIDED``. Costs one budget step per variable."""
    model = ExactModel(state, seq)
    if model.nvars > EXACT_MAX_VARS:
        return verdicts.UNDECIDED
    budget.spend(model.nvars)
    verdict, taken = pack_exact(model.types(), model.machines, EXACT_WORK)
    if verdict == INFEASIBLE:
        return verdicts.INFEASIBLE
    if verdict != FEASIBLE:
        return verdicts.UNDECIDED
    return model.result(taken)


def spread_tighten(
    state: Machines, seq: list[Slot], found: list[Seat], spread: dict[int, int], budget: verdicts.Budget
) -> list[Seat]:
    """Several shapes: the best-fit packing may spread a relaxed node over one domain too many (a
    larger task took the machine two smaller ones needed). CP-SAT minimises the domains it uses
    (:func:`pack_exact` with ``spread``); its packing replaces ``found`` only when it uses fewer
    (domains at the node's level, then coarser)."""
    ((bundle, lvl),) = spread.items()
    have = state.spread_used(seq, found, bundle, lvl)
    if have[0] <= 1:
        return found
    model = ExactModel(state, seq, bundle)
    level, anc = state.level, state.anc
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
    if verdict != FEASIBLE:
        return found
    result = model.result(taken)
    return result if state.spread_used(seq, result, bundle, lvl) < have else found
