"""The placement cycle at queue depth (docs/design.md §8): every fitting gang is placed in one cycle
whatever its position, queries do not grow with the queue, proofs are not redone until capacity
comes back, a cycle out of time resumes where it stopped, and the decisions equal the baseline's."""

from __future__ import annotations

import itertools
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from bench.kit.cycle_baseline import baseline_cycle_run
from bench.kit.queue import queue_copies
from tests.factories import make_node, make_pool
from tests.pipeline.helpers import assert_never_overcommitted, assert_reservations_match_tasks, gang_spec
from workflows.models import Task, TaskGroup, Workflow
from workflows.scheduling.cycle import placement_cycle_run, walk
from workflows.services import workflow_cancel, workflow_submit


@pytest.fixture(autouse=True)
def growing_pools(settings):
    """Queues of gangs that cannot fit today's inventory: pools that grow (no never_fits refusal)."""
    settings.OSMO_REFUSE_NEVER_FITS = False


@pytest.fixture
def wide(db):
    """Four racks of four 4-GPU nodes (64 GPUs)."""
    pool = make_pool("wide", keys=[("rack", "rack")])
    for rack in range(4):
        for n in range(4):
            make_node(pool, f"r{rack}n{n}", {"rack": f"r{rack}"}, gpu=4)
    return pool


def _queue(user, pool, name: str, tasks: int, gpu: int, copies: int, *, key: str | None = "rack",
           after: timedelta = timedelta(0)) -> list[Workflow]:
    template, _ = workflow_submit(user=user, pool_name=pool.name, spec=gang_spec(name, tasks, gpu, key=key))
    start = template.submitted_at + after
    return [template, *queue_copies(template, copies - 1, first=start + timedelta(milliseconds=1))] if copies > 1 \
        else [template]


def _placed(workflow: Workflow) -> bool:
    return TaskGroup.objects.get(workflow=workflow).status == "INITIALIZING"


@pytest.mark.django_db
def test_a_gang_that_fits_at_position_1000_is_placed_in_one_cycle(user, wide, no_broker):
    """999 gangs that can never fit a rack (5 nodes of one rack) queue ahead of one that fits."""
    # given
    blocked = _queue(user, wide, "huge", 5, 4, 999)
    fits = _queue(user, wide, "small", 2, 4, 1, after=timedelta(seconds=5))[0]
    # when one cycle runs
    result = placement_cycle_run(pool_id=wide.pk)
    # then the last gang is placed, the 999 share one proof, and nothing is over-committed
    assert result.placed == [TaskGroup.objects.get(workflow=fits).pk]
    assert len(result.unschedulable) == 999
    assert (result.solved, result.shared, result.budget_exhausted) == (2, 998, False)
    assert TaskGroup.objects.filter(workflow__in=blocked, reason_code="no_domain").count() == 999
    assert_never_overcommitted(wide)


def _cycle_queries(pool) -> int:
    with CaptureQueriesContext(connection) as queries:
        placement_cycle_run(pool_id=pool.pk)
    return len(queries)


