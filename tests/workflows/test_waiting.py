"""Why a queued gang waits (docs/design.md §11): its place in the queue, what is ahead, and who holds
the best domain of the constraint that failed."""

from __future__ import annotations

import pytest

from tests.factories import make_node, make_pool
from tests.pipeline.helpers import gang_spec
from workflows.models import TaskGroup
from workflows.scheduling.cycle import placement_cycle_run
from workflows.selectors import group_waiting
from workflows.services import workflow_submit

pytestmark = pytest.mark.django_db


def test_waiting_gang_says_its_place_and_who_holds_the_best_rack(user):
    # given two racks of two 4-GPU nodes: "hog" holds rack r1 and half of r2, then three gangs queue
    pool = make_pool("busy", keys=[("rack", "rack")])
    for rack, prefix in (("r1", "a"), ("r2", "b")):
        for n in (1, 2):
            make_node(pool, f"{prefix}{n}", {"rack": rack}, gpu=4)
    hog, _ = workflow_submit(user=user, pool_name=pool.name, spec=gang_spec("hog", 2, 4))
    half, _ = workflow_submit(user=user, pool_name=pool.name, spec=gang_spec("half", 1, 4))
    placement_cycle_run(pool_id=pool.pk)
    first, _ = workflow_submit(user=user, pool_name=pool.name, spec=gang_spec("first", 2, 4), priority="LOW")
    urgent, _ = workflow_submit(user=user, pool_name=pool.name, spec=gang_spec("urgent", 2, 4), priority="HIGH")
    second, _ = workflow_submit(user=user, pool_name=pool.name, spec=gang_spec("second", 2, 4))
    placement_cycle_run(pool_id=pool.pk)
    # when
    waiting = group_waiting(TaskGroup.objects.select_related("workflow__pool").get(workflow=second))
    # then: HIGH "urgent" is ahead, LOW "first" is behind; the best rack (r2, one free node) is held by "half"
    assert waiting is not None
    assert (waiting["position"], waiting["ahead"]) == (2, {"HIGH": 1, "NORMAL": 0, "LOW": 0})
    assert waiting["domain"] == {"key": "rack", "path": ["r2"]}
    assert waiting["holders"] == [{"workflow": half.workflow_id, "gpu": 4, "tasks": 1}]
    low = group_waiting(TaskGroup.objects.select_related("workflow__pool").get(workflow=first))
    assert low is not None and (low["position"], low["ahead"]) == (3, {"HIGH": 1, "NORMAL": 1, "LOW": 0})
    assert group_waiting(TaskGroup.objects.select_related("workflow__pool").get(workflow=hog)) is None
