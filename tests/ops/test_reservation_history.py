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
