"""The preferred objective (docs/design.md §5) against an exact oracle on small conflicting instances.

``python -m bench.preferred [--instances N] [--first-seed S] [--json]``

Objective of a placement, larger is better, compared lexicographically: for every preferred node n
whose key the pool has, own(n) is its key's level (coarse = 0) and a(n) the finest level <= own(n)
at which all of n's tasks share one domain (-1 if none); then

    (c_L, c_{L-1}, ..., c_0, met)   with  c_l = #{n : a(n) >= l},  met = #{n : a(n) = own(n)}

(the spread and packing tie-breaks that follow it in docs/design.md §5 are not part of this check).

Oracle (:func:`optimum`): the best objective over every placement that meets the required
constraints. For a vector ``eff`` of target levels (preferred n: own(n), own(n) - 1, ..., -1; required
n: own(n)) the solver's own two-phase search, with a budget large enough to be complete on these
sizes, finds a placement whose achieved levels are >= eff, or proves there is none. An optimal
placement's achieved levels are themselves such a vector, so the optimum is the largest objective
of a feasible ``eff`` (computed from ``eff`` itself): the vectors are tried in decreasing objective
order, skipping any that is >= a vector already proven infeasible, and the first feasible one wins;
its placement's objective, computed from the labels, is checked to be equal.

Instances (:func:`preferred_instance`, deterministic by seed): 2-4 zones x 2-3 racks x 2-4
machines, with or without a per-machine ``host`` key, 0-4 free GPUs per machine; 2-6 preferred and
0-2 required constraint nodes at random levels, some nested, with 1-4 tasks (leaves) or 0-4 (inner
nodes) of one or two shapes (1 or 2 GPUs), a few unconstrained tasks. Only *conflicting* instances
count: those whose required constraints can be met (so a placement exists) but not every preferred
one too.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import sys
import time

from scheduler.placement import Placement, Policy, solve
from scheduler.placement.plan import NO_LEVEL
from scheduler.placement.solver import _Context
from scheduler.placement.types import ClusterSnapshot, GangRequest, NodeState, Resources, TaskRequest
from topology.tree import ConstraintTree, NodePath, TreeNode

ORACLE_STEPS = 10**9  # per search: complete on these sizes (an exhausted budget raises)


def achieved(snapshot: ClusterSnapshot, group: GangRequest, assignments: dict[str, str]) -> list[tuple[int, int]]:
    """(own(n), a(n)) per preferred node whose key the pool has, in tree order, from the labels only."""
    labels = {n.name: n.labels for n in snapshot.nodes}
    level = {k: i for i, k in enumerate(snapshot.keys)}
    out: list[tuple[int, int]] = []
    for node in group.tree.nodes():
        own = level.get(node.key)
        if node.required or own is None:
            continue
        paths = [labels[assignments[t]] for t in node.all_tasks()]
        best = NO_LEVEL
        for lvl in range(own + 1):
            first = paths[0][: lvl + 1]
            if len(first) <= lvl or None in first or any(p[: lvl + 1] != first for p in paths[1:]):
                break
            best = lvl
        out.append((own, best))
    return out


def objective(pairs: list[tuple[int, int]], nlevels: int) -> tuple[int, ...]:
    """(c_L, ..., c_0, met) for (own, achieved) pairs."""
    counts = tuple(sum(1 for _own, a in pairs if a >= lvl) for lvl in range(nlevels - 1, -1, -1))
    return counts + (sum(1 for own, a in pairs if a == own),)


def placement_objective(snapshot: ClusterSnapshot, group: GangRequest, placement: Placement) -> tuple[int, ...]:
    return objective(achieved(snapshot, group, placement.tasks), len(snapshot.keys))


def optimum(snapshot: ClusterSnapshot, group: GangRequest) -> tuple[int, ...] | None:
    """The best objective over all placements meeting the required constraints; None if there is none."""
    ctx = _Context(snapshot, group, Policy(max_steps=ORACLE_STEPS))
    ti = ctx.ti
    own = ctx.own
    base = [own[i] if node.required else NO_LEVEL for i, node in enumerate(ti.nodes)]
    if any(node.required and ti.level[i] is None for i, node in enumerate(ti.nodes)):
        return None
    prefs = [i for i, node in enumerate(ti.nodes) if not node.required and ti.level[i] is not None]
    nlevels = len(ctx.keys)
    if ctx.run(base) == "infeasible":
        return None
    options = [range(own[i], NO_LEVEL - 1, -1) for i in prefs]
    vectors = sorted(
        itertools.product(*options),
        key=lambda v: objective([(own[i], a) for i, a in zip(prefs, v, strict=True)], nlevels),
        reverse=True,
    )
    infeasible: list[tuple[int, ...]] = []
    for v in vectors:
        if any(all(x >= y for x, y in zip(v, bad, strict=True)) for bad in infeasible):
            continue
        eff = list(base)
        for i, lvl in zip(prefs, v, strict=True):
            eff[i] = lvl
        found = ctx.run(eff)
        if isinstance(found, list):
            names = ti.task_names
            got = objective(achieved(snapshot, group, {names[t]: found[t][0] for t in range(len(names))}), nlevels)
            want = objective([(own[i], a) for i, a in zip(prefs, v, strict=True)], nlevels)
            if got != want:
                raise AssertionError(f"oracle: placement objective {got} != vector objective {want}")
            return got
        if found != "infeasible":
            raise RuntimeError("oracle: search budget exhausted")
        infeasible.append(v)
    return None


def preferred_instance(rng: random.Random) -> tuple[ClusterSnapshot, GangRequest]:
    """A small instance whose preferences are likely to conflict (see the module docstring)."""
    keys: tuple[str, ...] = ("zone", "rack", "host") if rng.random() < 0.5 else ("zone", "rack")
    zones, racks, machines = rng.randint(2, 4), rng.randint(2, 3), rng.randint(2, 4)
    nodes = []
    for z, r, m in itertools.product(range(zones), range(racks), range(machines)):
        name = f"m{z}{r}{m}"
        labels = (f"z{z}", f"r{r}", name)[: len(keys)]
        nodes.append(NodeState(name, labels, Resources(gpu=rng.choice((0, 0, 1, 1, 2, 2, 3, 4)))))
    snapshot = ClusterSnapshot(pool="preferred", keys=keys, nodes=tuple(nodes))
    shapes = [Resources(gpu=1), Resources(gpu=2)] if rng.random() < 0.4 else [Resources(gpu=rng.choice((1, 1, 2)))]
    npref, nreq = rng.randint(2, 6), rng.choice((0, 0, 1, 1, 2))
    # Structure first: (parent index or -1, level); a child is one or more levels finer than its parent.
    specs: list[tuple[int, int]] = []
    for _ in range(npref + nreq):
        parents = [p for p, (_up, lvl) in enumerate(specs) if lvl < len(keys) - 1]
        up = rng.choice(parents) if parents and rng.random() < 0.4 else -1
        low = specs[up][1] + 1 if up >= 0 else 0
        specs.append((up, rng.randint(low, len(keys) - 1)))
    required = set(rng.sample(range(len(specs)), nreq))
    tasks: list[TaskRequest] = []
    own_tasks: list[list[str]] = []
    for k in range(len(specs)):
        leaf = all(up != k for up, _lvl in specs)
        mine = []
        for _ in range(rng.randint(1 if leaf else 0, 4)):
            name = f"t{len(tasks):02d}"
            tasks.append(TaskRequest(name, rng.choice(shapes)))
            mine.append(name)
        own_tasks.append(mine)
    loose = []
    for _ in range(rng.choice((0, 0, 1, 2))):
        name = f"t{len(tasks):02d}"
        tasks.append(TaskRequest(name, rng.choice(shapes)))
        loose.append(name)

    def build(k: int, prefix: NodePath) -> TreeNode:
        key = keys[specs[k][1]]
        path = (*prefix, (key, f"g{k}"))
        kids = tuple(sorted((build(c, path) for c, (up, _l) in enumerate(specs) if up == k), key=lambda n: n.path))
        req = "required" if k in required else "preferred"
        return TreeNode(key, f"g{k}", path, req, kids, tuple(sorted(own_tasks[k])))  # type: ignore[arg-type]

    top = tuple(sorted((build(k, ()) for k, (up, _l) in enumerate(specs) if up < 0), key=lambda n: n.path))
    tree = ConstraintTree(group="g", children=top, tasks=tuple(sorted(loose)), keys=keys)
    return snapshot, GangRequest(name="g", tree=tree, tasks=tuple(tasks))


def conflicting(seed: int) -> tuple[ClusterSnapshot, GangRequest, tuple[int, ...]] | None:
    """Instance ``seed`` with its optimum when it counts (required feasible, preferences in conflict)."""
    snapshot, group = preferred_instance(random.Random(seed))
    best = optimum(snapshot, group)
    if best is None:
        return None
    npref = sum(1 for n in group.tree.nodes() if not n.required)
    if best[-1] == npref:  # every preference met at once: nothing to trade
        return None
    return snapshot, group, best


def agreement(instances: int, first_seed: int = 0, log: bool = False) -> dict[str, object]:
    """Solve ``instances`` conflicting instances (seeds from ``first_seed`` on, skipping the others) and
    count how often the solver's objective equals the oracle's optimum."""
    seed, done, agree, below, above, invalid = first_seed, 0, 0, 0, 0, 0
    times: list[float] = []
    misses: list[int] = []
    while done < instances:
        got = conflicting(seed)
        if got is not None:
            snapshot, group, best = got
            start = time.perf_counter()
            result = solve(snapshot, group)
            times.append((time.perf_counter() - start) * 1000)
            if not isinstance(result, Placement):
                invalid += 1
                misses.append(seed)
            else:
                mine = placement_objective(snapshot, group, result)
                if mine == best:
                    agree += 1
                elif mine < best:
                    below += 1
                    misses.append(seed)
                else:
                    above += 1  # would mean the oracle is wrong
                    misses.append(seed)
            done += 1
            if log and done % 250 == 0:
                print(f"preferred: {done}/{instances} agree {agree}", file=sys.stderr)
        seed += 1
    times.sort()
    return {
        "benchmark": "preferred-objective",
        "instances": instances,
        "seeds": f"{first_seed}..{seed - 1}",
        "agree": agree,
        "agreement": round(agree / instances, 4) if instances else 1.0,
        "below_optimum": below,
        "above_optimum": above,
        "not_placed": invalid,
        "solve_p50_ms": round(times[len(times) // 2], 3) if times else 0.0,
        "solve_max_ms": round(times[-1], 1) if times else 0.0,
        "misses": misses[:20],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.preferred", description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, default=2000, help="conflicting instances to check")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="one JSON object (the default output)")
    args = parser.parse_args(argv)
    print(json.dumps(agreement(args.instances, args.first_seed, log=True)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
