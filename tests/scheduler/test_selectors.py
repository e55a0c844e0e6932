"""The free-capacity query: capacity - external usage - active reservations, per node and per domain."""

from __future__ import annotations

import pytest

from scheduler import selectors
from scheduler.models import Node

pytestmark = pytest.mark.django_db


def _node(pool, name):
    return selectors.node_queryset_with_usage(pool).get(name=name)


def test_node_free_subtracts_external_usage_and_active_reservations_only(small_pool, reserve):
    # given: a1 has 8 GPUs, 2 used outside; 3 reserved by active tasks, 4 by a finished one
    a1 = Node.objects.get(pool=small_pool, name="a1")
    reserve(a1, gpu=1, cpu_millis=500)
    reserve(a1, gpu=2, memory_bytes=1024)
    reserve(a1, gpu=4, released=True)

    # when
    node = _node(small_pool, "a1")

    # then
    assert selectors.node_usage_dict(node) == {
        "capacity": {"gpu": 8, "cpu_millis": 32_000, "memory_bytes": 256 * 1024**3, "storage_bytes": 1024**4},
        "used": {"gpu": 2, "cpu_millis": 0, "memory_bytes": 0, "storage_bytes": 0},
        "reserved": {"gpu": 3, "cpu_millis": 500, "memory_bytes": 1024, "storage_bytes": 0},
        "free": {"gpu": 3, "cpu_millis": 31_500, "memory_bytes": 256 * 1024**3 - 1024, "storage_bytes": 1024**4},
    }


def test_pool_summary_totals_and_domains(small_pool, reserve):
    # given
    reserve(Node.objects.get(pool=small_pool, name="a2"), gpu=5)
    reserve(Node.objects.get(pool=small_pool, name="a3"), gpu=1)  # cordoned: reserved counts, free does not

    # when
    summary = selectors.pool_capacity_summary(small_pool)

    # then
    totals = summary["totals"]
    assert (totals["node_count"], totals["schedulable_node_count"]) == (5, 4)
    assert totals["capacity"]["gpu"] == 36
    assert totals["used"]["gpu"] == 2
    assert totals["reserved"]["gpu"] == 6
    assert totals["free"]["gpu"] == (8 - 2) + (8 - 5) + 4 + 8  # a1 + a2 + b1 + loose; a3 cordoned
    zone, rack = summary["keys"]
    assert [(d["path"], d["free"]["gpu"], d["node_count"]) for d in zone["domains"]] == [
        ({"zone": "a"}, 9, 3),
        ({"zone": "b"}, 4, 1),
    ]
    # rack r1 of zone a and rack r1 of zone b are different racks
    assert [(d["path"], d["capacity"]["gpu"], d["reserved"]["gpu"], d["free"]["gpu"]) for d in rack["domains"]] == [
        ({"zone": "a", "rack": "r1"}, 16, 5, 9),
        ({"zone": "a", "rack": "r2"}, 8, 1, 0),
        ({"zone": "b", "rack": "r1"}, 4, 0, 4),
    ]
    assert (zone["domain_count"], rack["domain_count"]) == (2, 3)
    assert zone["unlabelled"]["node_count"] == 1 and zone["unlabelled"]["free"]["gpu"] == 8


def test_over_committed_node_does_not_eat_its_neighbours_free_capacity(small_pool, reserve):
    # given: b1 (4 GPUs) ends up with 6 reserved (external usage grew after placement, or a bug)
    reserve(Node.objects.get(pool=small_pool, name="b1"), gpu=6)

    summary = selectors.pool_capacity_summary(small_pool)

    assert _node(small_pool, "b1").free_gpu == -2
    zone_b = summary["keys"][0]["domains"][1]
    assert (zone_b["path"], zone_b["free"]["gpu"], zone_b["reserved"]["gpu"]) == ({"zone": "b"}, 0, 6)
    assert summary["totals"]["free"]["gpu"] == 6 + 8 + 8


def test_pools_totals_match_the_summary(small_pool, reserve, generated_pool):
    other = generated_pool("gen", racks=1)
    reserve(Node.objects.get(pool=small_pool, name="a2"), gpu=5)

    totals = selectors.pools_totals([small_pool.pk, other.pk])

    assert totals[small_pool.pk].as_dict() == selectors.pool_capacity_summary(small_pool)["totals"]
    assert totals[other.pk].as_dict() == selectors.pool_capacity_summary(other)["totals"]
    assert totals[other.pk].node_count == 72


def test_summary_runs_a_fixed_number_of_queries(generated_pool, reserve, django_assert_num_queries):
    small = generated_pool("small-gen", racks=1)
    big = generated_pool("big-gen", racks=4)
    for node in Node.objects.filter(pool=big)[:30]:
        reserve(node, gpu=1)

    for pool in (small, big):
        keys = list(pool.topology_keys.order_by("position"))
        with django_assert_num_queries(2):
            selectors.pool_capacity_summary(pool, keys=keys)

