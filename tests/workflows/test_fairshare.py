"""Fair share over time through the real placement cycle (docs/design.md §9), on PostgreSQL: within a
priority, the gangs of the team that used less of the pool recently go first; priorities still come
first, the starvation guard still holds, and the queue position and the pool say what fair share did.
A team's past usage is its reservations' history, back-dated (never by sleeping)."""

from __future__ import annotations

import math
import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.test import Client
from django.utils import timezone

from scheduler.models import Pool, Reservation
from tests.factories import make_node, make_pool
from tests.pipeline.helpers import gang_spec
from workflows.choices import TaskStatus
from workflows.models import TaskGroup, Workflow
from workflows.scheduling.cycle import placement_cycle_run, queue_read
from workflows.services import workflow_submit

pytestmark = pytest.mark.django_db
HOUR = 3600


@pytest.fixture
def heavy(user):
    """alice, in team ``heavy``."""
    user.groups.add(Group.objects.create(name="heavy"))
    return user


@pytest.fixture
def light(other_user):
    """bob, in team ``light``."""
    other_user.groups.add(Group.objects.create(name="light"))
    return other_user


def two_nodes(half_life: int) -> Pool:
    """Two 4-GPU nodes, no topology to honour."""
    pool = make_pool("fs", keys=[("rack", "rack")], fairshare_half_life=half_life)
    for name in ("n1", "n2"):
        make_node(pool, name, {"rack": "r1"}, gpu=4)
    return pool


def submit(user, pool: Pool, name: str, tasks: int = 1, priority: str = "NORMAL") -> Workflow:
    return workflow_submit(user=user, pool_name=pool.name, spec=gang_spec(name, tasks, 4, key=None),
                           priority=priority)[0]


def status(workflow: Workflow) -> str:
    return TaskGroup.objects.get(workflow=workflow).status


def used_for_an_hour(user, pool: Pool, name: str, tasks: int = 1) -> Workflow:
    """A gang of ``user``'s team placed now, its reservations back-dated an hour: the team's usage."""
    workflow = submit(user, pool, name, tasks)
    placement_cycle_run(pool_id=pool.pk)
    assert status(workflow) == TaskStatus.INITIALIZING
    Reservation.objects.filter(team=workflow.team).update(created_at=timezone.now() - timedelta(hours=1))
    return workflow


@pytest.mark.parametrize(("half_life", "placed"), [(HOUR, "light"), (0, "heavy")])
def test_the_team_that_used_less_goes_first_and_without_fair_share_the_first_submitted(heavy, light, half_life,
                                                                                        placed):
    # given heavy's gang holding one of the two nodes for the last hour, and one node free
    pool = two_nodes(half_life)
    used_for_an_hour(heavy, pool, "running")
    # when heavy and then light submit a NORMAL gang of one node each (only one fits)
    first = submit(heavy, pool, "heavy-next")
    second = submit(light, pool, "light-next")
    placement_cycle_run(pool_id=pool.pk)
    # then with fair share light's gang is placed, though submitted later; without it, heavy's
    statuses = {"heavy": status(first), "light": status(second)}
    assert statuses[placed] == TaskStatus.INITIALIZING
    assert [s for team, s in statuses.items() if team != placed] == [TaskStatus.SCHEDULING]


def test_a_higher_priority_goes_first_whatever_its_team_used(heavy, light):
    # given heavy's gang holding one of the two nodes for the last hour
    pool = two_nodes(HOUR)
    used_for_an_hour(heavy, pool, "running")
    # when light submits a NORMAL gang, then heavy a HIGH one (only one fits)
    normal = submit(light, pool, "light-normal")
    high = submit(heavy, pool, "heavy-high", priority="HIGH")
    placement_cycle_run(pool_id=pool.pk)
    # then heavy's HIGH gang is placed and light's waits
    assert (status(high), status(normal)) == (TaskStatus.INITIALIZING, TaskStatus.SCHEDULING)


def test_the_starvation_guard_still_holds_for_a_starving_gang_of_the_heavy_team(heavy, light, settings):
    settings.OSMO_STARVATION_SECONDS = 60
    # given four 4-GPU nodes, heavy's gang holding one for the last hour, and heavy's gang of all four
    # nodes queued past the starvation threshold (it fits the idle pool: its machines are all four)
    pool = make_pool("fs4", keys=[("rack", "rack")], fairshare_half_life=HOUR)
    for name in ("n1", "n2", "n3", "n4"):
        make_node(pool, name, {"rack": "r1"}, gpu=4)
    used_for_an_hour(heavy, pool, "running")
    big = submit(heavy, pool, "big", tasks=4)
    TaskGroup.objects.filter(workflow=big).update(scheduling_since=timezone.now() - timedelta(seconds=120))
    # when light and then heavy submit a one-node gang behind it (three nodes are free)
    lighter = submit(light, pool, "light-one")
    later = submit(heavy, pool, "heavy-one")
    placement_cycle_run(pool_id=pool.pk)
    # then light's gang goes ahead of the starving gang (its team used less) and is placed; the
    # starving gang is still found and holds its machines against heavy's gang behind it
    assert status(lighter) == TaskStatus.INITIALIZING
    assert status(big) == TaskStatus.SCHEDULING
    behind = TaskGroup.objects.get(workflow=later)
    assert (behind.status, behind.unschedulable_reason["code"]) == (TaskStatus.SCHEDULING, "behind_starving_group")


