"""Consolidation (docs/design.md §6, "Consolidation"), pure: move a few running gangs so that a
waiting gang that does not fit can start, only if every moved gang starts again at once elsewhere.

KAI Scheduler's ``consolidation`` action has the same rule: it evicts running pods for a pending job
only when every evicted pod can be re-placed in the same cycle, so nothing is left waiting that was
running. Here, gang-whole, with the preemption search choosing what to move:

1. Only a movable gang that fits on the snapshot as it is (its own machines still held: room
   elsewhere now) is a candidate. :func:`~scheduler.preemption.victims_choose` picks the set of them whose release lets
   ``gang`` fit, least work lost first (GPUs times time run up to ``now``: a moved gang restarts from
   the beginning), then fewest GPUs, fewest gangs, the youngest.
2. With them released and ``gang`` placed, each moved gang, the largest first, is placed by
   ``solver`` on what is left (its old machines included). All of them placed: the consolidation,
   with every placement. One not placed: the gang and all of them are solved as one gang
   (:func:`joined`), which may put the gang elsewhere; placed: the consolidation. Else the moved
   gang that was not placed is no longer movable and the search runs again, up to ``attempts``
   times; then None (nothing moves).

A consolidation moves at most ``max_moves`` gangs and throws away at most ``max_work_lost``
GPU-seconds (a set beyond either counts as none found: the search's set is the least work lost
it found, the fewest gangs among those). The caller
decides which running gangs are movable (its limits: age, a gang moved once is not moved again).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from scheduler.placement import (
    ClusterSnapshot,
    GangRequest,
    NodeState,
    Placement,
    Policy,
    Resources,
    TaskRequest,
    Unplaceable,
)
from scheduler.placement import solve as solve_placement
from scheduler.preemption.search import victims_choose, work_lost
from scheduler.preemption.types import Candidate
from topology.tree import ConstraintTree, NodePath, TreeNode

_GANG = "\x00gang"  # the waiting gang's key in the joined gang (no candidate key starts with NUL)
Solver = Callable[[ClusterSnapshot, GangRequest], Placement | Unplaceable]


@dataclass(frozen=True, slots=True)
class Consolidation:
    """``gang``'s placement once the gangs of ``moves`` (key, new placement) have moved, in the order
    they were placed; ``work_lost``: their GPU-seconds run so far (lost by the restart)."""

    placement: Placement
    moves: tuple[tuple[str, Placement], ...]
    work_lost: float
    attempts: int


def _solve(snapshot: ClusterSnapshot, gang: GangRequest) -> Placement | Unplaceable:
    return solve_placement(snapshot, gang)


def shifted(snapshot: ClusterSnapshot, holdings: Sequence[tuple[str, Resources]], sign: int) -> ClusterSnapshot:
    """``snapshot`` with ``holdings`` (machine, resources) given back (``sign`` 1) or taken (-1)."""
    delta: dict[str, list[int]] = {}
    for name, res in holdings:
        d = delta.setdefault(name, [0, 0, 0, 0])
        for i, v in enumerate(res.as_tuple()):
            d[i] += sign * v
    nodes = []
    for node in snapshot.nodes:
        if node.name not in delta:
            nodes.append(node)
            continue
        d, f = delta[node.name], node.free
        nodes.append(NodeState(node.name, node.labels,
                               Resources(f.gpu + d[0], f.cpu + d[1], f.memory + d[2], f.storage + d[3]),
                               node.schedulable))
    return ClusterSnapshot(snapshot.pool, snapshot.keys, tuple(nodes))


def holdings_of(group: GangRequest, placement: Placement) -> tuple[tuple[str, Resources], ...]:
    """What ``group``'s tasks hold under ``placement``: (machine, resources), by task."""
    reqs = {t.name: t.resources for t in group.tasks}
    return tuple((machine, reqs[task]) for task, machine in placement.assignments)


