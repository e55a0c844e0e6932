"""Preemption in the placement cycle (docs/design.md §9): HIGH and NORMAL gangs within their quota
evict whole running LOW gangs, the fewest GPUs, borrowed work first; on PostgreSQL."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.db.models import Sum

from scheduler.dispatch.pod.naming import pod_name_for
from scheduler.models import Node, Reservation, TeamQuota
from tests.factories import make_nvl72_pool
from tests.pipeline.helpers import cycle_cursor_set, gang_spec
from workflows.choices import TaskStatus
from workflows.models import StatusTransition, Task, TaskGroup, Workflow
from workflows.scheduling.cycle import placement_cycle_run
from workflows.services import workflow_cancel, workflow_submit

pytestmark = pytest.mark.django_db
ZONE = "topology.kubernetes.io/zone"


@pytest.fixture
def pool():
    # 2 zones x 1 spine x 2 racks x 4 nodes of 4 GPUs: 64 GPUs, four 16-GPU racks
    return make_nvl72_pool("shared", zones=2, spines=1, racks=2, nodes=4)


def submit(user, name: str, tasks: int, priority: str, *, key: str | None = None, team: str | None = None):
    workflow, _ = workflow_submit(user=user, pool_name="shared", spec=gang_spec(name, tasks, 4, key=key),
                                  priority=priority, team=team)
    return workflow


def group_of(workflow: Workflow) -> TaskGroup:
    return TaskGroup.objects.get(workflow=workflow)


def assert_no_node_overbooked(pool) -> None:
    for node in Node.objects.filter(pool=pool):
        held = Reservation.objects.filter(node=node, released_at__isnull=True).aggregate(g=Sum("gpu"))["g"] or 0
        assert held <= node.gpu, node.name


def test_a_high_gang_evicts_the_fewest_low_gangs_and_they_are_queued_again(user, pool):
    # given the pool full of eight LOW gangs of 8 GPUs
    lows = [submit(user, f"low{i}", 2, "LOW") for i in range(8)]
    placement_cycle_run(pool_id=pool.pk)
    assert {group_of(w).status for w in lows} == {TaskStatus.INITIALIZING}
    # when a HIGH gang of 16 GPUs arrives
    high = submit(user, "high", 4, "HIGH")
    result = placement_cycle_run(pool_id=pool.pk)
    # then it is placed at once by evicting exactly two LOW gangs (16 GPUs), whole
    assert group_of(high).status == TaskStatus.INITIALIZING
    victims = [w for w in lows if group_of(w).status == TaskStatus.SCHEDULING]
    assert len(victims) == 2 and result.preempted == 2
    for workflow in victims:
        group = group_of(workflow)
        assert group.preemptions == 1
        assert set(Task.objects.filter(group=group).values_list("status", "pod_name", "node")) == {
            (TaskStatus.SCHEDULING, "", None)}
        assert StatusTransition.objects.filter(group=group, task__isnull=True, to_status=TaskStatus.SCHEDULING,
                                               message=f"preempted by {high.workflow_id}").exists()
        assert not Reservation.objects.filter(task_id__in=group.tasks.values("pk"), released_at__isnull=True).exists()
        assert Workflow.objects.get(pk=workflow.pk).status == "PENDING"
    assert_no_node_overbooked(pool)
    # and once the HIGH gang ends, the victims are placed again, under new pod names
    workflow_cancel(workflow_pk=high.pk, user=user)
    placement_cycle_run(pool_id=pool.pk)
    for workflow in victims:
        assert group_of(workflow).status == TaskStatus.INITIALIZING
        names = set(Task.objects.filter(workflow=workflow).values_list("name", "pod_name"))
        assert names == {(t, pod_name_for(workflow.global_id, t, 1)) for t in ("t0", "t1")}
        assert all("-r1-" in pod for _t, pod in names)
    assert_no_node_overbooked(pool)


def test_the_victims_are_in_the_domain_the_gang_needs(user, pool):
    # given racks held by LOW gangs of 16 GPUs (one per rack), except one rack holding a NORMAL gang
    normal = submit(user, "normal", 4, "NORMAL", key="rack")
    placement_cycle_run(pool_id=pool.pk)
    lows = [submit(user, f"low{i}", 4, "LOW", key="rack") for i in range(3)]
    placement_cycle_run(pool_id=pool.pk)
    assert {group_of(w).status for w in [normal, *lows]} == {TaskStatus.INITIALIZING}
    # when a HIGH gang needs 2 racks' worth in one zone (32 GPUs, zone-required)
    high = submit(user, "high", 8, "HIGH", key="zone")
    placement_cycle_run(pool_id=pool.pk)
    # then it evicts the two LOW gangs of the zone the NORMAL gang is not in, and nothing else
    assert group_of(high).status == TaskStatus.INITIALIZING
    evicted = [w for w in lows if group_of(w).preemptions]
    assert len(evicted) == 2

    def zones_of(workflow: Workflow) -> set[str]:
        rows = Node.objects.filter(tasks__workflow=workflow).values_list("labels", flat=True)
        return {labels[ZONE] for labels in rows}

    zones, normal_zone = zones_of(high), zones_of(normal)
    assert len(zones) == 1 and zones.isdisjoint(normal_zone)
    assert group_of(normal).status == TaskStatus.INITIALIZING
    assert_no_node_overbooked(pool)


def test_nothing_is_evicted_when_evicting_every_low_gang_would_not_be_enough(user, pool):
    # given 48 GPUs held by NORMAL work and 16 by one LOW gang
    normals = [submit(user, f"n{i}", 4, "NORMAL") for i in range(3)]
    low = submit(user, "low", 4, "LOW")
    placement_cycle_run(pool_id=pool.pk)
    # when a HIGH gang of 32 GPUs arrives
    high = submit(user, "high", 8, "HIGH")
    result = placement_cycle_run(pool_id=pool.pk)
    # then it waits, and the LOW gang keeps running
    assert group_of(high).status == TaskStatus.SCHEDULING
    assert result.preempted == 0
    assert group_of(low).status == TaskStatus.INITIALIZING and group_of(low).preemptions == 0
    assert {group_of(w).status for w in normals} == {TaskStatus.INITIALIZING}


def racks_of(workflow: Workflow) -> set[str]:
    names = Node.objects.filter(tasks__workflow=workflow).values_list("name", flat=True)
    return {name.rsplit("-", 1)[0] for name in names}


def test_protected_work_is_packed_as_if_low_work_were_not_there(user, pool):
    # given a NORMAL gang on two nodes of the first rack and a LOW gang on three of the second
    first = submit(user, "first", 2, "NORMAL", key="rack")
    placement_cycle_run(pool_id=pool.pk)
    low = submit(user, "low", 3, "LOW", key="rack")
    placement_cycle_run(pool_id=pool.pk)
    assert (racks_of(first), racks_of(low)) == ({"z1-s1-r1"}, {"z1-s1-r2"})
    # when a one-node NORMAL gang arrives (the tightest rack is the LOW gang's, with one node free)
    second = submit(user, "second", 1, "NORMAL", key="rack")
    result = placement_cycle_run(pool_id=pool.pk)
    # then it goes where it would go were the LOW gang not there, beside the first: nothing evicted
    assert racks_of(second) == {"z1-s1-r1"} and result.preempted == 0
    # so that once the LOW gang is gone, its rack is whole again for a four-node gang
    workflow_cancel(workflow_pk=low.pk, user=user)
    high = submit(user, "high", 4, "HIGH", key="rack")
    placement_cycle_run(pool_id=pool.pk)
    assert racks_of(high) == {"z1-s1-r2"}
    assert_no_node_overbooked(pool)


def nodes_of(workflow: Workflow) -> set[str]:
    return set(Node.objects.filter(tasks__workflow=workflow).values_list("name", flat=True))


def test_a_preemptor_evicts_the_low_work_where_it_would_go_without_low_work(user, pool):
    # given a NORMAL gang on three nodes of the first rack, a two-node LOW gang on its fourth node and
    # one more, a one-node LOW gang, and the rest of the pool full of two-node LOW gangs
    normal = submit(user, "normal", 3, "NORMAL", key="rack")
    placement_cycle_run(pool_id=pool.pk)
    big = submit(user, "big", 2, "LOW")
    placement_cycle_run(pool_id=pool.pk)
    small = submit(user, "small", 1, "LOW")
    fill = [submit(user, f"fill{i}", 2, "LOW") for i in range(5)]
    placement_cycle_run(pool_id=pool.pk)
    assert racks_of(normal) == {"z1-s1-r1"} and "z1-s1-r1-n04" in nodes_of(big)
    assert Reservation.objects.filter(released_at__isnull=True).aggregate(g=Sum("gpu"))["g"] == 64
    # when a one-node HIGH gang arrives (evicting the one-node LOW gang would cost the fewest GPUs)
    high = submit(user, "high", 1, "HIGH", key="rack")
    result = placement_cycle_run(pool_id=pool.pk)
    # then it goes where it would go were no LOW work running, beside the NORMAL gang, and evicts the
    # LOW gang there: protected work stays packed, and the one-node LOW gang's rack is not split
    assert nodes_of(high) == {"z1-s1-r1-n04"} and result.preempted == 1
    assert group_of(big).preemptions == 1
    assert group_of(small).preemptions == 0 and all(group_of(w).preemptions == 0 for w in fill)
    assert_no_node_overbooked(pool)


def test_the_victim_search_leaves_machines_kept_for_a_starving_gang_alone(user, pool):
    from scheduler.placement import DomainIndex, Policy
    from scheduler.reads.snapshot import snapshot_load_with_ids
    from workflows.scheduling.cycle.preemption.candidates import Preemptions
    from workflows.scheduling.cycle.read import running_low_read
    from workflows.scheduling.requests import gang_request_from_row

    # given one LOW gang per rack, and a HIGH gang of a rack's size not placed yet
    lows = [submit(user, f"low{i}", 4, "LOW", key="rack") for i in range(4)]
    placement_cycle_run(pool_id=pool.pk)
    high = group_of(submit(user, "high", 4, "HIGH", key="rack"))
    request = gang_request_from_row("high", high.constraint_tree, high.task_requests)

    def search(kept: frozenset[str]) -> set[str]:
        index = DomainIndex(snapshot_load_with_ids(pool)[0])
        preemptions = Preemptions(pool.name, None, Policy(), load=lambda: running_low_read(pool.pk))
        placement = preemptions.try_place(index, request, "", "high", kept)
        assert placement is not None
        return {node for _task, node in placement.assignments}

    # when the search runs freely, then with the rack it chose kept for a starving gang
    chosen = search(frozenset())
    rack = {name.rsplit("-", 1)[0] for name in chosen}
    assert len(rack) == 1 and len(lows) == 4
    kept = frozenset(Node.objects.filter(pool=pool, name__startswith=rack.pop()).values_list("name", flat=True))
    again = search(kept)
    # then it evicts elsewhere and places the gang off the kept machines
    assert again.isdisjoint(kept) and len(again) == 4


def test_low_work_never_preempts_and_normal_work_does(user, pool):
    # given the pool full of LOW work
    lows = [submit(user, f"low{i}", 4, "LOW") for i in range(4)]
    placement_cycle_run(pool_id=pool.pk)
    # when another LOW gang, then a NORMAL one, arrive
    late = submit(user, "late", 1, "LOW")
    placement_cycle_run(pool_id=pool.pk)
    late_status = group_of(late).status
    normal = submit(user, "normal", 1, "NORMAL")
    placement_cycle_run(pool_id=pool.pk)
    # then the LOW gang waits, the NORMAL one evicts one 16-GPU LOW gang (gang-whole)
    assert late_status == TaskStatus.SCHEDULING
    assert group_of(normal).status == TaskStatus.INITIALIZING
    assert sum(group_of(w).preemptions for w in lows) == 1


def test_borrowed_low_work_is_reclaimed_first_and_over_quota_work_does_not_preempt(user, pool):
    # given team llm (quota 16) running four LOW gangs of 16 GPUs: the first within its quota, three borrowing
    llm, vision = Group.objects.create(name="llm"), Group.objects.create(name="vision")
    user.groups.add(llm, vision)
    TeamQuota.objects.create(pool=pool, team=llm, gpu=16)
    TeamQuota.objects.create(pool=pool, team=vision, gpu=16)
    first = submit(user, "first", 4, "LOW", team="llm")
    placement_cycle_run(pool_id=pool.pk)
    borrowing = [submit(user, f"b{i}", 4, "LOW", team="llm") for i in range(3)]
    placement_cycle_run(pool_id=pool.pk)
    # when team vision submits a HIGH gang within its quota, and then one beyond it
    within = submit(user, "within", 4, "HIGH", team="vision")
    placement_cycle_run(pool_id=pool.pk)
    beyond = submit(user, "beyond", 1, "HIGH", team="vision")
    placement_cycle_run(pool_id=pool.pk)
    # then the first is placed by evicting a borrowing gang, never the one within llm's quota
    assert group_of(within).status == TaskStatus.INITIALIZING
    assert group_of(first).preemptions == 0 and group_of(first).status == TaskStatus.INITIALIZING
    assert sum(group_of(w).preemptions for w in borrowing) == 1
    # and the second waits for its quota, evicting nothing
    waiting = group_of(beyond)
    assert waiting.status == TaskStatus.SCHEDULING
    assert waiting.unschedulable_reason["code"] == "quota_exceeded"
    assert sum(group_of(w).preemptions for w in [first, *borrowing]) == 1


@pytest.mark.parametrize("same_cycle", [True, False])
def test_borrowing_counts_the_protected_work_placed_earlier_in_the_same_cycle(user, pool, same_cycle):
    """Found in review: borrowing was decided when the candidates were read, at the cycle's first
    protected gang, so protected gangs placed later in the cycle did not count."""
    a, b, c = Group.objects.create(name="a"), Group.objects.create(name="b"), Group.objects.create(name="c")
    user.groups.add(a, b, c)
    TeamQuota.objects.create(pool=pool, team=a, gpu=16)
    TeamQuota.objects.create(pool=pool, team=b, gpu=16)
    # given team a's LOW gang of 16 GPUs, team b's LOW gang of 8 and team c's NORMAL gang of 24
    a_low, b_low = submit(user, "alow", 4, "LOW", team="a"), submit(user, "blow", 2, "LOW", team="b")
    submit(user, "other", 6, "NORMAL", team="c")
    placement_cycle_run(pool_id=pool.pk)
    # when team a's NORMAL gang takes the 16 free GPUs (a at its quota: its LOW gang now borrows), in
    # the cycle before or in the same one as team b's NORMAL gang that needs an eviction
    a_normal = submit(user, "anormal", 4, "NORMAL", team="a")
    if not same_cycle:
        placement_cycle_run(pool_id=pool.pk)
    b_normal = submit(user, "bnormal", 1, "NORMAL", team="b")
    placement_cycle_run(pool_id=pool.pk)
    # then the borrowing gang is the one evicted, never team b's LOW work within its quota
    assert group_of(a_normal).status == group_of(b_normal).status == TaskStatus.INITIALIZING
    assert (group_of(a_low).preemptions, group_of(b_low).preemptions) == (1, 0)
    assert_no_node_overbooked(pool)


def test_a_resumed_cycle_that_places_low_work_first_does_not_prove_a_high_gang_stuck(user):
    # given a pool of two 4-GPU machines, a NORMAL gang on one and a HIGH gang of two machines waiting
    from tests.factories import make_node, make_pool
    from workflows.scheduling.cycle import queue_read as _queue_read

    small = make_pool("two", keys=[("rack", "rack")], sim_task_seconds=1000)
    for name in ("a1", "a2"):
        make_node(small, name, {"rack": "r1"}, gpu=4)

    def submit_small(name: str, tasks: int, priority: str) -> Workflow:
        return workflow_submit(user=user, pool_name="two", spec=gang_spec(name, tasks, 4, key=None),
                               priority=priority)[0]

    normal = submit_small("normal", 1, "NORMAL")
    placement_cycle_run(pool_id=small.pk)
    high = submit_small("high", 2, "HIGH")
    placement_cycle_run(pool_id=small.pk)
    assert group_of(high).status == TaskStatus.SCHEDULING
    # when the NORMAL gang ends, a LOW gang arrives, and a cycle resumes from a cursor at the LOW gang
    # (as after a cycle that ran out of its budget there): the LOW gang is walked before the HIGH one
    workflow_cancel(workflow_pk=normal.pk, user=user)
    low = submit_small("low", 1, "LOW")
    small.refresh_from_db()
    cursor = next(g.order for g in _queue_read(small) if g.pk == group_of(low).pk)
    cycle_cursor_set(small, cursor)
    resumed = placement_cycle_run(pool_id=small.pk)
    assert resumed.resumed and group_of(low).status == TaskStatus.INITIALIZING
    # then the next cycle does not take the HIGH gang's verdict as proven: it evicts the LOW gang and runs
    placement_cycle_run(pool_id=small.pk)
    assert group_of(high).status == TaskStatus.INITIALIZING
    assert group_of(low).status == TaskStatus.SCHEDULING and group_of(low).preemptions == 1


def test_preemption_can_be_turned_off(user, pool, settings):
    settings.OSMO_PREEMPTION_ENABLED = False
    lows = [submit(user, f"low{i}", 4, "LOW") for i in range(4)]
    placement_cycle_run(pool_id=pool.pk)
    high = submit(user, "high", 1, "HIGH")
    placement_cycle_run(pool_id=pool.pk)
    assert group_of(high).status == TaskStatus.SCHEDULING
    assert sum(group_of(w).preemptions for w in lows) == 0


def test_a_preemption_is_visible_in_the_api_the_page_and_the_cli(user, user_client, client, pool):
    from cli.render import workflow_lines

    # given a LOW gang preempted by a HIGH one
    low = submit(user, "low", 16, "LOW")
    placement_cycle_run(pool_id=pool.pk)
    high = submit(user, "high", 1, "HIGH")
    placement_cycle_run(pool_id=pool.pk)
    # when its owner reads it through the API, the page and the CLI's rendering
    answer = user_client.get(f"/api/workflows/{low.workflow_id}/").json()
    client.force_login(user)
    page = client.get(f"/workflows/{low.workflow_id}/").content.decode()
    text = "\n".join(workflow_lines(answer))
    # then each says the gang was preempted once, and by whom
    assert answer["groups"][0]["preemptions"] == 1
    assert any(h["message"] == f"preempted by {high.workflow_id}" for h in answer["history"])
    assert 'data-preemptions="1"' in page and "preempted 1 time" in page
    assert f"preempted by {high.workflow_id}" in page
    assert "preempted 1 time(s)" in text and f"preempted by {high.workflow_id}" in text
    assert "(queued again)" in text and "(running)" not in text


def test_retries_and_requeues_are_visible_in_the_api_the_page_and_the_cli(user, user_client, client, pool):
    from cli.render import workflow_lines

    # given a gang rescheduled twice and sent back by the cluster once (the counters the lifecycle keeps)
    workflow = submit(user, "restarted", 1, "NORMAL")
    TaskGroup.objects.filter(workflow=workflow).update(retries=2, requeues=1)
    # when its owner reads it through the API, the page and the CLI's rendering
    answer = user_client.get(f"/api/workflows/{workflow.workflow_id}/").json()
    client.force_login(user)
    page = client.get(f"/workflows/{workflow.workflow_id}/").content.decode()
    text = "\n".join(workflow_lines(answer))
    # then each says so; a gang that never started over says nothing of it
    group = answer["groups"][0]
    assert (group["preemptions"], group["retries"], group["requeues"]) == (0, 2, 1)
    assert 'data-retries="2"' in page and "retried 2 times" in page
    assert 'data-requeues="1"' in page and "queued again 1 time<" in page
    assert "retried 2 time(s)" in text and "queued again 1 time(s)" in text and "preempted" not in text
    TaskGroup.objects.filter(workflow=workflow).update(retries=0, requeues=0)
    again = user_client.get(f"/api/workflows/{workflow.workflow_id}/").json()
    assert "retried" not in "\n".join(workflow_lines(again))
