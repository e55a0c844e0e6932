"""A pool's minimum runtime (docs/design.md §9): a running LOW gang that has run less than it is no
preemption victim until it has, and the gang that would preempt it is told when it can; on PostgreSQL.
Time is driven by the gangs' ``started_at`` rows and the cycle's ``now``, never by sleeping."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from scheduler.models import Pool, Reservation
from tests.factories import make_nvl72_pool
from tests.pipeline.helpers import gang_spec
from workflows.choices import TaskStatus
from workflows.models import PoolCycleState, TaskGroup, Workflow
from workflows.scheduling.cycle import placement_cycle_run
from workflows.services import workflow_cancel, workflow_submit

pytestmark = pytest.mark.django_db


@pytest.fixture
def pool():
    # 2 zones x 1 spine x 2 racks x 4 nodes of 4 GPUs: 64 GPUs, four 16-GPU racks; ten minutes
    return make_nvl72_pool("shared", zones=2, spines=1, racks=2, nodes=4, min_runtime=600)


def submit(user, name: str, tasks: int, priority: str, *, key: str | None = None) -> Workflow:
    workflow, _ = workflow_submit(user=user, pool_name="shared", spec=gang_spec(name, tasks, 4, key=key),
                                  priority=priority)
    return workflow


def group_of(workflow: Workflow) -> TaskGroup:
    return TaskGroup.objects.get(workflow=workflow)


def fill_with_low(user, pool: Pool, started: datetime) -> list[Workflow]:
    """Four LOW gangs of a rack each (the pool full), all started at ``started``."""
    lows = [submit(user, f"low{i}", 4, "LOW", key="rack") for i in range(4)]
    placement_cycle_run(pool_id=pool.pk)
    assert {group_of(w).status for w in lows} == {TaskStatus.INITIALIZING}
    TaskGroup.objects.filter(workflow__in=lows).update(started_at=started)
    return lows


def test_a_low_gang_within_the_minimum_runtime_is_kept_and_the_preemptor_told_when(user, pool):
    # given the pool full of LOW gangs that started a minute ago (the minimum runtime is ten minutes)
    now = timezone.now().replace(microsecond=0)
    lows = fill_with_low(user, pool, now - timedelta(seconds=60))
    # when a HIGH gang of one rack arrives
    high = submit(user, "high", 4, "HIGH", key="rack")
    result = placement_cycle_run(pool_id=pool.pk, now=now)
    # then nothing is evicted: it waits, and its reason says when a LOW gang becomes preemptible, where
    assert result.preempted == 0
    assert group_of(high).status == TaskStatus.SCHEDULING
    assert {group_of(w).status for w in lows} == {TaskStatus.INITIALIZING}
    assert {group_of(w).preemptions for w in lows} == {0}
    at = now + timedelta(seconds=540)
    reason = group_of(high).unschedulable_reason
    assert reason["preemptible_at"] == at.astimezone(UTC).isoformat()
    racks = {f"z{z}-s1-r{r}" for z in (1, 2) for r in (1, 2)}
    said = [f"; a LOW gang on {rack} becomes preemptible at {at.astimezone(UTC):%H:%M} UTC "
            "(the pool's minimum runtime)" for rack in racks]
    assert any(reason["message"].endswith(s) for s in said), reason["message"]
    # and it is no proof: the pool wakes when that gang's minimum runtime ends
    assert group_of(high).proof_epoch is None
    assert datetime.fromisoformat(PoolCycleState.objects.get(pool=pool).state["wake_at"]) == at
    # and a cycle a second before then (nothing changed) still evicts nothing
    assert placement_cycle_run(pool_id=pool.pk, now=at - timedelta(seconds=1)).preempted == 0
    assert group_of(high).status == TaskStatus.SCHEDULING


def test_once_the_minimum_runtime_is_over_and_the_gang_has_waited_it_the_low_gang_is_preempted(user, pool):
    # given the same HIGH gang waiting behind LOW gangs that started a minute ago
    now = timezone.now().replace(microsecond=0)
    lows = fill_with_low(user, pool, now - timedelta(seconds=60))
    high = submit(user, "high", 4, "HIGH", key="rack")
    assert placement_cycle_run(pool_id=pool.pk, now=now).preempted == 0
    # when the cycle runs at the time its reason gave, the LOW gangs preemptible
    result = placement_cycle_run(pool_id=pool.pk, now=now + timedelta(seconds=540))
    # then it still waits: it has waited less than the minimum runtime since it first did not fit, and
    # keeps a rack from LOW work until then
    assert result.preempted == 0
    until = now + timedelta(seconds=600)
    assert group_of(high).unschedulable_reason["keeping"]["until"] == until.astimezone(UTC).isoformat()
    assert datetime.fromisoformat(PoolCycleState.objects.get(pool=pool).state["wake_at"]) == until
    # and at that time one LOW gang is evicted for it
    result = placement_cycle_run(pool_id=pool.pk, now=until)
    assert result.preempted == 1
    assert group_of(high).status == TaskStatus.INITIALIZING
    assert sorted(group_of(w).preemptions for w in lows) == [0, 0, 0, 1]


def test_a_gang_that_could_evict_old_low_work_waits_the_minimum_runtime_first(user, pool):
    # given the pool full of LOW gangs that started eleven minutes ago (each preemptible)
    now = timezone.now().replace(microsecond=0)
    lows = fill_with_low(user, pool, now - timedelta(seconds=660))
    # when a HIGH gang of one rack arrives
    high = submit(user, "high", 4, "HIGH", key="rack")
    result = placement_cycle_run(pool_id=pool.pk, now=now)
    # then it evicts nothing yet: it keeps a rack from LOW work and says when it evicts there
    assert result.preempted == 0
    until = now + timedelta(seconds=600)
    reason = group_of(high).unschedulable_reason
    assert reason["keeping"]["until"] == until.astimezone(UTC).isoformat()
    assert reason["message"].endswith(
        f"from LOW work, and evicting the LOW work there at {until.astimezone(UTC):%H:%M} UTC if it has not freed "
        "by then (the pool's minimum runtime)"), reason["message"]
    assert group_of(high).proof_epoch is None
    # and once it has waited the minimum runtime it preempts one of them
    assert placement_cycle_run(pool_id=pool.pk, now=until - timedelta(seconds=1)).preempted == 0
    assert placement_cycle_run(pool_id=pool.pk, now=until).preempted == 1
    assert group_of(high).status == TaskStatus.INITIALIZING
    assert sorted(group_of(w).preemptions for w in lows) == [0, 0, 0, 1]


def test_only_the_gangs_within_the_minimum_runtime_are_kept(user, pool):
    # given four LOW gangs, one started eleven minutes ago and three a minute ago
    now = timezone.now().replace(microsecond=0)
    lows = fill_with_low(user, pool, now - timedelta(seconds=60))
    TaskGroup.objects.filter(workflow=lows[2]).update(started_at=now - timedelta(seconds=660))
    # when a HIGH gang of one rack arrives
    high = submit(user, "high", 4, "HIGH", key="rack")
    placement_cycle_run(pool_id=pool.pk, now=now)
    # then the rack it keeps (where it would evict) is the old one's, the only one it may evict
    kept = group_of(high).unschedulable_reason["keeping"]["where"]
    assert f"(gpu-clique {rack_of(lows[2])})" in kept, kept


def rack_of(workflow: Workflow) -> str:
    """The rack (gpu-clique) the workflow's gang runs on."""
    names = set(Reservation.objects.filter(task_id__in=workflow.tasks.values("pk"), released_at__isnull=True)
                .values_list("node__name", flat=True))
    racks = {name.rsplit("-", 1)[0] for name in names}
    assert len(racks) == 1
    return racks.pop()


