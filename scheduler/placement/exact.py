"""Exact packing of one component's tasks on machines with OR-Tools CP-SAT (docs/design.md §5).

Used only where the depth-first packing of :mod:`scheduler.placement.search` gives up: several task
shapes and several resources make packing inside a domain a (small) bin-packing problem, which a
depth-first search over machine classes can take exponentially long to decide. The model counts, per
(task type, machine), how many tasks of the type the machine takes (tasks of one type are
interchangeable, so there is no task symmetry to break):

- a *type* is (shape, bound domain): ``count`` tasks that must sit on machines under that domain;
- ``n[type, m]`` in ``0 .. fit(machine, shape)`` for each machine ``m`` under the type's domain;
- per type, the counts add up to ``count``; per machine and resource, the requests fit the free amount.

Deterministic: one worker, a fixed seed and a *deterministic* time limit (CP-SAT's work units, not the
wall clock), so equal inputs give equal answers on any machine. Pure: ortools is imported on first use.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

Vec = tuple[int, int, int, int]

FEASIBLE = "feasible"
INFEASIBLE = "infeasible"
UNKNOWN = "unknown"


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
