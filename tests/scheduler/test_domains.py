"""The domain tree of a pool (scheduler/reads/domains.py), which the admin hierarchy and the pool and
workflow pages draw: totals per domain, machines, "(no <key>)" domains, fixed query counts."""

from __future__ import annotations

import pytest

from scheduler.models import Node
from scheduler.reads.domains import DomainMachine, pool_domain_tree

pytestmark = pytest.mark.django_db


def test_hierarchy_tree_has_gpu_totals_per_domain(small_pool, reserve):
    reserve(Node.objects.get(pool=small_pool, name="a2"), gpu=5)

    root = pool_domain_tree(small_pool, machines=True).root

    assert (root.gpu_capacity, root.gpu_used, root.gpu_reserved, root.gpu_free) == (36, 2, 5, 21)
    zone_a = root.child("a")
    assert (zone_a.gpu_capacity, zone_a.gpu_free, zone_a.node_count) == (24, 9, 3)
    assert [m.name for m in zone_a.child("r1").machines] == ["a1", "a2"]
    assert root.child("(no zone)").child("(no rack)").machines[0].name == "loose"
    assert [child.value for child in root.children] == ["(no zone)", "a", "b"]


def test_domains_are_identified_by_path_and_unlabelled_machines_are_counted(small_pool, reserve):
    # given: a reservation on the cordoned a3 counts as reserved, not as free
    reserve(Node.objects.get(pool=small_pool, name="a3"), gpu=1)

    # when
    tree = pool_domain_tree(small_pool)

    # then
    root = tree.root
    assert tree.keys == ("zone", "rack")
    assert tree.unlabelled_node_count == 1
    assert tree.machines_loaded is False
    assert [(d.key, d.path, d.labelled, d.node_count, d.schedulable_node_count, d.gpu_reserved, d.gpu_free)
            for d in root.walk()] == [
        ("pool", (), True, 5, 4, 1, 26),
        ("zone", (None,), False, 1, 1, 0, 8),
        ("rack", (None, None), False, 1, 1, 0, 8),
        ("zone", ("a",), True, 3, 2, 1, 14),
        ("rack", ("a", "r1"), True, 2, 2, 0, 14),
        ("rack", ("a", "r2"), True, 1, 0, 1, 0),
        ("zone", ("b",), True, 1, 1, 0, 4),
        ("rack", ("b", "r1"), True, 1, 1, 0, 4),  # rack r1 of zone b: not rack r1 of zone a
    ]
    assert all(domain.machines is None for domain in root.walk())


def test_machines_of_chosen_domains_only(small_pool, reserve):
    # given
    reserve(Node.objects.get(pool=small_pool, name="b1"), gpu=6)  # over-committed: 4 GPUs

    # when
    tree = pool_domain_tree(small_pool, machines=[("b", "r1")])

    # then
    assert tree.machines_loaded is True
    loaded = {domain.path: domain.machines for domain in tree.root.walk() if domain.machines is not None}
    assert loaded == {
        ("b", "r1"): (DomainMachine(pk=Node.objects.get(name="b1").pk, name="b1", schedulable=True, gpu=4,
                                    gpu_used=0, gpu_reserved=6, gpu_free=-2),),
    }
    assert tree.root.child("b").gpu_free == 0  # an over-committed machine adds no free GPUs


def test_machine_limit_skips_the_machine_query(small_pool, django_assert_num_queries):
    # given
    keys = list(small_pool.topology_keys.order_by("position"))

    # when
    with django_assert_num_queries(2):
        over = pool_domain_tree(small_pool, keys=keys, machines=True, machine_limit=4)
    with django_assert_num_queries(3):
        within = pool_domain_tree(small_pool, keys=keys, machines=True, machine_limit=5)

    # then
    assert (over.machines_loaded, within.machines_loaded) == (False, True)
    assert over.root.child("a").child("r1").machines is None
    assert [m.name for m in within.root.child("a").child("r1").machines] == ["a1", "a2"]


def test_pool_without_keys_has_its_machines_at_the_root(small_pool):
    # given
    small_pool.topology_keys.all().delete()

    # when
    tree = pool_domain_tree(small_pool, machines=True)

    # then
    assert (tree.keys, tree.root.children, tree.unlabelled_node_count) == ((), (), 0)
    assert [m.name for m in tree.root.machines] == ["a1", "a2", "a3", "b1", "loose"]
    assert (tree.root.node_count, tree.root.gpu_capacity, tree.root.gpu_free) == (5, 36, 26)


def test_tree_runs_a_fixed_number_of_queries(generated_pool, reserve, django_assert_num_queries):
    small = generated_pool("small-gen", racks=1)
    big = generated_pool("big-gen", racks=4)
    for node in Node.objects.filter(pool=big)[:30]:
        reserve(node, gpu=1)

    for pool in (small, big):
        keys = list(pool.topology_keys.order_by("position"))
        with django_assert_num_queries(3):
            tree = pool_domain_tree(pool, keys=keys, machines=True)
        assert sum(len(d.machines) for d in tree.root.walk() if d.machines) == tree.root.node_count


def test_the_kept_tree_of_a_big_pool_equals_a_fresh_one_after_every_change(small_pool, reserve):
    """The pool page keeps the nodes' totals of a pool too big to draw machines and adds reservations
    on each change (docs/design.md §8): it must always equal the tree built from scratch."""
    from django.utils import timezone

    from scheduler.reads.domains import pool_domain_tree_cached, pool_state_fingerprint
    from scheduler.selectors import pool_keys

    keys = pool_keys(small_pool)

    def both():
        kept = pool_domain_tree_cached(small_pool, keys=keys, fingerprint=pool_state_fingerprint(small_pool),
                                       machine_limit=1)  # 5 nodes > 1: the kept-totals path
        fresh = pool_domain_tree(small_pool, keys=keys, machines=True, machine_limit=1)
        return kept, fresh

    # given reservations on a normal node, a node used outside the service and a cordoned node
    a1, a2, a3 = (Node.objects.get(pool=small_pool, name=name) for name in ("a1", "a2", "a3"))
    first = reserve(a2, gpu=5)
    reserve(a1, gpu=7)  # 8 GPUs, 2 used outside: 6 free, so free goes to 0, not -1
    reserve(a3, gpu=1)
    states = [both()]
    # when reservations are released and added, and a node changes
    first.released_at = timezone.now()
    first.save()
    states.append(both())
    reserve(Node.objects.get(pool=small_pool, name="b1"), gpu=4)
    states.append(both())
    Node.objects.filter(pk=a2.pk).update(used_gpu=3)
    states.append(both())
    # then every kept tree equals the fresh one, and the totals moved
    assert all(kept == fresh for kept, fresh in states)
    assert [kept.root.gpu_free for kept, _fresh in states] == [15, 20, 16, 13]


def test_domains_and_machines_are_in_natural_order():
    """rack2 before rack10, n9 before n10: the order the admin hierarchy and the pages draw."""
    from tests.factories import make_node, make_pool

    pool = make_pool("natural", keys=[("rack", "example.com/rack")])
    for rack, node in [("rack10", "n1"), ("rack2", "n10"), ("rack2", "n9"), ("rack2", "n1")]:
        make_node(pool, f"{rack}-{node}", {"example.com/rack": rack})

    root = pool_domain_tree(pool, machines=True).root

    assert [child.value for child in root.children] == ["rack2", "rack10"]
    assert [m.name for m in root.child("rack2").machines] == ["rack2-n1", "rack2-n9", "rack2-n10"]
