"""Why a queued gang waits (docs/design.md §11): its place in the queue, what is ahead, and who holds
the best domain of the constraint that failed."""

from __future__ import annotations

import pytest

from tests.factories import make_node, make_pool
from tests.pipeline.helpers import gang_spec
from workflows.models import TaskGroup
from workflows.scheduling.cycle import placement_cycle_run
from workflows.selectors import group_waiting, workflow_detail_queryset
from workflows.services import workflow_submit
from workflows.waiting import holders_ranked, reason_reworded, waiting_lines, workflow_waiting

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


def _two_full_racks(user):
    """Two racks of two 4-GPU nodes, each rack held whole by one workflow."""
    pool = make_pool("full", keys=[("rack", "rack")])
    for rack, prefix in (("r1", "a"), ("r2", "b")):
        for n in (1, 2):
            make_node(pool, f"{prefix}{n}", {"rack": rack}, gpu=4)
    holders = [workflow_submit(user=user, pool_name=pool.name, spec=gang_spec(name, 2, 4))[0]
               for name in ("left", "right")]
    placement_cycle_run(pool_id=pool.pk)
    return pool, holders


def test_reason_says_racks_exist_but_are_busy(user):
    """The replayed report: a gang blocked only by busy nodes was told "no rack exists (the whole
    pool fits 0 of 2)" although both racks exist and are full; the solver's words count free room
    only, the answer says the racks exist and are busy."""
    # given
    pool, _holders = _two_full_racks(user)
    blocked, _ = workflow_submit(user=user, pool_name=pool.name, spec=gang_spec("blocked", 2, 4))
    placement_cycle_run(pool_id=pool.pk)
    # when
    workflow = workflow_detail_queryset(user=user).get(pk=blocked.pk)
    waiting = workflow_waiting(workflow)
    # then
    (answer,) = waiting.values()
    assert answer["reason"] == ("rack=default (required) needs 2 tasks of 4 gpu in one rack; every rack is busy "
                                "(2 racks exist, none has room for any of these tasks now) "
                                "(the whole pool fits 0 of 2)")
    assert answer["domains"] == {"key": "rack", "exist": 2, "schedulable": 2}
    assert answer["lines"] == [
        "Queue: first in the pool's queue; nothing is ahead of it.",
        f"Why: {answer['reason']}",
        "No rack has room for any of these tasks now; the racks are held by: left-1 (8 GPUs, 2 tasks), "
        "right-1 (8 GPUs, 2 tasks).",
        "It can start when enough of these finish (or a gang ahead of it is placed elsewhere).",
    ]


def test_when_no_gpu_clique_has_room_the_holders_of_every_clique_are_named(user):
    """The replayed report: a gang of 4 x 8 GPUs in one gpu-clique, on a pool whose two cliques are
    held by running workflows, was told "the largest free gpu-clique fits 0 of 4 (the whole pool fits
    0 of 4)" and at most one holder. Every clique comes as close (none fits a task), so the holders
    of all of them are named, most GPUs first."""
    # given two cliques of four 8-GPU nodes: "big" holds c1 and half of c2, "small" the rest of c2
    pool = make_pool("cliques", keys=[("gpu-clique", "clique")])
    for clique in ("c1", "c2"):
        for n in range(1, 5):
            make_node(pool, f"{clique}-n{n}", {"clique": clique}, gpu=8)
    big, _ = workflow_submit(user=user, pool_name=pool.name, spec=gang_spec("big", 6, 8, key=None))
    small, _ = workflow_submit(user=user, pool_name=pool.name, spec=gang_spec("small", 2, 8, key=None))
    placement_cycle_run(pool_id=pool.pk)
    blocked, _ = workflow_submit(user=user, pool_name=pool.name, spec=gang_spec("blocked", 4, 8, key="gpu-clique"))
    placement_cycle_run(pool_id=pool.pk)
    # when
    (answer,) = workflow_waiting(workflow_detail_queryset(user=user).get(pk=blocked.pk)).values()
    # then
    assert answer["domain"] == {"key": "gpu-clique", "path": []}
    assert answer["holders"] == [{"workflow": "big-1", "gpu": 48, "tasks": 6},
                                 {"workflow": "small-1", "gpu": 16, "tasks": 2}]
    assert answer["lines"][2] == ("No gpu-clique has room for any of these tasks now; the gpu-cliques are held by: "
                                  "big-1 (48 GPUs, 6 tasks), small-1 (16 GPUs, 2 tasks).")


