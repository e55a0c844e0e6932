"""``osmo.bulk``: rows written by bulk_insert and bulk_set read back as the ORM's own writes do."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from osmo.bulk import bulk_insert, bulk_set
from tests.factories import make_node, make_pool
from tests.pipeline.helpers import gang_spec
from workflows.models import StatusTransition, Task, TaskGroup
from workflows.services import workflow_submit

pytestmark = pytest.mark.django_db

_COMPARED = ("name", "position", "lead", "status", "image", "command", "args", "environment", "gpu", "cpu_millis",
             "memory_bytes", "storage_bytes", "nodes_excluded", "topology", "node_id", "exit_code")


def _rows(tasks: list[Task]) -> list[tuple]:
    return [tuple(getattr(t, f) for f in _COMPARED) for t in Task.objects.filter(pk__in=[t.pk for t in tasks])
            .order_by("position")]


def test_bulk_insert_stores_what_bulk_create_stores_and_reads_back_keys(user):
    # given: a stored gang, and two copies of new tasks for it (JSON, text, numbers, a null key)
    pool = make_pool("bulk")
    make_node(pool, "n1", {}, gpu=8)
    workflow, _ = workflow_submit(user=user, pool_name=pool.name, spec=gang_spec("bulk", 1, 1, key=None))
    group = TaskGroup.objects.get(workflow=workflow)

    def made(offset: int) -> list[Task]:
        return [Task(workflow=workflow, group=group, name=f"x{offset + i}", position=offset + i, lead=False,
                     status="SCHEDULING", image="busybox", command=["sh", "-c", "echo 'é'"], args=[],
                     environment={"B": "2", "A": "1"}, gpu=i, cpu_millis=1500, memory_bytes=2**40,
                     storage_bytes=0, nodes_excluded=["n9"], topology=[{"key": "rack", "group": "g"}])
                for i in range(3)]

    ours, django = made(10), made(20)
    # when
    with CaptureQueriesContext(connection) as captured:
        bulk_insert(Task, ours, keys=True)
    Task.objects.bulk_create(django)
    # then: one statement; keys set in row order; the rows equal bulk_create's but for name and position
    assert len(captured) == 1
    assert [t.pk for t in ours] == sorted(t.pk for t in ours) and all(not t._state.adding for t in ours)
    strip = [row[2:] for row in _rows(ours)]
    assert strip == [row[2:] for row in _rows(django)]
    stored = Task.objects.get(pk=ours[0].pk)
    assert stored.updated_at is not None and stored.environment == {"A": "1", "B": "2"}


def test_bulk_insert_without_keys_sets_the_history_time_once(user):
    pool = make_pool("bulk2")
    make_node(pool, "n1", {}, gpu=8)
    workflow, _ = workflow_submit(user=user, pool_name=pool.name, spec=gang_spec("bulk2", 1, 1, key=None))
    rows = [StatusTransition(workflow=workflow, from_status="A", to_status=f"B{i}", message="m") for i in range(3)]
    bulk_insert(StatusTransition, rows)
    assert all(row.pk is None for row in rows)
    stored = list(StatusTransition.objects.filter(workflow=workflow, from_status="A").order_by("pk"))
    assert [s.to_status for s in stored] == ["B0", "B1", "B2"]
    assert len({s.at for s in stored}) == 1 and stored[0].at == rows[0].at


def test_bulk_set_writes_each_rows_own_values(user):
    pool = make_pool("bulk3")
    make_node(pool, "n1", {}, gpu=8)
    workflow, _ = workflow_submit(user=user, pool_name=pool.name, spec=gang_spec("bulk3", 3, 1, key=None))
    tasks = list(Task.objects.filter(workflow=workflow).order_by("position"))
    for i, task in enumerate(tasks):
        task.status, task.exit_code, task.environment = f"S{i}", i if i else None, {"i": str(i)}
    bulk_set(Task, tasks[:2], ["status", "exit_code", "environment"])
    stored = list(Task.objects.filter(workflow=workflow).order_by("position").values_list(
        "status", "exit_code", "environment"))
    assert stored[:2] == [("S0", None, {"i": "0"}), ("S1", 1, {"i": "1"})]
    assert stored[2][0] != "S2"
