"""Placement keeps a platform's tasks on its nodes (docs/spec.md, "Resource"): a gang whose resource
names a platform with node selector labels lands only on nodes carrying them, whatever room the others
have; when its nodes have no room, the waiting reason names the platform. With the real database and
the real placement cycle."""

from __future__ import annotations

import pytest

from scheduler.models import PoolPlatform
from tests.factories import make_node, make_pool
from workflows import jobs
from workflows.models import Task, TaskGroup
from workflows.preview import workflow_dry_run
from workflows.scheduling.cycle import placement_cycle_run
from workflows.services import workflow_submit

pytestmark = pytest.mark.django_db

SPEC = """
workflow:
  name: %(name)s
  resources:
    default: {gpu: 4%(platform)s}
  groups:
  - name: ranks
    tasks:
    - {name: a, image: busybox, command: ["true"], lead: true}
    - {name: b, image: busybox, command: ["true"]}
"""
GB200 = {"nvidia.com/gpu.product": "GB200"}
WHY = "platform 'gb200' places only on nodes labelled nvidia.com/gpu.product=GB200 (2 of the pool's 4 nodes)"


def spec(name: str, platform: str | None = "gb200") -> str:
    return SPEC % {"name": name, "platform": f", platform: {platform}" if platform else ""}


@pytest.fixture
def pool(monkeypatch):
    monkeypatch.setattr(jobs, "_send", lambda name, countdown=None, **kwargs: None)
    pool = make_pool("mixed", keys=[("rack", "rack")])
    # the nodes without the platform's labels come first by name (and would be chosen first)
    for name in ("a-plain-1", "a-plain-2"):
        make_node(pool, name, {"rack": "r1"}, gpu=4)
    for name in ("b-gb200-1", "b-gb200-2"):
        make_node(pool, name, {"rack": "r1", **GB200}, gpu=4)
    PoolPlatform.objects.create(pool=pool, name="gb200", node_selector=GB200)
    PoolPlatform.objects.create(pool=pool, name="any", node_selector={})
    return pool


def nodes_of(workflow) -> list[str]:
    return sorted(Task.objects.filter(workflow=workflow).values_list("node__name", flat=True))


def test_a_gang_of_a_platform_lands_only_on_its_nodes(user, pool):
    # given
    workflow, _ = workflow_submit(user=user, pool_name=pool.name, spec=spec("on-gb200"))

    # when
    placement_cycle_run(pool_id=pool.pk)

    # then
    assert nodes_of(workflow) == ["b-gb200-1", "b-gb200-2"]


def test_when_its_nodes_are_full_the_gang_waits_and_its_reason_names_the_platform(user, pool):
    # given the platform's two nodes are held by a first gang; the two other nodes are free
    first, _ = workflow_submit(user=user, pool_name=pool.name, spec=spec("first"))
    placement_cycle_run(pool_id=pool.pk)
    second, _ = workflow_submit(user=user, pool_name=pool.name, spec=spec("second"))

    # when
    placement_cycle_run(pool_id=pool.pk)

    # then the second waits rather than use the free nodes without the labels
    group = TaskGroup.objects.get(workflow=second)
    assert (nodes_of(first), group.status) == (["b-gb200-1", "b-gb200-2"], "SCHEDULING")
    assert Task.objects.filter(workflow=second, node__isnull=False).count() == 0
    assert group.unschedulable_reason["message"].endswith(WHY)
    assert group.unschedulable_reason["reason"]["platforms"] == [
        {"platform": "gb200", "node_selector": GB200, "nodes": 2, "pool_nodes": 4}]


def test_a_gang_without_a_platform_or_on_one_without_labels_may_use_any_node(user, pool):
    # given the platform's nodes are full
    workflow_submit(user=user, pool_name=pool.name, spec=spec("first"))
    placement_cycle_run(pool_id=pool.pk)
    plain, _ = workflow_submit(user=user, pool_name=pool.name, spec=spec("plain", platform=None))

    # when
    placement_cycle_run(pool_id=pool.pk)

    # then
    assert nodes_of(plain) == ["a-plain-1", "a-plain-2"]


def test_the_dry_run_previews_the_platforms_nodes_and_says_why_it_would_wait(user, pool):
    # given
    free = workflow_dry_run(pool_name=pool.name, spec=spec("preview"), user=user)
    workflow_submit(user=user, pool_name=pool.name, spec=spec("first"))
    placement_cycle_run(pool_id=pool.pk)

    # when
    full = workflow_dry_run(pool_name=pool.name, spec=spec("preview"), user=user)

    # then
    assert sorted(free["groups"][0]["placement"]["tasks"].values()) == ["b-gb200-1", "b-gb200-2"]
    assert full["groups"][0]["placement"]["status"] == "unschedulable"
    assert full["groups"][0]["placement"]["message"].endswith(WHY)
