"""The pod sync settles many gangs in a fixed number of queries, with the outcome gang by gang
(workflows.lifecycle.transitions.gangs_settle), and leaves tasks whose phase did not move alone."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from tests.factories import make_node, make_pool
from workflows.models import StatusTransition, Task, TaskGroup, Workflow
from workflows.scheduling.cycle import placement_cycle_run
from workflows.scheduling.gang_dispatch import gang_dispatch
from workflows.scheduling.pods import pods_sync
from workflows.services import workflow_submit

pytestmark = pytest.mark.django_db

CHAIN = """
workflow:
  name: {name}
  groups:
  - name: first
    tasks:
    - {{name: a, lead: true, image: busybox, command: [true]}}
    - {{name: b, image: busybox, command: [true]}}
  - name: second
    tasks:
    - {{name: c, lead: true, image: busybox, command: [true], inputs: [{{task: a}}]}}
resources:
  default: {{gpu: 1}}
"""


def placed_chains(user, count: int) -> tuple[object, list[Workflow]]:
    """``count`` two-group workflows whose first gangs are placed and dispatched 5 s ago (the
    simulated pods of the pool, 1 s long, have succeeded by now)."""
    pool = make_pool(f"chains{count}", keys=[("rack", "rack")], sim_task_seconds=1)
    for index in range(count):
        make_node(pool, f"n{index}", {"rack": "r1"}, gpu=2)
    workflows = [workflow_submit(user=user, pool_name=pool.name, spec=CHAIN.format(name=f"chain{index}"))[0]
                 for index in range(count)]
    assert len(placement_cycle_run(pool_id=pool.pk).placed) == count
    for workflow in workflows:
        gang_dispatch(group_id=TaskGroup.objects.get(workflow=workflow, name="first").pk)
    Task.objects.filter(workflow__in=workflows, name__in=["a", "b"]).update(
        dispatched_at=timezone.now() - timedelta(seconds=5))
    return pool, workflows


def test_a_sync_settles_many_gangs_in_as_many_queries_as_one(user):
    # given one placed chain, and four
    one, _ = placed_chains(user, 1)
    four, workflows = placed_chains(user, 4)
    # when each pool's pods are synced after they succeeded
    with CaptureQueriesContext(connection) as single:
        assert pods_sync(pool_id=one.pk)["completed"] == 2
    with CaptureQueriesContext(connection) as many:
        assert pods_sync(pool_id=four.pk)["completed"] == 8
    # then four gangs cost the queries of one
    assert len(many.captured_queries) == len(single.captured_queries)
    # and each gang settled as on its own: the first group completed once, the second queued
    for workflow in workflows:
        groups = dict(TaskGroup.objects.filter(workflow=workflow).values_list("name", "status"))
        assert groups == {"first": "COMPLETED", "second": "SCHEDULING"}
        first = TaskGroup.objects.get(workflow=workflow, name="first")
        assert first.finished_at is not None
        moves = list(StatusTransition.objects.filter(group=first, task__isnull=True).values_list(
            "from_status", "to_status"))
        assert moves == [("", "SCHEDULING"), ("SCHEDULING", "INITIALIZING"), ("INITIALIZING", "COMPLETED")]
        workflow.refresh_from_db()
        assert workflow.status == "RUNNING"


def test_a_sync_with_nothing_moving_writes_nothing(user):
    # given dispatched gangs whose pods are still pending (the simulated phase of a pod whose dispatch
    # time is ahead of the clock: no wall-clock race with the sync)
    pool, workflows = placed_chains(user, 2)
    Task.objects.filter(workflow__in=workflows, dispatched_at__isnull=False).update(
        dispatched_at=timezone.now() + timedelta(hours=1))
    # when synced
    with CaptureQueriesContext(connection) as queries:
        counts = pods_sync(pool_id=pool.pk)
    # then nothing changed, and nothing was locked or written
    assert (counts["running"], counts["completed"], counts["failed"]) == (0, 0, 0)
    sql = " ".join(q["sql"] for q in queries.captured_queries).upper()
    assert "FOR UPDATE" not in sql and "UPDATE " not in sql.replace("FOR UPDATE", "") and "INSERT" not in sql


def test_a_sync_that_completes_gangs_costs_a_fixed_number_of_queries(user, django_assert_num_queries):
    """The pod sync's reads on the ORM, pinned: two gangs complete, their capacity is released through
    the lifecycle, the groups waiting on them are queued; the finished tasks' exit actions are read
    from their workflows' specs in one query."""
    # given two placed chains whose first gangs' pods succeeded
    pool, _workflows = placed_chains(user, 2)
    # when / then
    with django_assert_num_queries(25):
        assert pods_sync(pool_id=pool.pk)["completed"] == 4