def test_while_it_waits_to_evict_its_machines_stay_free_of_new_low_work_and_it_starts_without_evicting(user):
    # given a pool of four racks of four machines full of eight LOW gangs of two machines, all
    # preemptible (started eleven minutes ago; the minimum runtime is ten)
    pool = make_nvl72_pool("shared", zones=2, spines=1, racks=2, nodes=4, min_runtime=600)
    now = timezone.now().replace(microsecond=0)
    lows = [submit(user, f"low{i}", 2, "LOW", key="rack") for i in range(8)]
    placement_cycle_run(pool_id=pool.pk, now=now)
    TaskGroup.objects.filter(workflow__in=lows).update(started_at=now - timedelta(seconds=660))
    # and a HIGH gang of a whole rack that would evict two of them, waiting the minimum runtime first
    high = submit(user, "high", 4, "HIGH", key="rack")
    assert placement_cycle_run(pool_id=pool.pk, now=now).preempted == 0
    kept = group_of(high).unschedulable_reason["keeping"]["where"]
    there = [w for w in lows if f"(gpu-clique {rack_of(w)})" in kept]
    assert len(there) == 2, kept
    # when one LOW gang on the kept rack ends and a new LOW gang of two machines arrives
    workflow_cancel(workflow_pk=there[0].pk, user=user)
    late = submit(user, "late", 2, "LOW", key="rack")
    result = placement_cycle_run(pool_id=pool.pk, now=now + timedelta(seconds=60))
    # then the new LOW gang does not start on the two machines freed there: it is told they are kept
    assert result.preempted == 0
    assert group_of(late).status == TaskStatus.SCHEDULING
    assert group_of(late).unschedulable_reason["message"].startswith(
        f"waiting: {kept} is kept for a higher-priority gang")
    # and when the other LOW gang there ends, the HIGH gang starts there without evicting anything
    workflow_cancel(workflow_pk=there[1].pk, user=user)
    result = placement_cycle_run(pool_id=pool.pk, now=now + timedelta(seconds=120))
    assert result.preempted == 0
    assert group_of(high).status == TaskStatus.INITIALIZING
    assert {group_of(w).preemptions for w in lows} == {0}