def test_dry_run_names_the_holders_when_no_gpu_clique_has_room(user, user_client):
    """The same report for a dry run: its preview said "the largest free gpu-clique fits 0 of 4" and
    named nobody; it names the workflows holding the cliques, as a queued gang's answer does."""
    # given both cliques held whole by "hog"
    pool = make_pool("cliques", keys=[("gpu-clique", "clique")])
    for clique in ("c1", "c2"):
        for n in range(1, 5):
            make_node(pool, f"{clique}-n{n}", {"clique": clique}, gpu=8)
    workflow_submit(user=user, pool_name=pool.name, spec=gang_spec("hog", 8, 8, key=None))
    placement_cycle_run(pool_id=pool.pk)
    # when
    response = user_client.post("/api/workflows/", {"pool": pool.name, "spec": gang_spec("blocked", 4, 8,
                                                    key="gpu-clique"), "dry_run": True}, format="json")
    # then
    assert response.status_code == 200, response.json()
    [group] = response.json()["groups"]
    assert group["placement"]["status"] == "unschedulable"
    assert group["waiting_lines"] == [
        "No gpu-clique has room for any of these tasks now; the gpu-cliques are held by: hog-1 (64 GPUs, 8 tasks).",
        "It can start when enough of these finish (or a gang ahead of it is placed elsewhere).",
    ]


def test_a_waiting_reason_names_only_the_holders_its_reader_may_see(user, other_user, staff_user):
    """Found while the pages were made to follow the API's visibility (docs/operations.md, "Threat
    model"): a waiting gang's reason, in the API, the CLI and the pages, named the workflows of other
    users holding the capacity (their ids, which the API hides from this user). Another user's holders
    are summed as one entry; its own and, for staff, every one are named."""
    # given bob's gang waiting for a clique that alice's two workflows and one of bob's hold
    from rest_framework.test import APIClient

    pool = make_pool("cliques", keys=[("gpu-clique", "clique")])
    for n in range(1, 5):
        make_node(pool, f"c1-n{n}", {"clique": "c1"}, gpu=8)
    for name, owner in (("alpha", user), ("beta", user), ("mine", other_user)):
        workflow_submit(user=owner, pool_name=pool.name, spec=gang_spec(name, 1, 8, key=None))
    placement_cycle_run(pool_id=pool.pk)
    blocked, _ = workflow_submit(user=other_user, pool_name=pool.name,
                                 spec=gang_spec("blocked", 4, 8, key="gpu-clique"))
    placement_cycle_run(pool_id=pool.pk)
    client = APIClient()

    # when bob and the staff read it
    answers = {}
    for reader in (other_user, staff_user):
        client.force_authenticate(reader)
        [group] = client.get(f"/api/workflows/{blocked.workflow_id}/").json()["groups"]
        answers[reader.username] = group["waiting"]

    # then
    assert answers["bob"]["holders"] == [{"workflow": "2 workflows of other users", "gpu": 16, "tasks": 2},
                                         {"workflow": "mine-1", "gpu": 8, "tasks": 1}]
    assert "alpha-1" not in " ".join(answers["bob"]["lines"])
    assert [holder["workflow"] for holder in answers["root"]["holders"]] == ["alpha-1", "beta-1", "mine-1"]


def test_reason_says_when_no_domain_exists():
    # given: a reason of a gang whose key no node carries
    reason = {"message": "rack=x (required) needs 2 tasks of 4 gpu in one rack; no rack exists"}
    # when
    said = {exist: reason_reworded(reason, {"key": "rack", "exist": exist, "schedulable": schedulable})
            for exist, schedulable in ((0, 0), (3, 0))}
    # then
    assert said == {
        0: "rack=x (required) needs 2 tasks of 4 gpu in one rack; no rack exists in this pool (no node has the rack "
           "label and those of the keys above it)",
        3: "rack=x (required) needs 2 tasks of 4 gpu in one rack; every rack is cordoned (3 racks exist, none has a "
           "schedulable node)",
    }


