"""The starvation guard's hold by expected end and EASY backfill (docs/design.md §6), as services on
the real database (no worker process): the cycle keeps for a starving gang the rack that frees first
and lets only gangs that end by then use it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from tests.factories import make_node, make_pool
from tests.pipeline.helpers import assert_never_overcommitted, gang_spec
from workflows.models import Task, TaskGroup, Workflow
from workflows.scheduling.cycle import placement_cycle_run
from workflows.services import workflow_submit

pytestmark = pytest.mark.django_db


def submit(user, pool, name: str, tasks: int, *, key: str | None = "rack", timeout: str | None = None) -> Workflow:
    extra = f"  timeout: {{exec_timeout: {timeout}}}\n" if timeout else ""
    return workflow_submit(user=user, pool_name=pool.name, spec=gang_spec(name, tasks, 4, key=key, extra=extra))[0]


def racks_of(workflow: Workflow) -> set[str]:
    return {labels["rack"] for labels in Task.objects.filter(workflow=workflow).values_list("node__labels", flat=True)}


def starve(workflow: Workflow) -> None:
    TaskGroup.objects.filter(workflow=workflow).update(scheduling_since=timezone.now() - timedelta(seconds=120))


def _long_rack_and_short_machine(user, racks):
    """A two-machine gang with a two-hour timeout on one rack, a one-machine gang with a 30-minute one
    on the other; the second rack's other machine is free. Returns (short gang, its rack, long's rack)."""
    long = submit(user, racks, "long", 2, timeout="2h")
    placement_cycle_run(pool_id=racks.pk)
    short = submit(user, racks, "short", 1, key=None, timeout="30m")
    placement_cycle_run(pool_id=racks.pk)
    (long_rack,), (short_rack,) = racks_of(long), racks_of(short)
    assert long_rack != short_rack
    return TaskGroup.objects.get(workflow=short), short_rack, long_rack


def test_the_starving_gang_holds_the_rack_that_frees_first_and_says_until_when(user, racks, settings):
    settings.OSMO_STARVATION_SECONDS = 60
    # given one rack taken until a two-hour timeout and the other half taken until a 30-minute one
    short, short_rack, _long_rack = _long_rack_and_short_machine(user, racks)
    # when a gang of a whole rack has waited past the starvation threshold
    big = submit(user, racks, "big", 2)
    starve(big)
    placement_cycle_run(pool_id=racks.pk)
    # then it waits holding the short gang's rack, free when its timeout ends at the latest
    group = TaskGroup.objects.get(workflow=big)
    free_by = short.placed_at + timedelta(minutes=30)
    where = f"rack {short_rack}, 2 machines"
    assert group.status == "SCHEDULING"
    assert group.unschedulable_reason["holding"] == {"where": where, "free_by": free_by.astimezone(UTC).isoformat(),
                                                     "bounded": True}
    assert group.unschedulable_reason["message"].endswith(
        f"; holding {where}, free by {free_by.astimezone(UTC):%H:%M} UTC at the latest")
    # and when the short gang turns out to have been placed ten minutes earlier, a later cycle (the
    # queue changed, the capacity did not: the big gang stays proven) says the earlier time
    TaskGroup.objects.filter(pk=short.pk).update(placed_at=short.placed_at - timedelta(minutes=10))
    later = submit(user, racks, "later", 1, key=None)  # a new gang behind it, without a timeout
    placement_cycle_run(pool_id=racks.pk)
    again = TaskGroup.objects.get(workflow=big)
    sooner = (free_by - timedelta(minutes=10)).astimezone(UTC)
    assert again.proof_epoch is not None and again.proof_epoch == group.proof_epoch
    assert again.unschedulable_reason["holding"]["free_by"] == sooner.isoformat()
    assert TaskGroup.objects.get(workflow=later).status == "SCHEDULING"


def test_only_gangs_that_end_before_the_held_rack_is_free_may_use_it(user, racks, settings):
    settings.OSMO_STARVATION_SECONDS = 60
    # given the starving whole-rack gang holds the rack whose gang ends in 30 minutes (one machine free)
    short, short_rack, _long_rack = _long_rack_and_short_machine(user, racks)
    big = submit(user, racks, "big", 2)
    starve(big)
    # when three one-machine gangs queue behind it: one that ends in 10 minutes, one in an hour, one
    # without a timeout
    quick = submit(user, racks, "quick", 1, key=None, timeout="10m")
    slow = submit(user, racks, "slow", 1, key=None, timeout="1h")
    untimed = submit(user, racks, "untimed", 1, key=None)
    placement_cycle_run(pool_id=racks.pk)
    # then the quick gang is placed on the held rack's free machine
    assert TaskGroup.objects.get(workflow=quick).status == "INITIALIZING"
    assert racks_of(quick) == {short_rack}
    # and the others are kept off it, each saying why
    at = (short.placed_at + timedelta(minutes=30)).astimezone(UTC)
    for workflow, why in ((slow, "its exec_timeout ends later"), (untimed, "it has no exec_timeout")):
        group = TaskGroup.objects.get(workflow=workflow)
        assert group.status == "SCHEDULING"
        assert Task.objects.filter(workflow=workflow, node__isnull=False).count() == 0
        assert group.unschedulable_reason["code"] == "behind_starving_group"
        assert group.unschedulable_reason["message"] == (
            f"waiting: an older gang that does not fit yet goes first; rack {short_rack}, 2 machines is kept for "
            f"it (free by {at:%H:%M} UTC), only gangs that end by then may use it, and {why}")
    assert TaskGroup.objects.get(workflow=big).status == "SCHEDULING"
    assert_never_overcommitted(racks)


def test_without_timeouts_the_hold_is_estimated_and_no_gang_backfills_it(user, racks, settings):
    settings.OSMO_STARVATION_SECONDS = 60
    # given a whole rack taken by a gang placed an hour ago and one machine of the other by one placed
    # ten minutes ago, neither with a timeout (each expected to run as long again as it has)
    old = submit(user, racks, "old", 2)
    placement_cycle_run(pool_id=racks.pk)
    young = submit(user, racks, "young", 1, key=None)
    placement_cycle_run(pool_id=racks.pk)
    now = timezone.now()
    TaskGroup.objects.filter(workflow=old).update(placed_at=now - timedelta(hours=1))
    TaskGroup.objects.filter(workflow=young).update(placed_at=now - timedelta(minutes=10))
    big = submit(user, racks, "big", 2)
    starve(big)
    # when a cycle runs with a one-machine gang with a one-hour timeout behind the starving gang
    behind = submit(user, racks, "behind", 1, key=None, timeout="1h")
    placement_cycle_run(pool_id=racks.pk)
    # then the young gang's rack is held, its time only expected, and the gang behind does not get it
    reason = TaskGroup.objects.get(workflow=big).unschedulable_reason
    assert reason["holding"]["where"] == f"rack {racks_of(young).pop()}, 2 machines"
    assert reason["holding"]["bounded"] is False
    assert reason["message"].endswith("expected (a gang there has no exec_timeout: estimated)")
    free_by = datetime.fromisoformat(reason["holding"]["free_by"])
    young_placed = TaskGroup.objects.get(workflow=young).placed_at
    assert young_placed + timedelta(minutes=19) < free_by < young_placed + timedelta(minutes=21)
    assert TaskGroup.objects.get(workflow=behind).status == "SCHEDULING"


# -- several holds at once (conservative backfill) -------------------------------------------------------


@pytest.fixture
def three_racks():
    """Three racks of three 4-GPU nodes:  r1: a1 a2 a3   r2: b1 b2 b3   r3: c1 c2 c3"""
    pool = make_pool("three-racks", keys=[("rack", "rack")], sim_task_seconds=1)
    for rack, prefix in (("r1", "a"), ("r2", "b"), ("r3", "c")):
        for n in (1, 2, 3):
            make_node(pool, f"{prefix}{n}", {"rack": rack}, gpu=4)
    return pool


def _racks_ending_in_30m_1h_and_2h(user, pool):
    """A whole rack taken until a two-hour timeout, two machines of another until 30 minutes and two
    of the third until an hour (one machine free on each). Returns (30-minute gang, its rack), (1-hour
    gang, its rack)."""
    long = submit(user, pool, "long", 3, timeout="2h")
    placement_cycle_run(pool_id=pool.pk)
    short = submit(user, pool, "short", 2, timeout="30m")
    placement_cycle_run(pool_id=pool.pk)
    hour = submit(user, pool, "hour", 2, timeout="1h")
    placement_cycle_run(pool_id=pool.pk)
    (long_rack,), (short_rack,), (hour_rack,) = racks_of(long), racks_of(short), racks_of(hour)
    assert len({long_rack, short_rack, hour_rack}) == 3
    return (TaskGroup.objects.get(workflow=short), short_rack), (TaskGroup.objects.get(workflow=hour), hour_rack)


def _two_starving_rack_gangs(user, pool) -> tuple[Workflow, Workflow]:
    first = submit(user, pool, "first", 3)
    second = submit(user, pool, "second", 3)
    starve(first)
    starve(second)
    return first, second


def test_two_starving_gangs_each_hold_the_rack_that_frees_first_for_them(user, three_racks, settings):
    settings.OSMO_STARVATION_SECONDS = 60
    # given racks whose gangs end in 30 minutes, an hour and two hours
    (short, short_rack), (hour, hour_rack) = _racks_ending_in_30m_1h_and_2h(user, three_racks)
    # when two whole-rack gangs have waited past the starvation threshold
    first, second = _two_starving_rack_gangs(user, three_racks)
    placement_cycle_run(pool_id=three_racks.pk)
    # then the first holds the rack free in 30 minutes, the second the one free in an hour (not the
    # first's), each saying which and until when
    for workflow, group, rack, minutes in ((first, short, short_rack, 30), (second, hour, hour_rack, 60)):
        reason = TaskGroup.objects.get(workflow=workflow).unschedulable_reason
        free_by = (group.placed_at + timedelta(minutes=minutes)).astimezone(UTC)
        where = f"rack {rack}, 3 machines"
        assert TaskGroup.objects.get(workflow=workflow).status == "SCHEDULING"
        assert reason["holding"] == {"where": where, "free_by": free_by.isoformat(), "bounded": True}
        assert reason["message"].endswith(f"; holding {where}, free by {free_by:%H:%M} UTC at the latest")


def test_with_one_hold_at_most_only_the_first_starving_gang_holds(user, three_racks, settings):
    settings.OSMO_STARVATION_SECONDS = 60
    settings.OSMO_STARVATION_MAX_HOLDS = 1
    # given racks whose gangs end in 30 minutes, an hour and two hours, and two starving rack gangs
    (short, short_rack), (_hour, hour_rack) = _racks_ending_in_30m_1h_and_2h(user, three_racks)
    first, second = _two_starving_rack_gangs(user, three_racks)
    # when a cycle runs with a one-machine gang that ends in 90 minutes behind them
    slow = submit(user, three_racks, "slow", 1, key=None, timeout="90m")
    placement_cycle_run(pool_id=three_racks.pk)
    # then only the first holds a rack; the second waits behind it, kept off that rack
    at = (short.placed_at + timedelta(minutes=30)).astimezone(UTC)
    held = TaskGroup.objects.get(workflow=first).unschedulable_reason["holding"]
    assert held == {"where": f"rack {short_rack}, 3 machines", "free_by": at.isoformat(), "bounded": True}
    reason = TaskGroup.objects.get(workflow=second).unschedulable_reason
    assert reason["holding"] == {"where": f"rack {short_rack}, 3 machines", "free_by": at.isoformat()}
    assert reason["code"] == "behind_starving_group"
    assert reason["message"] == (
        f"waiting: an older gang that does not fit yet goes first; rack {short_rack}, 3 machines is kept for it "
        f"(free by {at:%H:%M} UTC), only gangs that end by then may use it, and it has no exec_timeout")
    # and the hour's rack is not held: the 90-minute gang is placed on its free machine
    assert TaskGroup.objects.get(workflow=slow).status == "INITIALIZING"
    assert racks_of(slow) == {hour_rack}
    assert_never_overcommitted(three_racks)


def test_a_gang_behind_two_holds_backfills_only_those_free_after_it_ends(user, three_racks, settings):
    settings.OSMO_STARVATION_SECONDS = 60
    # given two starving rack gangs holding the rack free in 30 minutes and the one free in an hour
    (short, short_rack), (_hour, hour_rack) = _racks_ending_in_30m_1h_and_2h(user, three_racks)
    _two_starving_rack_gangs(user, three_racks)
    # when one-machine gangs queue behind both: ending in 90 minutes, in 45, and in 10
    slow = submit(user, three_racks, "slow", 1, key=None, timeout="90m")
    mid = submit(user, three_racks, "mid", 1, key=None, timeout="45m")
    quick = submit(user, three_racks, "quick", 1, key=None, timeout="10m")
    placement_cycle_run(pool_id=three_racks.pk)
    # then the 45-minute gang is placed on the hour's rack (the 30-minute rack is kept from it), which
    # the 90-minute gang ahead of it could not take
    assert TaskGroup.objects.get(workflow=mid).status == "INITIALIZING"
    assert racks_of(mid) == {hour_rack}
    # and the 10-minute gang, which may use both, on the 30-minute rack's free machine
    assert TaskGroup.objects.get(workflow=quick).status == "INITIALIZING"
    assert racks_of(quick) == {short_rack}
    # and the 90-minute gang is kept off both, naming the first hold
    at = (short.placed_at + timedelta(minutes=30)).astimezone(UTC)
    group = TaskGroup.objects.get(workflow=slow)
    assert group.status == "SCHEDULING"
    assert Task.objects.filter(workflow=slow, node__isnull=False).count() == 0
    assert group.unschedulable_reason["code"] == "behind_starving_group"
    assert group.unschedulable_reason["message"] == (
        f"waiting: an older gang that does not fit yet goes first; rack {short_rack}, 3 machines is kept for it "
        f"(free by {at:%H:%M} UTC), only gangs that end by then may use it, and its exec_timeout ends later")
    assert_never_overcommitted(three_racks)