def test_the_queue_position_says_fair_share_moved_it_and_matches_the_cycles_order(heavy, light, user_client,
                                                                                   api_client):
    # given both nodes held by heavy for the last hour, then heavy's and light's gangs queued in turn
    pool = two_nodes(HOUR)
    used_for_an_hour(heavy, pool, "running", tasks=2)
    first = submit(heavy, pool, "heavy-next")
    second = submit(light, pool, "light-next")
    placement_cycle_run(pool_id=pool.pk)
    # when each owner reads their workflow
    mine = user_client.get(f"/api/workflows/{first.workflow_id}/").json()["groups"][0]["waiting"]
    api_client.force_authenticate(light)
    theirs = api_client.get(f"/api/workflows/{second.workflow_id}/").json()["groups"][0]["waiting"]
    # then light's gang is first and heavy's second, as the cycle orders them, and both say why
    assert [g.workflow_id for g in queue_read(pool)] == [second.pk, first.pk]
    assert (theirs["position"], theirs["fairshare"]) == (1, {"behind": 0, "ahead_of": 1})
    assert (mine["position"], mine["ahead"], mine["fairshare"]) == (
        2, {"HIGH": 0, "NORMAL": 1, "LOW": 0}, {"behind": 1, "ahead_of": 0})
    assert mine["lines"][:2] == [
        "Queue: 2nd in the pool's queue; ahead of it: 1 NORMAL.",
        "Fair share: behind 1 gang submitted after it by teams that used less of the pool recently.",
    ]
    assert theirs["lines"][:2] == [
        "Queue: first in the pool's queue; nothing is ahead of it.",
        "Fair share: ahead of 1 gang submitted before it by teams that used more.",
    ]


def test_without_fair_share_the_queue_position_is_by_submission_and_says_nothing_of_it(heavy, light, user_client):
    # given the same queue in a pool without fair share
    pool = two_nodes(0)
    used_for_an_hour(heavy, pool, "running", tasks=2)
    first = submit(heavy, pool, "heavy-next")
    submit(light, pool, "light-next")
    placement_cycle_run(pool_id=pool.pk)
    # when heavy's owner reads it
    mine = user_client.get(f"/api/workflows/{first.workflow_id}/").json()["groups"][0]["waiting"]
    # then it is first, and no line speaks of fair share
    assert (mine["position"], mine["fairshare"]) == (1, None)
    assert not any(line.startswith("Fair share") for line in mine["lines"])


def test_the_pool_page_and_api_show_each_teams_recent_usage(heavy, light, staff_client):
    # given heavy's gang of one node (4 GPUs) held for the last hour, one half-life
    pool = two_nodes(HOUR)
    used_for_an_hour(heavy, pool, "running")
    # when the pool is read through the API and its page
    body = staff_client.get("/api/pools/fs/").json()
    page = Client()
    page.force_login(heavy)
    text = page.get("/pools/fs/").content.decode()
    # then heavy used 4 GPUs for an hour, decayed: 4 * (1 - 1/2) / ln 2 GPU-hours
    expected = 4 * 0.5 / math.log(2)
    assert [row["team"] for row in body["fairshare_usage"]] == ["heavy"]
    assert body["fairshare_usage"][0]["gpu_hours"] == pytest.approx(expected, rel=1e-3)
    row = re.search(r'<table class="data" id="fairshare">.*?data-team="heavy"><td>heavy</td><td class="num">'
                    r'([0-9.]+)</td>', text, re.S)
    assert row is not None and row.group(1) == f"{expected:.2f}"


def test_the_pool_page_has_no_fair_share_section_when_it_is_off(heavy):
    pool = two_nodes(0)
    used_for_an_hour(heavy, pool, "running")
    page = Client()
    page.force_login(heavy)
    assert 'id="fairshare"' not in page.get("/pools/fs/").content.decode()


