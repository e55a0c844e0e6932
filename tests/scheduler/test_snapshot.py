"""The placement snapshot keeps the nodes' own columns per process (docs/design.md §8): every change
to them, even one written behind the services' back, must be seen by the next snapshot."""

from __future__ import annotations

import pytest

from scheduler.models import Node, Reservation
from scheduler.placement import Resources
from scheduler.reads.snapshot import snapshot_load_with_ids
from tests.factories import make_node, make_pool
from workflows.models import Task, TaskGroup, Workflow

pytestmark = pytest.mark.django_db


def _free(snapshot, name: str) -> Resources:
    return next(node.free for node in snapshot.nodes if node.name == name)


def test_every_node_column_change_reaches_the_next_snapshot():
    # given a pool whose snapshot was loaded (and kept) once
    pool = make_pool("snap", keys=[("rack", "rack")])
    make_node(pool, "n1", {"rack": "r1"}, gpu=8)
    make_node(pool, "n2", {"rack": "r2"}, gpu=8)
    first, ids = snapshot_load_with_ids(pool)
    assert (_free(first, "n1").gpu, ids.keys()) == (8, {"n1", "n2"})
    # when columns change with plain UPDATEs (no epoch moved, no signal sent), one at a time
    Node.objects.filter(name="n1").update(used_gpu=3)
    after_usage = snapshot_load_with_ids(pool)[0]
    Node.objects.filter(name="n1").update(labels={"rack": "r9"})
    after_label = snapshot_load_with_ids(pool)[0]
    Node.objects.filter(name="n2").update(schedulable=False)
    after_cordon = snapshot_load_with_ids(pool)[0]
    Node.objects.filter(name="n2").delete()
    after_delete, ids_after = snapshot_load_with_ids(pool)
    # then each snapshot shows the change
    assert _free(after_usage, "n1").gpu == 5
    assert next(n.labels for n in after_label.nodes if n.name == "n1") == ("r9",)
    assert next(n.schedulable for n in after_cordon.nodes if n.name == "n2") is False
    assert ([n.name for n in after_delete.nodes], set(ids_after)) == (["n1"], {"n1"})


def test_reservations_are_read_every_time(django_user_model):
    # given a kept snapshot of a pool with one free node
    pool = make_pool("snap2", keys=[("rack", "rack")])
    node = make_node(pool, "n1", {"rack": "r1"}, gpu=8)
    assert _free(snapshot_load_with_ids(pool)[0], "n1").gpu == 8
    user = django_user_model.objects.create(username="u")
    workflow = Workflow.objects.create(workflow_id="w-1", name="w", seq=1, submitted_by=user, pool=pool)
    group = TaskGroup.objects.create(workflow=workflow, name="g", position=0)
    task = Task.objects.create(workflow=workflow, group=group, name="t", position=0)
    # when a reservation appears, then is released
    reservation = Reservation.objects.create(task_id=task.pk, node=node, pool=pool, gpu=6)
    held = _free(snapshot_load_with_ids(pool)[0], "n1").gpu
    Reservation.objects.filter(pk=reservation.pk).update(released_at="2026-01-01T00:00:00Z")
    released = _free(snapshot_load_with_ids(pool)[0], "n1").gpu
    # then
    assert (held, released) == (2, 8)
