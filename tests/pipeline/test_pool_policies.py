"""Pool policies a pool may leave unset (docs/pools.md, docs/operations.md "Where a knob lives"): a pool
that sets ``starvation_wait`` or ``refuse_never_fits`` behaves by its own value, through the real
submission and placement cycle, while a pool beside it that sets none follows the deployment's
``OSMO_STARVATION_SECONDS`` / ``OSMO_REFUSE_NEVER_FITS``."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from scheduler.models import Pool
from tests.factories import make_node, make_pool
from tests.pipeline.helpers import gang_spec
from workflows.errors import WorkflowNeverFitsError
from workflows.models import TaskGroup, Workflow
from workflows.scheduling.cycle import placement_cycle_run
from workflows.services import workflow_submit

pytestmark = pytest.mark.django_db


def _racks(name: str, **fields) -> Pool:
    """Two racks of two 4-GPU nodes, as the ``racks`` fixture."""
    pool = make_pool(name, keys=[("rack", "rack")], sim_task_seconds=1, **fields)
    for rack, prefix in (("r1", "a"), ("r2", "b")):
        for n in (1, 2):
            make_node(pool, f"{name}-{prefix}{n}", {"rack": rack}, gpu=4)
    return pool


def submit(user, pool: Pool, text: str) -> Workflow:
    workflow, _ = workflow_submit(user=user, pool_name=pool.name, spec=text)
    return workflow


def _small_gang_behind_a_big_one_that_waited_two_minutes(user, pool: Pool) -> TaskGroup:
    """The scene of ``test_starving_gang_stops_backfill``: one node busy, a gang of four whole nodes
    queued two minutes ago, then a one-node gang behind it; one cycle. Returns the small gang."""
    submit(user, pool, gang_spec(f"{pool.name}-hold", 1, 4, key=None))
    placement_cycle_run(pool_id=pool.pk)
    big = submit(user, pool, gang_spec(f"{pool.name}-big", 4, 4, key=None))
    TaskGroup.objects.filter(workflow=big).update(scheduling_since=timezone.now() - timedelta(seconds=120))
    small = submit(user, pool, gang_spec(f"{pool.name}-small", 1, 4, key=None))
    placement_cycle_run(pool_id=pool.pk)
    return TaskGroup.objects.get(workflow=small)


def test_a_pools_own_starvation_wait_stops_backfill_while_a_pool_on_the_default_backfills(user, settings):
    # given the deployment's default (600 s) and a pool that starves its big gangs after one minute
    settings.OSMO_STARVATION_SECONDS = 600
    strict = _racks("strict", starvation_wait=60)
    default = _racks("default")
    # when the same two-minute-old big gang waits in each, a small gang behind it
    held = _small_gang_behind_a_big_one_that_waited_two_minutes(user, strict)
    passed = _small_gang_behind_a_big_one_that_waited_two_minutes(user, default)
    # then the first pool holds machines for the big gang and the small one waits behind it
    assert held.status == "SCHEDULING"
    assert held.unschedulable_reason["code"] == "behind_starving_group"
    # and the second, whose big gang has not waited 600 s, lets it pass
    assert passed.status == "INITIALIZING"


def test_a_pool_that_never_starves_its_gangs_backfills_while_the_default_holds(user, settings):
    # given a deployment that starves after one minute and a pool that sets a day
    settings.OSMO_STARVATION_SECONDS = 60
    patient = _racks("patient", starvation_wait=24 * 3600)
    default = _racks("default")
    # when
    passed = _small_gang_behind_a_big_one_that_waited_two_minutes(user, patient)
    held = _small_gang_behind_a_big_one_that_waited_two_minutes(user, default)
    # then
    assert passed.status == "INITIALIZING"
    assert held.status == "SCHEDULING" and held.unschedulable_reason["code"] == "behind_starving_group"


def test_a_growing_pool_queues_a_gang_larger_than_itself_while_a_pool_on_the_default_refuses_it(user, settings):
    # given the deployment's default (refuse) and a pool that grows (refuse_never_fits off)
    settings.OSMO_REFUSE_NEVER_FITS = True
    growing = _racks("growing", refuse_never_fits=False)
    fixed = _racks("fixed")
    # when a gang of five whole nodes (the pools have four) is submitted to each
    queued = submit(user, growing, gang_spec("later", 5, 4, key=None))
    with pytest.raises(WorkflowNeverFitsError):
        submit(user, fixed, gang_spec("never", 5, 4, key=None))
    # then the growing pool queues it and the fixed pool stored nothing
    placement_cycle_run(pool_id=growing.pk)
    assert TaskGroup.objects.get(workflow=queued).status == "SCHEDULING"
    assert not Workflow.objects.filter(pool=fixed).exists()


def test_a_fixed_pool_refuses_a_gang_larger_than_itself_while_the_deployment_accepts_them(user, settings):
    # given a deployment whose pools grow, and one fixed pool
    settings.OSMO_REFUSE_NEVER_FITS = False
    fixed = _racks("fixed", refuse_never_fits=True)
    growing = _racks("growing")
    # when
    with pytest.raises(WorkflowNeverFitsError):
        submit(user, fixed, gang_spec("never", 5, 4, key=None))
    queued = submit(user, growing, gang_spec("later", 5, 4, key=None))
    # then
    assert not Workflow.objects.filter(pool=fixed).exists()
    assert Workflow.objects.get(pool=growing) == queued
