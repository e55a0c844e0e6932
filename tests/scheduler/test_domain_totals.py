"""The nodes' totals per domain kept per process and updated from the node rows that changed
(scheduler/reads/domain_totals.py): after every kind of node write they equal a build from scratch."""

from __future__ import annotations

import pytest
from django.db import transaction
from django.utils import timezone

from scheduler.models import Node
from scheduler.reads import domain_totals
from scheduler.reads.domain_totals import kept_base_tree
from scheduler.reads.domains import pool_domain_tree
from scheduler.reads.snapshot import nodes_version
from scheduler.selectors import pool_keys

pytestmark = pytest.mark.django_db


@pytest.fixture
def two_buckets(monkeypatch):
    """Buckets of two ids, so that a bucket read again holds a node that did not change beside one that did."""
    monkeypatch.setattr(domain_totals, "BUCKET_IDS", 2)
    domain_totals._kept.clear()
    yield
    domain_totals._kept.clear()


def _kept_and_fresh(pool):
    keys = pool_keys(pool)
    kept = kept_base_tree(pool, keys=keys, nodes_version=nodes_version(pool))
    return kept, pool_domain_tree(pool, keys=keys, reservations=False)


def _relabel(pool, name, **labels):
    node = Node.objects.get(pool=pool, name=name)
    node.labels = {f"topology.kubernetes.io/{key}": value for key, value in labels.items()}
    node.save()


def test_kept_totals_equal_a_fresh_build_after_every_kind_of_node_write(small_pool, two_buckets):
    # given: the kept tree of pool small (a/r1: a1 a2, a/r2: a3 cordoned, b/r1: b1, loose unlabelled)
    first, fresh = _kept_and_fresh(small_pool)
    assert first == fresh
    states = []

    # when: free capacity changes, a node is cordoned, a version-only write
    Node.objects.filter(pool=small_pool, name="a1").update(used_gpu=6)
    Node.objects.filter(pool=small_pool, name="a2").update(schedulable=False)
    Node.objects.filter(pool=small_pool, name="b1").update(updated_at=timezone.now())
    states.append(_kept_and_fresh(small_pool))
    # labels: b1 leaves zone b (which disappears), loose gets labels, a2 moves to a new rack r10
    _relabel(small_pool, "b1", zone="a", rack="r2")
    _relabel(small_pool, "loose", zone="c", rack="r1")
    _relabel(small_pool, "a2", zone="a", rack="r10")
    states.append(_kept_and_fresh(small_pool))
    # a node added (in rack r9 of zone a: natural order before r10) and one removed
    Node.objects.create(pool=small_pool, name="a9", gpu=8, cpu_millis=1000, memory_bytes=2**30,
                        labels={"topology.kubernetes.io/zone": "a", "topology.kubernetes.io/rack": "r9"})
    Node.objects.filter(pool=small_pool, name="a3").delete()
    states.append(_kept_and_fresh(small_pool))
    # every node removed but one unlabelled node
    Node.objects.filter(pool=small_pool).delete()
    Node.objects.create(pool=small_pool, name="solo", gpu=2, cpu_millis=1000, memory_bytes=2**30)
    states.append(_kept_and_fresh(small_pool))

    # then: each kept tree equals the fresh one, domain for domain
    assert [kept == fresh for kept, fresh in states] == [True, True, True, True]
    capacity_only, relabelled, added_removed, solo = (kept for kept, _fresh in states)
    assert (capacity_only.root.gpu_used, capacity_only.root.gpu_free, capacity_only.root.schedulable_node_count) \
        == (6, 2 + 4 + 8, 3)
    assert [d.path for d in relabelled.root.walk()] == [
        (), ("a",), ("a", "r1"), ("a", "r2"), ("a", "r10"), ("c",), ("c", "r1")]
    assert relabelled.unlabelled_node_count == 0
    assert [d.path for d in added_removed.root.walk()] == [
        (), ("a",), ("a", "r1"), ("a", "r2"), ("a", "r9"), ("a", "r10"), ("c",), ("c", "r1")]
    assert [(d.path, d.node_count) for d in solo.root.walk()] == [((), 1), ((None,), 1), ((None, None), 1)]
    assert solo.unlabelled_node_count == 1


