"""Relaxed spread against brute force: ``python -m bench.spread [--instances N] [--seed S]``.

When a single preferred rack node cannot be met, its tasks should use the fewest racks, then the
fewest zones (docs/design.md §5, "Relaxed spread"). Tiny random instances: a pool of 2-6 machines
labelled zone > rack (half of them with a per-host key too), one preferred rack node of 2-5 tasks,
under a required zone in half of them; the tasks have one shape (family ``one-shape``) or each one of
two (``two-shapes``). Brute force tries every assignment of tasks to machines and keeps the fewest
(racks, zones) among valid ones (one zone when the zone is required, or when the solver's placement
uses one). Reported per family: instances where the node was relaxed (not met), how many of those
equal the brute-force optimum, and the cases that differ (seed, solver's count, optimum).
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import sys

from scheduler.placement import Placement, solve
from scheduler.placement.types import ClusterSnapshot, GangRequest, NodeState, Resources, TaskRequest
from topology.tree import ConstraintTree, TreeNode


def instance(rng: random.Random, shapes: int) -> tuple[ClusterSnapshot, GangRequest, bool]:
    """A pool, a gang with one preferred rack node, and whether a zone above it is required."""
    nodes = []
    hostname = rng.random() < 0.5
    for i in range(rng.randint(2, 6)):
        labels: tuple[str, ...] = (f"z{rng.randrange(2)}", f"r{rng.randrange(3)}")
        if hostname:
            labels = (*labels, f"n{i}")
        free = Resources(gpu=rng.choice((1, 1, 2, 3)), cpu=rng.choice((2000, 4000)), memory=8)
        nodes.append(NodeState(f"n{i}", labels, free, True))
    keys = ("zone", "rack", "hostname") if hostname else ("zone", "rack")
    snapshot = ClusterSnapshot("spread", keys, tuple(nodes))
    tasks = tuple(f"t{i}" for i in range(rng.randint(2, 5)))
    kinds = [Resources(gpu=rng.choice((1, 1, 2)), cpu=rng.choice((1000, 2000)), memory=1) for _ in range(shapes)]
    requests = tuple(TaskRequest(t, kinds[i % shapes]) for i, t in enumerate(tasks))
    required_zone = rng.random() < 0.5
    if required_zone:
        rack = TreeNode("rack", "r", (("zone", "wf"), ("rack", "r")), "preferred", (), tasks)
        children: tuple[TreeNode, ...] = (TreeNode("zone", "wf", (("zone", "wf"),), "required", (rack,)),)
    else:
        children = (TreeNode("rack", "r", (("rack", "r"),), "preferred", (), tasks),)
    return snapshot, GangRequest("g", ConstraintTree("g", children), requests), required_zone


def fewest(snapshot: ClusterSnapshot, group: GangRequest, one_zone: bool, *, together: int = 0
           ) -> tuple[int, int] | None:
    """Brute force: the fewest (racks, zones) over every valid placement (one zone if ``one_zone``;
    the first ``together`` tasks, a required per-host child, on one machine)."""
    machines = [n for n in snapshot.nodes if n.schedulable]
    reqs = [t.resources.as_tuple() for t in group.tasks]
    best: tuple[int, int] | None = None
    for choice in itertools.product(range(len(machines)), repeat=len(reqs)):
        if len(set(choice[:together])) > 1:
            continue
        used: dict[int, list[int]] = {}
        for m, r in zip(choice, reqs, strict=True):
            acc = used.setdefault(m, [0, 0, 0, 0])
            for k in range(4):
                acc[k] += r[k]
        if any(any(a > f for a, f in zip(acc, machines[m].free.as_tuple(), strict=True)) for m, acc in used.items()):
            continue
        got = (len({machines[m].labels[:2] for m in used}), len({machines[m].labels[:1] for m in used}))
        if (one_zone and got[1] > 1) or (best is not None and got >= best):
            continue
        best = got
    return best


def run(instances: int, seed: int, shapes: int) -> dict:
    relaxed = agree = 0
    differ = []
    for k in range(instances):
        case = seed * 1_000_003 + k
        snapshot, group, required_zone = instance(random.Random(case), shapes)
        result = solve(snapshot, group)
        if not isinstance(result, Placement):
            continue
        if next(r for r in result.report if r.key == "rack").met:
            continue
        relaxed += 1
        where = {n.name: n.labels for n in snapshot.nodes}
        got = (len({where[m][:2] for _t, m in result.assignments}), len({where[m][:1] for _t, m in result.assignments}))
        best = fewest(snapshot, group, required_zone or got[1] == 1)
        if got == best:
            agree += 1
        else:
            differ.append({"case": case, "solver": got, "optimum": best})
    return {"benchmark": "spread", "family": "one-shape" if shapes == 1 else f"{shapes}-shapes",
            "instances": instances, "relaxed": relaxed, "fewest_domains": agree,
            "share": round(agree / relaxed, 4) if relaxed else None, "differ": differ[:10]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.spread", description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, default=3000, help="per family")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    for shapes in (1, 2):
        print(f"spread: {shapes} shape(s) ...", file=sys.stderr)
        print(json.dumps(run(args.instances, args.seed, shapes)))
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