def test_api_workflow_detail_shows_waiting_per_scheduling_group(user, user_client):
    # given: rack r2 half held by "half", so the best rack of the queued gang is r2
    pool = make_pool("busy", keys=[("rack", "rack")])
    for rack, prefix in (("r1", "a"), ("r2", "b")):
        for n in (1, 2):
            make_node(pool, f"{prefix}{n}", {"rack": rack}, gpu=4)
    workflow_submit(user=user, pool_name=pool.name, spec=gang_spec("hog", 2, 4))
    half, _ = workflow_submit(user=user, pool_name=pool.name, spec=gang_spec("half", 1, 4))
    placement_cycle_run(pool_id=pool.pk)
    workflow_submit(user=user, pool_name=pool.name, spec=gang_spec("urgent", 2, 4), priority="HIGH")
    second, _ = workflow_submit(user=user, pool_name=pool.name, spec=gang_spec("second", 2, 4))
    placement_cycle_run(pool_id=pool.pk)
    # when
    body = user_client.get(f"/api/workflows/{second.workflow_id}/").json()
    placed = user_client.get(f"/api/workflows/{half.workflow_id}/").json()
    # then
    waiting = body["groups"][0]["waiting"]
    assert (waiting["position"], waiting["ahead"]) == (2, {"HIGH": 1, "NORMAL": 0, "LOW": 0})
    assert waiting["domain"] == {"key": "rack", "path": ["r2"]}
    assert waiting["holders"] == [{"workflow": "half-1", "gpu": 4, "tasks": 1}]
    assert waiting["lines"] == [
        "Queue: 2nd in the pool's queue; ahead of it: 1 HIGH.",
        "Why: rack=default (required) needs 2 tasks of 4 gpu in one rack; the largest free rack fits 1 of 2 "
        "(of the 2 racks in this pool) (the whole pool fits 1 of 2)",
        "Best rack r2 (fits 1 of 2 tasks) is held by: half-1 (4 GPUs, 1 task).",
        "It can start when enough of these finish (or a gang ahead of it is placed elsewhere).",
    ]
    assert placed["groups"][0]["waiting"] is None


def test_workflow_waiting_costs_the_same_queries_for_one_or_many_groups(user, django_assert_num_queries):
    # given: the racks are full; "one" has one queued group, "many" five
    pool, _holders = _two_full_racks(user)
    many_spec = "workflow:\n  name: many\n  groups:\n" + "".join(
        f"  - name: g{i}\n    tasks: [{{name: t{i}a, lead: true, image: b, command: [c]}}, "
        f"{{name: t{i}b, image: b, command: [c]}}]\n" for i in range(5)
    ) + "resources:\n  default: {gpu: 4, topology: [{key: rack}]}\n"
    one, _ = workflow_submit(user=user, pool_name=pool.name, spec=gang_spec("one", 2, 4))
    many, _ = workflow_submit(user=user, pool_name=pool.name, spec=many_spec)
    placement_cycle_run(pool_id=pool.pk)
    loaded = {w.pk: w for w in workflow_detail_queryset(user=user).filter(pk__in=[one.pk, many.pk])}
    # when / then: what is ahead, the domain counts, the holders of the best racks
    with django_assert_num_queries(3):
        assert len(workflow_waiting(loaded[one.pk])) == 1
    with django_assert_num_queries(3):
        answers = workflow_waiting(loaded[many.pk])
    assert [a["position"] for a in answers.values()] == [2, 3, 4, 5, 6]


def test_what_is_ahead_matches_the_queue_order_counted_one_gang_at_a_time(user):
    # given: a pool nothing fits in yet (no nodes), and 12 workflows of random priorities and 1-3
    # groups each, several submitted at the same instant, some of their groups not queued
    import random
    from datetime import timedelta

    from django.utils import timezone

    from workflows.choices import PRIORITY_RANK, TaskStatus
    from workflows.models import Workflow

    pool = make_pool("ahead", keys=[("rack", "rack")])
    make_node(pool, "n1", {"rack": "r1"}, gpu=8)
    rng = random.Random(7)
    instant = timezone.now()
    for index in range(12):
        groups = rng.randint(1, 3)
        spec = f"workflow:\n  name: w{index}\n  groups:\n" + "".join(
            f"  - name: g{i}\n    tasks: [{{name: t{i}, lead: true, image: b, command: [c]}}]\n" for i in range(groups)
        ) + "resources:\n  default: {gpu: 1}\n"
        workflow, _ = workflow_submit(user=user, pool_name=pool.name, spec=spec,
                                      priority=rng.choice(["HIGH", "NORMAL", "LOW"]))
        at = instant + timedelta(seconds=rng.choice([0, 0, 1, 2]))
        Workflow.objects.filter(pk=workflow.pk).update(submitted_at=at)
        for group in workflow.groups.all():
            if rng.random() < 0.2:
                TaskGroup.objects.filter(pk=group.pk).update(status=TaskStatus.WAITING)
    queued = list(TaskGroup.objects.filter(workflow__pool=pool, status=TaskStatus.SCHEDULING)
                  .select_related("workflow"))

    def order(group):  # the queue's order: priority, submission time, workflow, position
        w = group.workflow
        return (PRIORITY_RANK[w.priority], w.submitted_at, w.pk, group.position)

    # when / then: each queued gang's answer counts exactly the gangs before it in that order, by priority
    checked = 0
    for workflow in workflow_detail_queryset(user=user).filter(pool=pool):
        for pk, answer in workflow_waiting(workflow).items():
            mine = next(g for g in queued if g.pk == pk)
            before = [g for g in queued if order(g) < order(mine)]
            expected = {name: sum(1 for g in before if g.workflow.priority == name)
                        for name in ("HIGH", "NORMAL", "LOW")}
            assert answer["ahead"] == expected, (workflow.workflow_id, pk)
            assert answer["position"] == len(before) + 1
            checked += 1
    assert checked == len(queued) >= 15