@pytest.mark.django_db
def test_query_count_does_not_grow_with_the_queue(user, no_broker):
    # given two pools with the same mix (two kinds of gangs that cannot fit, one that fits) at depth 10 and 200
    counts = {}
    for depth in (10, 200):
        pool = make_pool(f"depth{depth}", keys=[("rack", "rack")])
        for n in range(4):
            make_node(pool, f"d{depth}n{n}", {"rack": "r1"}, gpu=4)
        _queue(user, pool, f"never{depth}", 5, 4, depth // 2)
        _queue(user, pool, f"toobig{depth}", 17, 1, depth // 2)
        _queue(user, pool, f"fits{depth}", 1, 4, 1, after=timedelta(seconds=5))
        # when the first cycle and an idle cycle run
        counts[depth] = (_cycle_queries(pool), _cycle_queries(pool))
    # then the counts are equal, and the idle cycle reads little
    assert counts[10] == counts[200], counts
    assert counts[200][1] < counts[200][0]


@pytest.mark.django_db
def test_a_proven_gang_is_not_solved_again_until_capacity_is_released(user, wide, no_broker):
    # given a gang holding 12 of 16 nodes and one that needs 8 nodes (no constraint)
    holder = _queue(user, wide, "holder", 12, 4, 1, key=None)[0]
    waiter = _queue(user, wide, "waiter", 8, 4, 1, key=None, after=timedelta(seconds=1))[0]
    first = placement_cycle_run(pool_id=wide.pk)
    assert first.placed == [TaskGroup.objects.get(workflow=holder).pk]
    assert first.unschedulable == [TaskGroup.objects.get(workflow=waiter).pk]
    # when further cycles run with nothing released
    again = placement_cycle_run(pool_id=wide.pk)
    # then the waiter is not solved again (nothing changed: the cycle does not even walk the queue)
    assert (again.solved, again.idle, again.placed) == (0, True, [])
    # when another gang joins the queue (the queue changed, the capacity did not)
    another = _queue(user, wide, "another", 6, 4, 1, key=None, after=timedelta(seconds=2))[0]
    joined = placement_cycle_run(pool_id=wide.pk)
    # then only the newcomer is solved; the waiter's proof stands
    assert (joined.solved, joined.proven, joined.placed) == (1, 1, [])
    # when the holder is cancelled (its capacity released)
    workflow_cancel(workflow_pk=holder.pk, user=user)
    after = placement_cycle_run(pool_id=wide.pk)
    # then both are solved once more and placed
    assert (after.solved, after.placed) == (2, [TaskGroup.objects.get(workflow=w).pk for w in (waiter, another)])
    assert_reservations_match_tasks(wide)


@pytest.mark.django_db
def test_a_cycle_out_of_time_resumes_where_it_stopped(user, wide, no_broker, monkeypatch, settings):
    """Each solve takes one (fake) second and the budget is 2.5 s: a cycle decides two gangs."""
    # given six gangs of distinct shapes that cannot fit, then one that fits
    for extra in range(1, 7):
        _queue(user, wide, f"never{extra}", 16 + extra, 4, 1, key=None)
    fits = _queue(user, wide, "fits", 1, 4, 1, key=None, after=timedelta(seconds=5))[0]
    clock = itertools.count()
    monkeypatch.setattr(walk, "_clock", lambda: next(clock))
    settings.OSMO_CYCLE_BUDGET_SECONDS = 2.5
    # when cycles run one after the other
    results = [placement_cycle_run(pool_id=wide.pk) for _ in range(4)]
    # then each continues after the last one's stop, and the last gang is reached in the fourth
    assert [(r.budget_exhausted, r.resumed, r.solved) for r in results] == [
        (True, False, 2), (True, True, 2), (True, True, 2), (True, True, 1)
    ]
    assert results[3].placed == [TaskGroup.objects.get(workflow=fits).pk]


@pytest.mark.django_db
def test_decisions_equal_the_baseline_algorithms(user, wide, no_broker):
    # given a mixed queue: gangs that fit, gangs that never fit, gangs that fit only until others are placed
    for index, (tasks, gpu, key) in enumerate(
        [(2, 4, "rack"), (5, 4, "rack"), (3, 2, "rack"), (4, 4, None), (9, 4, None), (4, 4, "rack"), (1, 1, None)]
    ):
        _queue(user, wide, f"mix{index}", tasks, gpu, 3, key=key, after=timedelta(seconds=index))

    def decisions() -> dict[str, dict[str, str]]:
        return {
            f"{t.workflow.workflow_id}/{t.name}": t.node.name
            for t in Task.objects.filter(workflow__pool=wide, node__isnull=False).select_related("workflow", "node")
        }

    # when the baseline algorithm runs (rolled back), then the incremental one
    with transaction.atomic():
        baseline = baseline_cycle_run(pool_id=wide.pk)
        expected = decisions()
        transaction.set_rollback(True)
    result = placement_cycle_run(pool_id=wide.pk)
    # then they placed the same gangs on the same nodes
    assert sorted(result.placed) == sorted(baseline.placed)
    assert decisions() == expected
    assert len(expected) > 0 and result.shared > 0
    assert_never_overcommitted(wide)


@pytest.mark.django_db
def test_a_cycle_and_an_idle_cycle_cost_a_fixed_number_of_queries(user, wide, no_broker, django_assert_num_queries):
    """The cycle's reads on the ORM, pinned: the first cycle of a small queue (two gangs that never fit,
    one that fits and is placed), then an idle one. The placed gang's workflow is locked once, and its
    gang moved by one UPDATE that returns it (no read of the still-queued gangs before); one aggregate
    says the queue's fingerprint and that no group waits and no gang may have timed out (neither is
    read). A cycle that solves reads the pool's platforms once (one query; a second, of node labels,
    only when some platform selects nodes)."""
    # given
    _queue(user, wide, "never", 5, 4, 2)
    _queue(user, wide, "fits", 1, 4, 1, after=timedelta(seconds=5))
    # when / then
    with django_assert_num_queries(26):
        first = placement_cycle_run(pool_id=wide.pk)
    with django_assert_num_queries(6):
        idle = placement_cycle_run(pool_id=wide.pk)
    assert (len(first.placed), len(first.unschedulable), idle.idle) == (1, 2, True)