def test_the_domains_version_moves_only_when_a_node_joins_leaves_or_changes_domain(small_pool, two_buckets):
    # given
    start = _kept_and_fresh(small_pool)[0].paths_version

    # when
    Node.objects.filter(pool=small_pool, name="a1").update(used_gpu=8, schedulable=False)
    capacity = _kept_and_fresh(small_pool)[0].paths_version
    _relabel(small_pool, "a1", zone="a", rack="r1")  # the same labels written again
    rewritten = _kept_and_fresh(small_pool)[0].paths_version
    _relabel(small_pool, "a1", zone="b", rack="r1")
    moved = _kept_and_fresh(small_pool)[0].paths_version
    Node.objects.filter(pool=small_pool, name="b1").delete()
    removed = _kept_and_fresh(small_pool)[0].paths_version

    # then
    assert capacity == start and rewritten == start
    assert len({start, moved, removed}) == 3


def test_a_write_rolled_back_is_not_served_afterwards(small_pool, two_buckets):
    # given: a write seen by the kept tree inside a transaction that is rolled back
    before, _fresh = _kept_and_fresh(small_pool)
    with transaction.atomic():
        Node.objects.filter(pool=small_pool, name="a2").update(used_gpu=8)
        _relabel(small_pool, "b1", zone="a", rack="r1")
        inside, fresh_inside = _kept_and_fresh(small_pool)
        transaction.set_rollback(True)

    # when
    after, fresh = _kept_and_fresh(small_pool)

    # then: inside it saw the write; after the rollback it is the tree before the write again
    assert inside == fresh_inside and inside.root.gpu_used == 2 + 8
    assert after == fresh == before
    assert after.root.gpu_used == 2 and after.paths_version not in (before.paths_version, inside.paths_version)


def test_an_unchanged_pool_reads_no_node_row(small_pool, two_buckets, django_assert_num_queries):
    # given
    keys = pool_keys(small_pool)
    version = nodes_version(small_pool)
    first = kept_base_tree(small_pool, keys=keys, nodes_version=version)

    # when: the caller's version is the kept one: no query; another one: the buckets' aggregate only
    with django_assert_num_queries(0):
        same = kept_base_tree(small_pool, keys=keys, nodes_version=version)
    with django_assert_num_queries(1):
        other_version = kept_base_tree(small_pool, keys=keys, nodes_version=(0, 0))

    # then: the same tree, nothing rebuilt
    assert same is first and other_version is first


def test_the_buckets_sum_to_the_node_rows_version_and_are_read_once_with_the_fingerprint(
    small_pool, two_buckets, django_assert_num_queries
):
    from scheduler.reads.domains import pool_domain_tree_cached, pool_state

    # given
    keys = pool_keys(small_pool)
    fingerprint, buckets = pool_state(small_pool)
    pool_domain_tree_cached(small_pool, keys=keys, fingerprint=fingerprint, machine_limit=1, node_buckets=buckets)
    Node.objects.filter(pool=small_pool, name="b1").update(used_gpu=1)

    # when: the fingerprint after a write, and the kept tree for it: the changed bucket's rows and
    # the reservations are read, the buckets not again
    fingerprint, buckets = pool_state(small_pool)
    with django_assert_num_queries(2):
        tree = pool_domain_tree_cached(small_pool, keys=keys, fingerprint=fingerprint, machine_limit=1,
                                       node_buckets=buckets)

    # then
    assert fingerprint[:2] == nodes_version(small_pool)
    assert len(buckets) == 3  # ids of 5 consecutive nodes in buckets of two
    assert tree == pool_domain_tree(small_pool, keys=keys, machines=True, machine_limit=1)
    assert tree.root.gpu_used == 2 + 1