def test_the_queue_position_is_one_query_whatever_the_queue(user, django_assert_num_queries):
    # given a workflow behind three queued gangs, before any placement cycle
    pool = make_pool("q", keys=[("rack", "rack")])
    for n in range(4):
        make_node(pool, f"n{n}", {"rack": "r1"}, gpu=4)
    for name in ("a", "b", "c"):
        workflow_submit(user=user, pool_name=pool.name, spec=gang_spec(name, 1, 4))
    last, _ = workflow_submit(user=user, pool_name=pool.name, spec=gang_spec("d", 1, 4))
    loaded = workflow_detail_queryset(user=user).get(pk=last.pk)
    # when its place in the queue is read (no cycle ran: no failing domain to count, no holders)
    with django_assert_num_queries(1):
        answers = workflow_waiting(loaded)
    # then one query counted what is ahead
    assert [a["ahead"] for a in answers.values()] == [{"HIGH": 0, "NORMAL": 3, "LOW": 0}]


def test_a_gang_whose_pool_keys_changed_is_not_told_that_capacity_will_place_it():
    # given the reason the cycle gives a queued gang whose tree uses a key the pool no longer has
    answer = {"position": 1, "ahead": {"HIGH": 0, "NORMAL": 0, "LOW": 0}, "domain": None,
              "reason": "pool demo topology keys changed since submission (removed key(s) gpu-clique); this group's "
                        "constraint tree no longer means the same thing. Cancel and resubmit it."}
    # when its waiting lines are said
    lines = waiting_lines(answer, code="pool_keys_changed")
    # then the last does not contradict "Cancel and resubmit it" ("placed as soon as capacity frees up")
    assert lines[-1] == ("It is not placed while the pool's keys differ from those it was submitted under: "
                         "cancel it and submit the spec again.")


class _CountedRow(dict):
    """A row of the holders' query that counts how often its holder is read."""

    reads = 0

    def __getitem__(self, key):
        if key == "workflow_key":
            type(self).reads += 1
        return super().__getitem__(key)


def test_the_holders_of_many_groups_sharing_domains_are_summed_once_per_domain():
    """A finding of the review: a dry run's 1,000 groups read every holder row once per group (0.9 s per
    1,000 reservations, 347,320 reads here); groups share their best domains, and each domain's holders
    are summed once."""
    # given 1,000 holder rows in 50 racks, and 1,000 groups whose best domains are 2 racks or the pool
    rows = [_CountedRow(domain_value_0=f"r{index % 50}", workflow_key=f"g{index}", workflow_shown=f"w{index}",
                        gpu=index % 7, tasks=1) for index in range(1000)]
    best = {group: ([] if group % 3 == 0 else [f"r{group % 2}"]) for group in range(1000)}
    _CountedRow.reads = 0

    # when
    holders = holders_ranked(rows, best, depth=1)

    # then each row was read once per distinct path it is under (its rack, and the pool), and the
    # answers are those of the rows of each path
    assert _CountedRow.reads == 20 + 20 + 1000
    in_r1 = [(251, 6), (601, 6), (951, 6), (201, 5), (551, 5), (901, 5), (151, 4), (501, 4), (851, 4), (101, 3)]
    assert holders[1] == holders[5] == [{"workflow": f"w{index}", "gpu": gpu, "tasks": 1} for index, gpu in in_r1]
    assert [entry["gpu"] for entry in holders[0]] == [6] * 10
