"""Exact oracle for small instances: the placement problem as an OR-Tools CP-SAT model.

Variables: ``x[t, m]`` (task t on machine m), ``y[n, d]`` (constraint node n uses domain d at its
level). Each task on exactly one allowed machine (schedulable, not excluded, and carrying every label
its constrained ancestors need); per machine and resource, the sum of requests <= free; a constrained
node picks exactly one domain and each of its tasks sits on a machine of that domain. Preferred nodes
are hard in ``all_preferred`` mode and ignored otherwise. Only meant for tests and ``bench`` (small
instances: the model has tasks x machines booleans).
"""

from __future__ import annotations

from ortools.sat.python import cp_model

from scheduler.placement.types import ClusterSnapshot, GangRequest


def feasible(snapshot: ClusterSnapshot, group: GangRequest, *, all_preferred: bool = False) -> bool:
    """True when some placement meets every required constraint (and every preferred one if asked)."""
    keys = snapshot.keys
    level = {k: i for i, k in enumerate(keys)}
    tasks = {t.name: t for t in group.tasks}
    names = sorted(tasks)
    machines = [n for n in snapshot.nodes if n.schedulable]
    model = cp_model.CpModel()
    # Constrained nodes above each task (own level per node).
    above: dict[str, list[tuple[int, int]]] = {t: [] for t in names}
    hard: list[tuple[int, int, tuple[str, ...]]] = []
    for idx, node in enumerate(group.tree.nodes()):
        if not (node.required or all_preferred):
            continue
        lvl = level.get(node.key)
        if lvl is None:
            return False
        hard.append((idx, lvl, node.all_tasks()))
        for t in node.all_tasks():
            above[t].append((idx, lvl))
    x: dict[tuple[str, int], cp_model.IntVar] = {}
    for t in names:
        req = tasks[t].resources
        deepest = max((lvl for _i, lvl in above[t]), default=-1)
        options = []
        for m, node in enumerate(machines):
            if node.name in tasks[t].nodes_excluded:
                continue
            if any(v is None for v in node.labels[: deepest + 1]) or len(node.labels) <= deepest:
                continue
            f = node.free
            if req.gpu > f.gpu or req.cpu > f.cpu or req.memory > f.memory or req.storage > f.storage:
                continue
            var = model.new_bool_var(f"x_{t}_{m}")
            x[(t, m)] = var
            options.append(var)
        if not options:
            return False
        model.add_exactly_one(options)
    for m, node in enumerate(machines):
        f = node.free
        for attr, have in (("gpu", f.gpu), ("cpu", f.cpu), ("memory", f.memory), ("storage", f.storage)):
            terms = [(getattr(tasks[t].resources, attr), x[(t, m)]) for t in names if (t, m) in x]
            terms = [(c, v) for c, v in terms if c]
            if terms and sum(c for c, _v in terms) > have:
                model.add(sum(c * v for c, v in terms) <= have)
    for idx, lvl, node_tasks in hard:
        domains: dict[tuple, list[int]] = {}
        for m, node in enumerate(machines):
            path = tuple(node.labels[: lvl + 1])
            if len(path) == lvl + 1 and None not in path:
                domains.setdefault(path, []).append(m)
        y = {d: model.new_bool_var(f"y_{idx}_{i}") for i, d in enumerate(sorted(domains))}
        if not y:
            return False
        model.add_exactly_one(list(y.values()))
        for d, ms in domains.items():
            inside = set(ms)
            for t in node_tasks:
                for m in range(len(machines)):
                    if (t, m) in x and m not in inside:
                        model.add_implication(y[d], x[(t, m)].Not())
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = 0
    status = solver.solve(model)
    if status == cp_model.UNKNOWN:
        raise RuntimeError("oracle: CP-SAT returned UNKNOWN")
    return status in (cp_model.OPTIMAL, cp_model.FEASIBLE)
