"""The packing rule and the relaxed-spread rule (docs/design.md §5, "Packing").

- Packing: best fit that keeps large free machines and domains whole, whatever the pool's keys: a
  per-host key changes nothing for unconstrained tasks.
- Relaxed spread: when a preferred node cannot be met, the tasks it packs into its bound domain go to
  the fewest domains at its own level, the remainder to the best-fitting one.
"""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.placement import Placement, solve
from scheduler.placement.types import ClusterSnapshot, GroupRequest, NodeState, Resources, TaskRequest
from tests.placement.builders import cluster, gang, names, rack, tree, zone


def _with_hostname(snapshot: ClusterSnapshot) -> ClusterSnapshot:
    nodes = tuple(NodeState(n.name, (*n.labels, n.name), n.free, n.schedulable) for n in snapshot.nodes)
    return ClusterSnapshot(snapshot.pool, (*snapshot.keys, "hostname"), nodes)


def _shape(snapshot: ClusterSnapshot, group: GroupRequest, result: Placement) -> list[tuple[object, ...]]:
    """Name-free placement: per used machine, its free capacity and the requests put on it."""
    free = {n.name: n.free.as_tuple() for n in snapshot.nodes}
    reqs = {t.name: t.resources.as_tuple() for t in group.tasks}
    on: dict[str, list[tuple[int, ...]]] = {}
    for task, machine in result.assignments:
        on.setdefault(machine, []).append(reqs[task])
    return sorted((free[m], tuple(sorted(r))) for m, r in on.items())


def test_an_unconstrained_gang_takes_the_small_machines_with_or_without_a_hostname_key() -> None:
    # given: machines with 1, 1 and 2 free GPUs, the same pool with a per-host key
    plain = cluster((), [(1,), (2,), (1,)])
    hosts = _with_hostname(plain)
    group = gang(tree(tasks=["a", "b"]))
    # when
    one, two = solve(plain, group), solve(hosts, group)
    # then: both keep the 2-GPU machine whole
    assert isinstance(one, Placement) and isinstance(two, Placement)
    assert sorted(m for _t, m in one.assignments) == ["n0", "n2"]
    assert sorted(m for _t, m in two.assignments) == ["n0", "n2"]


def test_a_relaxed_preferred_rack_puts_its_remainder_in_the_best_fitting_rack() -> None:
    # given: no rack holds 5 tasks; r1 holds 4, then r2 (1 free) fits the remainder exactly, r3 has 3
    snapshot = _with_hostname(
        cluster(("zone", "rack"), [("z", "r1", 2), ("z", "r1", 2), ("z", "r2", 1), ("z", "r3", 2), ("z", "r3", 1)])
    )
    group = gang(tree(zone("wf", rack("r", tasks=names("t", 5), required=False))))
    # when
    result = solve(snapshot, group)
    # then: two racks, and r3 stays whole
    assert isinstance(result, Placement)
    assert sorted({m for _t, m in result.assignments}) == ["n0", "n1", "n2"]


@settings(max_examples=200, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(min_value=0, max_value=2**32 - 1), hostname=st.booleans())
def test_unconstrained_gangs_pack_the_same_with_and_without_a_hostname_key(seed: int, hostname: bool) -> None:
    # given: a random keyless pool and gang of 1-3 shapes, and the same pool with a per-host key
    rng = random.Random(seed)
    plain = cluster(
        (),
        [
            (Resources(gpu=rng.choice((0, 1, 1, 2, 4)), cpu=rng.choice((1000, 2000, 4000)), memory=8),)
            for _ in range(rng.randint(1, 10))
        ],
    )
    shapes = [Resources(gpu=rng.choice((0, 1, 2)), cpu=rng.choice((500, 1000, 2000)), memory=1) for _ in range(3)]
    tasks = names("t", rng.randint(1, 6))
    group = GroupRequest("g", tree(tasks=tasks), tuple(TaskRequest(t, rng.choice(shapes)) for t in tasks))
    hosts = _with_hostname(plain) if hostname else plain
    # when
    one, two = solve(plain, group), solve(hosts, group)
    # then
    assert one.status == two.status
    if isinstance(one, Placement) and isinstance(two, Placement):
        assert _shape(plain, group, one) == _shape(hosts, group, two)
