"""Pool access, pool status and team quotas (docs/design.md §9): through the API and the placement
cycle, on PostgreSQL."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group

from osmo.errors import ValidationFailedError
from scheduler.choices import PoolStatus
from scheduler.models import PoolGrant, TeamQuota
from scheduler.services.access import team_quota_set
from tests.factories import make_nvl72_pool
from workflows.choices import TaskStatus
from workflows.models import TaskGroup, Workflow
from workflows.scheduling.cycle import placement_cycle_run
from workflows.services import workflow_submit

pytestmark = pytest.mark.django_db


def gang(name: str, tasks: int, gpu: int = 4) -> str:
    rows = "\n".join(f"    - {{name: t{i}, {'lead: true, ' if i == 0 else ''}image: busybox, command: [sleep, '1']}}"
                     for i in range(tasks))
    return (f"workflow:\n  name: {name}\n  groups:\n  - name: g\n    tasks:\n{rows}\n"
            f"resources:\n  default:\n    gpu: {gpu}\n    cpu: 4\n    memory: 16Gi\n")


@pytest.fixture
def pool():
    # 2 zones x 1 spine x 2 racks x 4 nodes of 4 GPUs: 64 GPUs
    return make_nvl72_pool("shared", zones=2, spines=1, racks=2, nodes=4)


def test_a_pool_without_grants_is_open_and_a_granted_pool_is_hidden_from_others(user_client, user, other_user, pool):
    # given a second pool granted to team llm only, which alice is not in
    restricted = make_nvl72_pool("private", zones=1, spines=1, racks=1, nodes=2)
    llm = Group.objects.create(name="llm")
    other_user.groups.add(llm)
    PoolGrant.objects.create(pool=restricted, team=llm)
    # when alice lists pools, opens and submits to the restricted one
    names = [p["name"] for p in user_client.get("/api/pools/").json()["results"]]
    detail = user_client.get("/api/pools/private/")
    submit = user_client.post("/api/workflows/", {"pool": "private", "spec": gang("x", 1)}, format="json")
    # then she sees only the open pool and is refused with the pool named; nothing is stored
    assert names == ["shared"]
    assert (detail.status_code, detail.json()["code"]) == (403, "pool_forbidden")
    assert submit.status_code == 403
    assert submit.json()["code"] == "pool_forbidden" and "'private'" in submit.json()["message"]
    assert Workflow.objects.count() == 0
    # while bob, in the team, may submit
    bob, _ = workflow_submit(user=other_user, pool_name="private", spec=gang("y", 1))
    assert (bob.pool.name, bob.team) == ("private", llm)


def test_a_granted_team_cannot_be_deleted_while_its_grant_stands(user_client, user, staff_user, pool):
    # given a pool granted to team llm only, which alice is not in
    from django.test import Client

    restricted = make_nvl72_pool("private", zones=1, spines=1, racks=1, nodes=2)
    llm = Group.objects.create(name="llm")
    PoolGrant.objects.create(pool=restricted, team=llm)
    admin = Client()
    admin.force_login(staff_user)
    # when an admin deletes the team (its grant, the pool's last, would go with it and open the pool)
    page = admin.post(f"/admin/auth/group/{llm.pk}/delete/", {"post": "yes"})
    # then Django's admin refuses, naming the grant, and the pool stays hidden from alice
    assert page.status_code == 200 and "private: team llm" in page.content.decode()
    assert Group.objects.filter(name="llm").exists() and PoolGrant.objects.filter(pool=restricted).count() == 1
    assert [p["name"] for p in user_client.get("/api/pools/").json()["results"]] == ["shared"]
    # and once the grant is removed on purpose, the team can go
    PoolGrant.objects.filter(pool=restricted).delete()
    assert admin.post(f"/admin/auth/group/{llm.pk}/delete/", {"post": "yes"}).status_code == 302
    assert not Group.objects.filter(name="llm").exists()


def test_maintenance_refuses_submissions_and_offline_places_nothing(user_client, user, pool):
    # given a pool in maintenance
    pool.status = PoolStatus.MAINTENANCE
    pool.save()
    refused = user_client.post("/api/workflows/", {"pool": "shared", "spec": gang("m", 1)}, format="json")
    patched = user_client.patch("/api/pools/shared/", {"status": "OFFLINE"}, format="json")
    # when it goes OFFLINE, a submission is accepted but a cycle places nothing
    pool.status = PoolStatus.OFFLINE
    pool.save()
    workflow, _ = workflow_submit(user=user, pool_name="shared", spec=gang("o", 1))
    placement_cycle_run(pool_id=pool.pk)
    waiting = TaskGroup.objects.get(workflow=workflow)
    # then
    assert (refused.status_code, refused.json()["code"]) == (409, "pool_maintenance")
    assert "in maintenance" in refused.json()["message"]
    assert patched.status_code == 403  # only staff change pools
    assert waiting.status == TaskStatus.SCHEDULING
    assert waiting.unschedulable_reason["code"] == "pool_not_online"
    assert "pool shared is OFFLINE" in waiting.unschedulable_reason["message"]
    lines = user_client.get(f"/api/workflows/{workflow.workflow_id}/").json()["groups"][0]["waiting"]["lines"]
    assert lines[-1] == "It stays queued and is placed once an administrator sets the pool ONLINE again."


def test_a_dry_run_meets_the_team_quota_and_status_checks_of_a_submission(user_client, user, pool):
    # given alice in team llm with a quota of 8 GPUs in the pool
    llm = Group.objects.create(name="llm")
    user.groups.add(llm)
    team_quota_set(pool=pool, team=llm, gpu=8)

    def dry_run(tasks: int, **fields):
        return user_client.post("/api/workflows/", {"pool": "shared", "spec": gang("d", tasks), "dry_run": True,
                                                    **fields}, format="json")

    # when she dry-runs with a team she is not in, a gang over the quota, the same as LOW work, and on an
    # OFFLINE pool
    stranger = dry_run(1, team="vision")
    over = dry_run(3)
    low = dry_run(3, priority="LOW")
    pool.status = PoolStatus.OFFLINE
    pool.save()
    offline = dry_run(1)
    # then the answers are those of a submission: 400 naming the team, the quota's wait, a placement for
    # LOW work (it borrows), and the pool's status; nothing is stored
    assert stranger.status_code == 400 and stranger.json()["details"]["errors"][0]["path"] == "team"
    assert over.status_code == 200 and over.json()["team"] == "llm"
    placement = over.json()["groups"][0]["placement"]
    assert (placement["status"], placement["code"], placement["tasks"]) == ("unschedulable", "quota_exceeded", {})
    assert "team llm uses 0 of its 8 GPUs in pool shared; this group needs 12 more" in placement["message"]
    assert low.json()["groups"][0]["placement"]["status"] == "placed"
    assert offline.json()["pool_status"] == "OFFLINE"
    assert offline.json()["groups"][0]["placement"]["code"] == "pool_not_online"
    assert Workflow.objects.count() == 0


def test_staff_set_the_status_through_the_api_and_online_places_the_queue(staff_client, user, pool):
    # given an OFFLINE pool with a queued gang
    staff_client.patch("/api/pools/shared/", {"status": "OFFLINE"}, format="json")
    workflow, _ = workflow_submit(user=user, pool_name="shared", spec=gang("q", 2))
    placement_cycle_run(pool_id=pool.pk)
    # when staff set it ONLINE and a cycle runs
    response = staff_client.patch("/api/pools/shared/", {"status": "ONLINE"}, format="json")
    placement_cycle_run(pool_id=pool.pk)
    # then
    assert response.status_code == 200 and response.json()["status"] == "ONLINE"
    assert TaskGroup.objects.get(workflow=workflow).status == TaskStatus.INITIALIZING


def test_after_machines_are_removed_quotas_may_be_lowered_but_not_raised(staff_client, pool):
    # given quotas of 32 + 32 GPUs in the 64-GPU pool, then half of its machines removed
    from scheduler.models import Node

    llm, vision = Group.objects.create(name="llm"), Group.objects.create(name="vision")
    team_quota_set(pool=pool, team=llm, gpu=32)
    team_quota_set(pool=pool, team=vision, gpu=32)
    Node.objects.filter(pk__in=list(Node.objects.filter(pool=pool).order_by("name").values_list("pk", flat=True)[:8])
                        ).delete()
    # when staff change the status, lower one quota (still over the 32 GPUs left), and raise one
    status = staff_client.patch("/api/pools/shared/", {"status": "OFFLINE"}, format="json")
    team_quota_set(pool=pool, team=llm, gpu=16)

    with pytest.raises(ValidationFailedError) as raised:
        team_quota_set(pool=pool, team=vision, gpu=33)
    assert raised.value.details["errors"] == [{"path": "gpu", "message": "quotas in pool shared would add up to "
                                                                         "49 GPUs; the pool has 32"}]
    # then the first two are accepted (they do not raise the total) and the third is refused
    assert status.status_code == 200
    assert sorted(TeamQuota.objects.values_list("team__name", "gpu")) == [("llm", 16), ("vision", 32)]


def test_a_team_over_its_quota_waits_with_a_reason_that_says_so_and_low_work_borrows(user, pool):
    # given team llm with 16 of the pool's 64 GPUs, alice in it, 12 GPUs of NORMAL work running
    llm = Group.objects.create(name="llm")
    user.groups.add(llm)
    team_quota_set(pool=pool, team=llm, gpu=16)
    running, _ = workflow_submit(user=user, pool_name="shared", spec=gang("run", 3))
    placement_cycle_run(pool_id=pool.pk)
    # when she submits 8 more GPUs of NORMAL work and 8 of LOW work
    normal, _ = workflow_submit(user=user, pool_name="shared", spec=gang("normal", 2))
    low, _ = workflow_submit(user=user, pool_name="shared", spec=gang("low", 2), priority="LOW")
    placement_cycle_run(pool_id=pool.pk)
    # then the NORMAL gang waits on the quota (the pool has room), the LOW gang borrows and runs
    waiting = TaskGroup.objects.get(workflow=normal)
    assert running.team == llm
    assert waiting.status == TaskStatus.SCHEDULING
    assert waiting.unschedulable_reason["code"] == "quota_exceeded"
    assert waiting.unschedulable_reason["message"].startswith(
        "team llm uses 12 of its 16 GPUs in pool shared; this group needs 8 more")
    from workflows.selectors import workflow_detail_queryset
    from workflows.waiting import workflow_waiting

    lines = workflow_waiting(workflow_detail_queryset(user=user).get(pk=normal.pk))[waiting.pk]["lines"]
    assert lines[-1].startswith("It stays queued and is placed once its team's HIGH and NORMAL work")
    assert TaskGroup.objects.get(workflow=low).status == TaskStatus.INITIALIZING
    # and when the quota grows, the next cycle places it
    team_quota_set(pool=pool, team=llm, gpu=24)
    placement_cycle_run(pool_id=pool.pk)
    waiting.refresh_from_db()
    assert waiting.status == TaskStatus.INITIALIZING


def test_quotas_may_not_exceed_the_pool_and_quota_use_is_reported(staff_client, user, pool):
    # given two teams
    llm, vision = Group.objects.create(name="llm"), Group.objects.create(name="vision")
    user.groups.add(llm)
    team_quota_set(pool=pool, team=llm, gpu=40)
    # when a second quota would take the sum past the pool's 64 GPUs
    from osmo.errors import ValidationFailedError

    with pytest.raises(ValidationFailedError) as refused:
        team_quota_set(pool=pool, team=vision, gpu=32)
    workflow_submit(user=user, pool_name="shared", spec=gang("q", 2))
    workflow_submit(user=user, pool_name="shared", spec=gang("l", 1), priority="LOW")
    placement_cycle_run(pool_id=pool.pk)
    quotas = staff_client.get("/api/pools/shared/").json()["quotas"]
    # then
    assert refused.value.details["errors"][0]["path"] == "gpu"
    assert "would add up to 72 GPUs; the pool has 64" in refused.value.details["errors"][0]["message"]
    assert TeamQuota.objects.filter(team=vision).count() == 0
    assert quotas == [{"team": "llm", "quota_gpu": 40, "used_gpu": 8, "low_gpu": 4}]


def test_the_team_must_be_named_when_several_have_a_quota(user_client, user, pool):
    # given alice in two teams that both have a quota in the pool
    for name in ("llm", "vision"):
        team = Group.objects.create(name=name)
        user.groups.add(team)
        team_quota_set(pool=pool, team=team, gpu=8)
    # when she submits without naming one, then naming one she is not in, then naming one of hers
    unnamed = user_client.post("/api/workflows/", {"pool": "shared", "spec": gang("a", 1)}, format="json")
    foreign = user_client.post("/api/workflows/", {"pool": "shared", "spec": gang("b", 1), "team": "ops"},
                               format="json")
    named = user_client.post("/api/workflows/", {"pool": "shared", "spec": gang("c", 1), "team": "vision"},
                             format="json")
    # then
    assert unnamed.status_code == 400
    assert unnamed.json()["details"]["errors"][0]["path"] == "team"
    assert "(llm, vision)" in unnamed.json()["details"]["errors"][0]["message"]
    assert foreign.status_code == 400 and "not a member of team 'ops'" in foreign.json()["message"]
    assert named.status_code == 201
    assert named.json()["team"] == "vision"


def test_the_pool_page_shows_quota_use_and_refuses_pools_without_access(client, user, other_user, pool):
    # given team llm with a quota and 8 GPUs of its work running, and a pool granted to bob only
    llm = Group.objects.create(name="llm")
    user.groups.add(llm)
    team_quota_set(pool=pool, team=llm, gpu=16)
    workflow_submit(user=user, pool_name="shared", spec=gang("q", 2))
    placement_cycle_run(pool_id=pool.pk)
    private = make_nvl72_pool("private", zones=1, spines=1, racks=1, nodes=2)
    PoolGrant.objects.create(pool=private, user=other_user)
    client.force_login(user)
    # when
    page = client.get("/pools/shared/").content.decode()
    listing = client.get("/pools/").content.decode()
    refused = client.get("/pools/private/")
    # then
    row = '<tr data-team="llm"><td>llm</td><td class="num">16</td><td class="num">8</td><td class="num">0</td></tr>'
    assert row in page
    assert 'data-pool="shared"' in listing and 'data-pool="private"' not in listing
    assert refused.status_code == 403


def test_the_pool_list_shows_each_teams_quota_use_in_the_api_and_the_cli(user_client, user, pool):
    from cli.render import pool_rows

    # given team llm with a 32-GPU quota holding 8 GPUs of NORMAL work and 4 of LOW work
    llm = Group.objects.create(name="llm")
    user.groups.add(llm)
    TeamQuota.objects.create(pool=pool, team=llm, gpu=32)
    workflow_submit(user=user, pool_name="shared", spec=gang("n", 2), team="llm")
    workflow_submit(user=user, pool_name="shared", spec=gang("l", 1), team="llm", priority="LOW")
    placement_cycle_run(pool_id=pool.pk)
    # when the pools are listed
    listed = user_client.get("/api/pools/").json()["results"]
    # then the list carries the quota use, and `osmo pool list` shows it
    assert listed[0]["quotas"] == [{"team": "llm", "quota_gpu": 32, "used_gpu": 8, "low_gpu": 4}]
    lines = pool_rows(listed)
    assert "QUOTAS" in lines[0] and "llm 8/32 +4 low" in lines[1]
