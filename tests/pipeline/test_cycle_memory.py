"""What a placement cycle allocates (docs/design.md §8, "what a cycle allocates"): the gangs' rows read
as JSON text, and the garbage collector off while a cycle runs."""

from __future__ import annotations

import gc

import pytest

from scheduler.reads.snapshot import pool_key_labels
from tests.pipeline.helpers import gang_spec
from workflows.models import TaskGroup, Workflow
from workflows.scheduling.cycle import DatabaseSource, placement_cycle_run
from workflows.services import workflow_submit

pytestmark = pytest.mark.django_db


def submit(user, pool, text) -> Workflow:
    workflow, _ = workflow_submit(user=user, pool_name=pool.name, spec=text)
    return workflow


def test_gang_rows_are_read_as_stored(user, racks):
    # given a queued gang, and one whose task requests are not recorded (a row from before they were)
    workflow = submit(user, racks, gang_spec("job", 2, 4))
    other = submit(user, racks, gang_spec("other", 1, 4))
    TaskGroup.objects.filter(workflow=other).update(task_requests=None)
    group, bare = TaskGroup.objects.get(workflow=workflow), TaskGroup.objects.get(workflow=other)
    # when the cycle's source reads their rows (as JSON text, decoded on use)
    rows = DatabaseSource(racks, pool_key_labels(racks)).gang_rows([group.pk, bare.pk])
    # then each decodes to what its row stores
    assert len(group.task_requests) == 2 and group.constraint_tree["children"]
    assert (rows[group.pk].constraint_tree, rows[group.pk].task_requests) == (group.constraint_tree,
                                                                               group.task_requests)
    assert (rows[bare.pk].constraint_tree, rows[bare.pk].task_requests) == (bare.constraint_tree, [])


def test_the_garbage_collector_is_off_during_a_cycle_and_on_again_after(user, racks):
    # given a gang that fits, and the collector on
    workflow = submit(user, racks, gang_spec("job", 2, 4))
    seen: list[bool] = []
    assert gc.isenabled()
    # when a cycle runs
    result = placement_cycle_run(pool_id=racks.pk, on_locked=lambda: seen.append(gc.isenabled()))
    # then the collector was off while it ran, and is on again
    assert seen == [False]
    assert gc.isenabled()
    assert result.placed == [TaskGroup.objects.get(workflow=workflow).pk]


def test_a_cycle_that_raises_turns_the_collector_back_on(user, racks):
    # given a cycle that fails once it holds the pool's lock
    def fail() -> None:
        raise RuntimeError("the database went away")

    submit(user, racks, gang_spec("job", 2, 4))
    # when it runs
    with pytest.raises(RuntimeError):
        placement_cycle_run(pool_id=racks.pk, on_locked=fail)
    # then the collector is on again, and nothing was placed
    assert gc.isenabled()
    assert TaskGroup.objects.get(workflow__name="job").status == "SCHEDULING"


def test_a_cycle_leaves_the_collector_off_when_its_caller_turned_it_off(user, racks):
    # given a caller that turned the collector off
    submit(user, racks, gang_spec("job", 2, 4))
    gc.disable()
    try:
        # when a cycle runs
        result = placement_cycle_run(pool_id=racks.pk)
        # then the collector is still off after it
        assert not gc.isenabled()
    finally:
        gc.enable()
    assert len(result.placed) == 1