def _renamed(node: TreeNode, prefix: str, parent: NodePath) -> TreeNode:
    group = f"{prefix}{node.group}"
    path = (*parent, (node.key, group))
    kids = tuple(sorted((_renamed(c, prefix, path) for c in node.children), key=lambda n: n.path))
    return TreeNode(node.key, group, path, node.requirement, kids, tuple(sorted(f"{prefix}{t}" for t in node.tasks)))


def joined(gangs: Sequence[tuple[str, GangRequest]], name: str = "consolidation") -> GangRequest:
    """One gang holding each of ``gangs`` (key, request) with its constraints, every task and
    topology group renamed ``key/name``: placing it places them all at once."""
    children: list[TreeNode] = []
    tasks: list[str] = []
    requests: list[TaskRequest] = []
    keys: tuple[str, ...] = ()
    for key, group in gangs:
        prefix = f"{key}/"
        children.extend(_renamed(c, prefix, ()) for c in group.tree.children)
        tasks.extend(f"{prefix}{t}" for t in group.tree.tasks)
        requests.extend(dataclasses.replace(t, name=f"{prefix}{t.name}") for t in group.tasks)
        keys = keys or group.tree.keys
    tree = ConstraintTree(group=name, children=tuple(sorted(children, key=lambda n: n.path)),
                          tasks=tuple(sorted(tasks)), keys=keys)
    return GangRequest(name, tree, tuple(sorted(requests, key=lambda t: t.name)))


def _split(placement: Placement, key: str) -> Placement:
    prefix = f"{key}/"
    return Placement("placed", tuple(sorted((t[len(prefix):], m) for t, m in placement.assignments
                                            if t.startswith(prefix))))


def consolidate(
    snapshot: ClusterSnapshot,
    gang: GangRequest,
    movable: Sequence[Candidate],
    requests: Mapping[str, GangRequest],
    *,
    now: float,
    max_moves: int,
    attempts: int = 4,
    max_solves: int = 64,
    max_work_lost: float = float("inf"),
    room_now: bool = True,
    solver: Solver = _solve,
) -> Consolidation | None:
    """Move at most ``max_moves`` of the ``movable`` running gangs (``requests``: each one's gang
    request by key) so that ``gang`` fits on ``snapshot``, each moved gang placed again at once; None
    when no such set is found (nothing moves). See the module docstring."""
    left = {c.key: dataclasses.replace(c, borrowing=True) for c in movable  # least work lost first
            if not room_now or isinstance(solver(snapshot, requests[c.key]), Placement)}  # room elsewhere now
    for attempt in range(1, attempts + 1):
        if not left:
            return None
        choice = victims_choose(snapshot, gang, list(left.values()), Policy(), max_solves=max_solves, now=now)
        if choice is None or len(choice.victims) > max_moves or choice.work_lost > max_work_lost:
            return None
        moved = [left[key] for key in choice.victims]
        view = shifted(snapshot, [h for c in moved for h in c.holdings], 1)
        view = shifted(view, holdings_of(gang, choice.placement), -1)
        moves: list[tuple[str, Placement]] = []
        stuck = None
        for candidate in sorted(moved, key=lambda c: (-c.gpu, c.key)):
            again = solver(view, requests[candidate.key])
            if not isinstance(again, Placement):
                stuck = candidate.key
                break
            view = shifted(view, holdings_of(requests[candidate.key], again), -1)
            moves.append((candidate.key, again))
        lost = sum(work_lost(c, now) for c in moved)
        if stuck is None:
            return Consolidation(choice.placement, tuple(moves), lost, attempt)
        # one by one, the largest first, did not do: all of them and the gang at once
        order = sorted(moved, key=lambda c: (-c.gpu, c.key))
        together = solver(shifted(snapshot, [h for c in moved for h in c.holdings], 1),
                          joined([(_GANG, gang), *((c.key, requests[c.key]) for c in order)]))
        if isinstance(together, Placement):
            return Consolidation(_split(together, _GANG), tuple((c.key, _split(together, c.key)) for c in order),
                                 lost, attempt)
        del left[stuck]
    return None
