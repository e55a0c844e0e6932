"""Reservation history outlives the machines it was held on."""

from __future__ import annotations

import pytest

from scheduler.models import Node, Reservation
from scheduler.services.pools import node_delete
from tests.factories import make_node, make_pool
from tests.pipeline.helpers import gang_spec
from workflows.lifecycle.reservations import reservations_release
from workflows.models import Task
from workflows.scheduling.cycle import placement_cycle_run
from workflows.services import workflow_submit

pytestmark = pytest.mark.django_db


def test_deleting_a_node_keeps_its_reservation_history(user):
    """Replays the fault run's finding: deleting a node deleted the reservations ever held on it."""
    # given a gang placed on the pool's only node, finished (its reservation released)
    pool = make_pool("history", keys=[("rack", "rack")])
    node = make_node(pool, "a1", {"rack": "r1"}, gpu=4)
    workflow, _created = workflow_submit(user=user, pool_name="history", spec=gang_spec("done", 2, 2))
    assert len(placement_cycle_run(pool_id=pool.pk).placed) == 1
    task_ids = list(Task.objects.filter(workflow=workflow).values_list("pk", flat=True))
    assert reservations_release(task_ids=task_ids) == 2
    # when the machine is removed from the pool
    node_delete(node=node)
    # then both reservations are still there, with their amounts and times, no longer naming the node
    assert not Node.objects.filter(pk=node.pk).exists()
    kept = list(Reservation.objects.filter(task_id__in=task_ids).values_list("node_id", "pool_id", "gpu"))
    assert kept == [(None, pool.pk, 2), (None, pool.pk, 2)]
    assert Reservation.objects.filter(task_id__in=task_ids, released_at__isnull=False).count() == 2


def test_a_deleted_node_keeps_its_name_on_the_tasks_and_reservations_it_held(user, staff_client, client):
    """Replays the report: after ``DELETE /api/pools/{pool}/nodes/{node}/`` a completed task that ran
    there showed ``node: null``. The task and its reservation keep the node's name; the API says the
    node is gone, and the CLI and the workflow page show it "(removed)"."""
    from cli import render

    # given a finished one-task workflow that ran on a1
    pool = make_pool("history", keys=[("rack", "rack")])
    make_node(pool, "a1", {"rack": "r1"}, gpu=4)
    workflow, _created = workflow_submit(user=user, pool_name="history", spec=gang_spec("done", 1, 2))
    placement_cycle_run(pool_id=pool.pk)
    task = Task.objects.get(workflow=workflow)
    reservations_release(task_ids=[task.pk])
    # when the machine is deleted through the API
    deleted = staff_client.delete("/api/pools/history/nodes/a1/")
    # then
    assert deleted.status_code == 204
    assert Task.objects.filter(pk=task.pk).values_list("node_id", "node_name").get() == (None, "a1")
    assert Reservation.objects.filter(task_id=task.pk).values_list("node_id", "node_name").get() == (None, "a1")
    [answer] = staff_client.get(f"/api/workflows/{workflow.workflow_id}/").json()["groups"][0]["tasks"]
    assert (answer["node"], answer["node_removed"]) == ("a1", True)
    header, row = render.task_rows([answer])
    assert row[header.index("NODE"):].startswith("a1 (removed)  ")
    client.force_login(user)
    page = client.get(f"/workflows/{workflow.workflow_id}/")
    assert page.status_code == 200
    assert '<td class="mono">a1 (removed)</td>' in page.content.decode()


@pytest.mark.django_db(transaction=True)
def test_the_migration_copies_the_names_of_the_nodes_tasks_and_reservations_hold():
    """Rows placed before tasks and reservations kept their node's name get it from the node."""
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    before = [("workflows", "0007_teams_and_preemption"), ("scheduler", "0008_grants_protect_their_team_and_user")]
    # after: every app at its latest migration, so that the tests after this one find the schema whole
    after = MigrationExecutor(connection).loader.graph.leaf_nodes()
    # given a placed task and its reservation, written before the migration
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    old = executor.loader.project_state(before).apps
    pool = old.get_model("scheduler", "Pool").objects.create(name="old")
    node = old.get_model("scheduler", "Node").objects.create(pool=pool, name="a7")
    user = old.get_model("auth", "User").objects.create(username="old-user")
    workflow = old.get_model("workflows", "Workflow").objects.create(workflow_id="w-1", name="w", seq=1,
                                                                     pool=pool, submitted_by=user)
    group = old.get_model("workflows", "TaskGroup").objects.create(workflow=workflow, name="g")
    placed = old.get_model("workflows", "Task").objects.create(workflow=workflow, group=group, name="t0", node=node)
    waiting = old.get_model("workflows", "Task").objects.create(workflow=workflow, group=group, name="t1")
    old.get_model("scheduler", "Reservation").objects.create(task=placed, node=node, pool=pool)
    # when
    executor = MigrationExecutor(connection)
    executor.migrate(after)
    # then
    new = executor.loader.project_state(after).apps
    names = dict(new.get_model("workflows", "Task").objects.values_list("pk", "node_name"))
    assert names == {placed.pk: "a7", waiting.pk: ""}
    assert list(new.get_model("scheduler", "Reservation").objects.values_list("node_name", flat=True)) == ["a7"]
    # and the schema is left at the latest migrations for the tests that follow on this database
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
