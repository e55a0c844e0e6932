"""The domain phase sorts a step's candidates one group of equal tightness at a time, when the search
first reads that far (docs/design.md §5, packing): the placements must be the very ones of the whole
sort (``GangSearch.lazy_orders = False``), gang after gang on one index kept current."""

from __future__ import annotations

import random

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from bench.kit.instances import random_instance
from scheduler.placement import ClusterSnapshot, GangRequest, NodeState, Placement, Resources, solve
from scheduler.placement.index import DomainIndex
from scheduler.placement.search import GangSearch, _Order
from scheduler.placement.types import TaskRequest
from topology.tree import ConstraintTree, TreeNode

GIB = 1 << 30


def _wide_pool(rng: random.Random) -> ClusterSnapshot:
    """zone > spine > rack, 2-3 of each, 1-3 machines per rack with 0-4 free GPUs: many racks equally
    tight for a small gang, told apart only by their own, their spine's and their zone's free GPUs."""
    nodes = []
    for z in range(rng.randint(2, 3)):
        for s in range(rng.randint(2, 3)):
            for r in range(rng.randint(2, 3)):
                for _ in range(rng.randint(1, 3)):
                    free = Resources(gpu=rng.choice((0, 1, 2, 2, 3, 4, 4)), cpu=8000, memory=32 * GIB)
                    nodes.append(NodeState(f"m{len(nodes):03d}", (f"z{z}", f"s{z}{s}", f"r{z}{s}{r}"), free))
    return ClusterSnapshot(pool="wide", keys=("zone", "spine", "rack"), nodes=tuple(nodes))


def _small_gang(rng: random.Random, number: int) -> GangRequest:
    """1-3 tasks of 1-2 GPUs in one required rack (or spine), as most of a deep queue."""
    tasks = tuple(TaskRequest(f"t{i}", Resources(gpu=rng.randint(1, 2), cpu=1000, memory=4 * GIB))
                  for i in range(rng.randint(1, 3)))
    key = rng.choice(("rack", "rack", "spine"))
    node = TreeNode(key, "g0", ((key, "g0"),), "required", (), tuple(t.name for t in tasks))
    tree = ConstraintTree(group="g", children=(node,), keys=("zone", "spine", "rack"))
    return GangRequest(name=f"g{number}", tree=tree, tasks=tasks)


def _twin_gang(rng: random.Random, number: int) -> GangRequest:
    """2-3 identical racks of 1-2 tasks of 1 GPU inside one spine or zone: twin steps, which read their
    first twin's candidate order after it has claimed its domain."""
    racks, per, gpu = rng.randint(2, 3), rng.randint(1, 2), rng.randint(1, 2)
    outer = rng.choice(("spine", "zone"))
    tasks = tuple(TaskRequest(f"t{i}", Resources(gpu=gpu, cpu=1000, memory=4 * GIB)) for i in range(racks * per))
    top = ((outer, "o"),)
    kids = tuple(TreeNode("rack", f"r{r}", (*top, ("rack", f"r{r}")), "required", (),
                          tuple(t.name for t in tasks[r * per:(r + 1) * per])) for r in range(racks))
    node = TreeNode(outer, "o", top, "required", kids)
    return GangRequest(name=f"g{number}", tree=ConstraintTree(group="g", children=(node,),
                                                              keys=("zone", "spine", "rack")), tasks=tasks)


def _solve(index: DomainIndex, group: GangRequest, *, lazy: bool) -> object:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(GangSearch, "lazy_orders", lazy)
        return solve(index, group)


def _place(index: DomainIndex, group: GangRequest, result: object) -> None:
    if isinstance(result, Placement):
        requests = {t.name: t.resources.as_tuple() for t in group.tasks}
        index.place([(node, requests[task]) for task, node in result.assignments])


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(min_value=0, max_value=100_000), wide=st.booleans())
@example(seed=255, wide=True)  # a twin rack reads its first twin's order past the group it took
def test_groups_sorted_when_read_place_every_gang_as_the_whole_sort(seed, wide):
    # given a random pool (a wide zone > spine > rack one, or bench.kit.instances' random ones) and two
    # indexes of it, one solved with candidate orders sorted lazily, one with whole sorts
    rng = random.Random(seed)
    snapshot = _wide_pool(rng) if wide else random_instance(rng)[0]
    lazy, whole = DomainIndex(snapshot), DomainIndex(snapshot)
    for number in range(12):
        # when a sequence of gangs (small ones, twin racks and random trees of up to three shapes) is solved on
        # both and each placement is kept on its index
        pick = rng.random()
        group = (_small_gang(rng, number) if pick < 0.5 else _twin_gang(rng, number) if pick < 0.7
                 else random_instance(rng)[1])
        got = _solve(lazy, group, lazy=True)
        expected = _solve(whole, group, lazy=False)
        # then every gang gets the same placement, verdict and report
        assert got == expected, f"gang {number}"
        _place(lazy, group, got)
        _place(whole, group, expected)


def test_an_order_sorts_each_group_by_free_gpus_up_the_ancestors_when_first_read():
    # given domains 1-4 under parents 5 and 6 (root 0) and two groups of equal tightness
    anc = [(0,), (1, 5, 0), (2, 5, 0), (3, 6, 0), (4, 6, 0), (5, 0), (6, 0)]
    tot = [[20, 0, 0, 0], [2, 0, 0, 0], [2, 0, 0, 0], [2, 0, 0, 0], [1, 0, 0, 0], [8, 0, 0, 0], [5, 0, 0, 0]]
    claimed_tot = [[0, 0, 0, 0] for _ in tot]
    order = _Order({(0, 0, 3): [1], (0, 0, 1): [2, 3, 4]}, anc, tot, claimed_tot)
    # when the first candidate is read, then the second group is left unsorted
    assert len(order) == 4
    assert order[0] == 4  # slack 1, fewest free GPUs of its own
    assert order._keys == [(0, 0, 3)]
    # then the whole sequence: 3 before 2 (equal GPUs, emptier parent 6), the slack-3 group last
    assert list(order) == [4, 3, 2, 1]
    assert order[-1] == 1
