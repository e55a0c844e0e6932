"""The submission service's reads and writes, counted (docs/design.md §8: the pool's facts and the
idle pool's verdicts are kept per process while the pool's inventory epoch and keys stand)."""

from __future__ import annotations

import pytest

from scheduler.services.pools import pool_keys_set
from tests.factories import make_nvl72_pool
from tests.pipeline.helpers import gang_spec
from workflows.models import Workflow
from workflows.services import workflow_submit

pytestmark = pytest.mark.django_db


def test_a_submission_to_a_known_pool_runs_a_fixed_number_of_queries(user, django_assert_num_queries):
    # given a pool a first submission has read (its keys, node shapes and idle verdict are kept)
    pool = make_nvl72_pool("counted", zones=1, spines=1, racks=2, nodes=2)
    workflow_submit(user=user, pool_name=pool.name, spec=gang_spec("warm", 2, 4))
    # when the same gang is submitted again
    # then: the user's workflows that have not ended (the active limit), the pool with the user's access,
    # its epochs, the label policy, the user's teams, the savepoint, the name's lock, the name's last number,
    # four inserts (workflow, groups, tasks, history), the release
    with django_assert_num_queries(13):
        workflow, created = workflow_submit(user=user, pool_name=pool.name, spec=gang_spec("again", 2, 4))
    assert (created, workflow.workflow_id) == (True, "again-1")


def test_a_change_of_keys_makes_the_next_submission_read_the_pool_again(user, django_assert_num_queries):
    # given a pool a first submission has read
    pool = make_nvl72_pool("moved", zones=1, spines=1, racks=2, nodes=2)
    workflow_submit(user=user, pool_name=pool.name, spec=gang_spec("warm", 2, 4))
    keys = [(k.key, k.label) for k in pool.topology_keys.order_by("position")]
    # when its keys change (the inventory epoch moves on) and the gang is submitted again
    pool_keys_set(pool=pool, keys=[{"key": key, "label": label} for key, label in keys[:-1]])
    pool.refresh_from_db()
    # then the pool's keys, node shapes and platforms are read again, and the idle pool solved again
    with django_assert_num_queries(18):  # 16, the active limit's count and the label policy
        workflow_submit(user=user, pool_name=pool.name, spec=gang_spec("again", 2, 4))
    assert Workflow.objects.get(workflow_id="again-1").pool_keys == [list(k) for k in keys[:-1]]
