"""Never fits means never (docs/design.md §11): the submission check solves on the pool's capacity as if
nothing at all ran, ours or others', cordoned nodes included. External usage comes and goes: a gang that
fits capacity but not today's usage is queued, with a reason naming the busy domains."""

from __future__ import annotations

import pytest

from scheduler.models import Node
from tests.factories import make_node, make_pool
from tests.pipeline.helpers import gang_spec
from workflows.models import Workflow
from workflows.scheduling.cycle import placement_cycle_run
from workflows.selectors import workflow_detail_queryset
from workflows.waiting import workflow_waiting

pytestmark = pytest.mark.django_db


def _busy_racks():
    """Two racks of two 4-GPU nodes; every GPU held by pods outside the service (``used_gpu``)."""
    pool = make_pool("shared", keys=[("rack", "rack")])
    for rack, prefix in (("r1", "a"), ("r2", "b")):
        for n in (1, 2):
            make_node(pool, f"{prefix}{n}", {"rack": rack}, gpu=4, used_gpu=4)
    return pool


def test_a_gang_blocked_only_by_external_usage_is_queued_with_the_busy_racks_named(user_client, user):
    """The defect: the check subtracted external usage and refused this gang (400 never_fits) although
    it fits the racks as soon as the other tenants' pods finish."""
    # given every GPU of the pool held by someone else's pods
    pool = _busy_racks()
    # when a gang of two 4-GPU tasks in one rack is submitted
    response = user_client.post("/api/workflows/", {"pool": "shared", "spec": gang_spec("wait", 2, 4)},
                                format="json")
    # then it is queued, and after a cycle its reason names the racks as busy
    assert response.status_code == 201, response.json()
    placement_cycle_run(pool_id=pool.pk)
    workflow = workflow_detail_queryset(user=user).get(pk=Workflow.objects.get().pk)
    (answer,) = workflow_waiting(workflow).values()
    assert answer["reason"] == ("rack=default (required) needs 2 tasks of 4 gpu in one rack; every rack is busy "
                                "(2 racks exist, none has room for any of these tasks now) "
                                "(the whole pool fits 0 of 2)")
    assert answer["domains"] == {"key": "rack", "exist": 2, "schedulable": 2}


def test_a_gang_on_cordoned_nodes_only_is_queued(user_client):
    # given a rack whose nodes are all cordoned (they come back)
    pool = make_pool("cordoned", keys=[("rack", "rack")])
    for n in (1, 2):
        make_node(pool, f"c{n}", {"rack": "r1"}, gpu=4, schedulable=False)
    # when
    response = user_client.post("/api/workflows/", {"pool": pool.name, "spec": gang_spec("later", 2, 4)},
                                format="json")
    # then
    assert response.status_code == 201, response.json()
    assert Workflow.objects.count() == 1


def test_a_gang_larger_than_any_rack_could_ever_hold_is_refused(user_client):
    # given racks of two 4-GPU nodes, half of them busy with other pods (usage does not matter)
    pool = _busy_racks()
    Node.objects.filter(name__in=["a2", "b2"]).update(used_gpu=0)
    # when three 4-GPU tasks must share one rack
    response = user_client.post("/api/workflows/", {"pool": pool.name, "spec": gang_spec("big", 3, 4)},
                                format="json")
    # then 400 never_fits saying what the largest rack could ever hold, and nothing stored
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "never_fits"
    [group] = body["details"]["groups"]
    assert "the largest rack could ever hold 2 of 3" in group["message"], group["message"]
    assert body["message"].startswith("Group(s) ")
    assert "the largest rack could ever hold 2 of 3" in body["message"]
    assert Workflow.objects.count() == 0