def test_what_is_ahead_matches_the_fair_order_of_the_cycle_counted_one_gang_at_a_time(django_user_model):
    # given a pool with fair share on and no cycle run (everything stays queued), three teams that used it
    # 1, 2 and 0 GPU-hours an hour ago (released: their order does not change as time passes), users
    # of each and one of no team, and 14 workflows of random teams and priorities, several submitted
    # at the same instant
    import random

    from workflows.choices import PRIORITY_RANK
    from workflows.selectors import workflow_detail_queryset
    from workflows.waiting import workflow_waiting

    pool = make_pool("ahead", keys=[("rack", "rack")], fairshare_half_life=HOUR)
    node = make_node(pool, "n1", {"rack": "r1"}, gpu=1)
    users = []
    for index, name in enumerate(("a", "b", "c")):
        team = Group.objects.create(name=name)
        member = django_user_model.objects.create_user(username=f"user-{name}")
        member.groups.add(team)
        users.append(member)
        if index < 2:
            row = Reservation.objects.create(task_id=1000 + index, pool=pool, node=node, team=team, gpu=index + 1,
                                             released_at=timezone.now() - timedelta(hours=1))
            Reservation.objects.filter(pk=row.pk).update(created_at=timezone.now() - timedelta(hours=2))
    users.append(django_user_model.objects.create_user(username="loner"))
    rng = random.Random(11)
    instant = timezone.now()
    for index in range(14):
        workflow, _ = workflow_submit(user=rng.choice(users), pool_name=pool.name,
                                      spec=gang_spec(f"w{index}", 1, 1, key=None),
                                      priority=rng.choice(["HIGH", "NORMAL", "LOW"]))
        Workflow.objects.filter(pk=workflow.pk).update(submitted_at=instant + timedelta(seconds=rng.choice([0, 0, 1])))
    rank = {value: name for name, value in PRIORITY_RANK.items()}
    order = [(g.pk, rank[g.rank]) for g in queue_read(pool)]
    # when / then: each gang's answer counts exactly the gangs before it in the cycle's order, by priority
    checked = 0
    for member in users:
        for workflow in workflow_detail_queryset(user=member).filter(pool=pool, submitted_by=member):
            for pk, answer in workflow_waiting(workflow).items():
                before = order[:[p for p, _ in order].index(pk)]
                assert answer["ahead"] == {name: sum(1 for _, p in before if p == name)
                                           for name in ("HIGH", "NORMAL", "LOW")}, workflow.workflow_id
                assert answer["position"] == len(before) + 1
                checked += 1
    assert checked == len(order) == 14


def test_fair_share_costs_a_cycle_one_query_whatever_the_queue(heavy, light):
    # given pools with and without fair share, each full with heavy's gang, and 3 or 30 gangs queued
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def cycle_queries(half_life: int, queued: int) -> int:
        pool = make_pool(f"q{half_life}-{queued}", keys=[("rack", "rack")], fairshare_half_life=half_life)
        for name in ("n1", "n2"):
            make_node(pool, name, {"rack": "r1"}, gpu=4)
        used_for_an_hour(heavy, pool, "running", tasks=2)
        for index in range(queued):
            submit(light if index % 2 else heavy, pool, f"wait{index}")
        # when one cycle decides them (none fits)
        with CaptureQueriesContext(connection) as queries:
            result = placement_cycle_run(pool_id=pool.pk)
        assert (result.placed, len(result.unschedulable)) == ([], queued)
        return len(queries)

    counts = {(half_life, queued): cycle_queries(half_life, queued) for half_life in (0, HOUR) for queued in (3, 30)}
    # then the queue's length changes nothing, and fair share adds its one usage read
    assert counts[0, 3] == counts[0, 30]
    assert counts[HOUR, 3] == counts[HOUR, 30] == counts[0, 3] + 1


def test_a_walk_resumed_after_usage_changed_goes_on_in_the_order_it_started_with(heavy, light, settings,
                                                                                monkeypatch):
    """Each solve takes one (fake) second and the budget is 2.5 s: a cycle decides two gangs."""
    import itertools

    from workflows.scheduling.cycle import walk

    # given three 4-GPU nodes: heavy's gang on one for the last hour, light's on one for half an hour
    pool = make_pool("fs3", keys=[("rack", "rack")], fairshare_half_life=HOUR)
    for name in ("n1", "n2", "n3"):
        make_node(pool, name, {"rack": "r1"}, gpu=4)
    used_for_an_hour(heavy, pool, "heavy-running")
    light_running = submit(light, pool, "light-running")
    placement_cycle_run(pool_id=pool.pk)
    Reservation.objects.filter(team=light_running.team).update(created_at=timezone.now() - timedelta(minutes=30))
    # and, queued, heavy's one-node gang (it fits), then light's gangs of two and three nodes (they do not)
    fits = submit(heavy, pool, "heavy-one")
    submit(light, pool, "light-two", tasks=2)
    submit(light, pool, "light-three", tasks=3)
    clock = itertools.count()
    monkeypatch.setattr(walk, "_clock", lambda: next(clock))
    settings.OSMO_CYCLE_BUDGET_SECONDS = 2.5
    # when a cycle walks light's two gangs first (light used less) and stops out of time
    first = placement_cycle_run(pool_id=pool.pk)
    assert (first.budget_exhausted, first.solved, first.placed) == (True, 2, [])
    # and light's usage then grows past heavy's (its running gang back-dated to three hours)
    Reservation.objects.filter(team=light_running.team).update(created_at=timezone.now() - timedelta(hours=3))
    assert [g.workflow_id for g in queue_read(pool)][0] == fits.pk  # a fresh walk would start with heavy's
    second = placement_cycle_run(pool_id=pool.pk)
    # then the resumed walk goes on after light's gangs, in the order it started with, and places
    # heavy's gang now (ordered by the new usage, it would start at light's gangs and skip it)
    assert (second.resumed, second.placed) == (True, [TaskGroup.objects.get(workflow=fits).pk])
