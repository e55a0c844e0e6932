"""The cycle's aggregated domain index stays equal to a fresh build while gangs are placed
(docs/design.md §8), and solving on it gives the same result as solving on the snapshot."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from bench.kit.instances import random_instance
from scheduler.placement import ClusterSnapshot, Placement, solve
from scheduler.placement.index import DomainIndex, Shape
from scheduler.placement.plan import shapes_of
from tests.scheduler.placement.builders import cluster


def _state(index: DomainIndex, shapes: list[Shape]) -> tuple:
    table = index.table(shapes)
    classes = [{key: list(names) for key, names in per.items()} for per in index.classes]
    return (index.path, classes, table.cap, table.tot, table.stats)


def _fresh(snapshot: ClusterSnapshot, shapes: list[Shape]) -> tuple:
    return _state(DomainIndex(snapshot), shapes)


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(min_value=0, max_value=10_000), gangs=st.integers(min_value=1, max_value=6))
def test_index_updated_in_place_equals_a_rebuild(seed, gangs):
    # given a random pool and a sequence of random gangs, solved on one index kept current (some of
    # them evicted again later, as preemption does)
    rng = random.Random(seed)
    snapshot, _first = random_instance(rng)
    index = DomainIndex(snapshot)
    current = snapshot
    tracked: list[list[Shape]] = []
    placed: list[list[tuple[str, tuple[int, int, int, int]]]] = []
    for number in range(gangs):
        _other_pool, group = random_instance(rng)
        shapes, _task_shape = shapes_of(group, index.nodes)
        if any(shape.excluded for shape in shapes):
            continue
        tracked.append(shapes)
        index.table(shapes)  # a table that must be kept current from now on
        # when the gang is solved on the index and on the equivalent snapshot
        on_index = solve(index, group)
        on_snapshot = solve(current, group)
        # then both agree
        assert on_index == on_snapshot, f"gang {number}"
        if isinstance(on_index, Placement):
            requests = {t.name: t.resources.as_tuple() for t in group.tasks}
            taken = [(node, requests[task]) for task, node in on_index.assignments]
            index.place(taken)
            placed.append(taken)
            current = index.snapshot(snapshot.pool)
        if placed and rng.random() < 0.4:
            # a gang placed earlier is evicted: its capacity comes back
            index.release(placed.pop(rng.randrange(len(placed))))
            current = index.snapshot(snapshot.pool)
        # and the domain phase's shared claim arrays are back to zero
        for claimed, claimed_tot in index._claims.values():
            assert not any(any(row) for row in claimed) and not any(any(row) for row in claimed_tot)
        # and every tracked table equals one built from scratch on the resulting snapshot
        for shapes_seen in tracked:
            assert _state(index, shapes_seen) == _fresh(current, shapes_seen)


def test_place_moves_capacity_and_keeps_names_sorted():
    # given two 4-GPU machines in one rack
    index = DomainIndex(cluster(["rack"], [("r1", 4), ("r1", 4)]))
    shapes = [Shape((2, 0, 0, 0), frozenset())]
    table = index.table(shapes)
    assert table.cap[0] == [4]
    # when 2 GPUs of "b" are taken
    index.place([("n1", (2, 0, 0, 0))])
    # then the table counts 3 tasks, the machines sit in two classes, and the node state moved
    assert index.table(shapes).cap[0] == [3]
    assert index.nodes["n1"].free.gpu == 2
    rack = index.dom_id[("r1",)]
    assert index.classes[rack] == {((4, 0, 0, 0), ""): ["n0"], ((2, 0, 0, 0), ""): ["n1"]}