def test_a_normal_gang_does_not_evict_low_work_that_has_run_more_than_twice_the_minimum_runtime(user, pool):
    # given the pool full of LOW gangs that started an hour ago (more than twice the ten minutes)
    now = timezone.now().replace(microsecond=0)
    lows = fill_with_low(user, pool, now - timedelta(hours=1))
    # when a NORMAL gang of one rack arrives and has waited the minimum runtime
    normal = submit(user, "normal", 4, "NORMAL", key="rack")
    assert placement_cycle_run(pool_id=pool.pk, now=now).preempted == 0
    result = placement_cycle_run(pool_id=pool.pk, now=now + timedelta(seconds=600))
    # then it evicts nothing: it keeps a rack from LOW work until it frees, and says why
    assert result.preempted == 0
    assert group_of(normal).status == TaskStatus.SCHEDULING
    assert {group_of(w).preemptions for w in lows} == {0}
    reason = group_of(normal).unschedulable_reason
    assert reason["keeping"]["until"] is None
    assert reason["message"].endswith(
        "; NORMAL work evicts only LOW work that has run at most 20 min (twice the pool's minimum runtime), so "
        f"keeping {reason['keeping']['where']} from LOW work until it frees (the pool's minimum runtime)")
    assert group_of(normal).proof_epoch is None
    # and a HIGH gang arriving then evicts one of them (after its own wait)
    high = submit(user, "high", 4, "HIGH", key="rack")
    assert placement_cycle_run(pool_id=pool.pk, now=now + timedelta(seconds=600)).preempted == 0
    assert placement_cycle_run(pool_id=pool.pk, now=now + timedelta(seconds=1200)).preempted == 1
    assert group_of(high).status == TaskStatus.INITIALIZING
    assert group_of(normal).status == TaskStatus.SCHEDULING
