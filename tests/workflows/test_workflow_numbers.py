"""Workflow ids leak nothing about other users' workflows (docs/design.md §7, "Workflow ids")."""

from __future__ import annotations

import re

import pytest
from rest_framework.test import APIClient

from tests.factories import make_nvl72_pool
from workflows.models import Workflow

pytestmark = pytest.mark.django_db

SPEC = """
workflow:
  name: {name}
  tasks:
  - name: train
    image: busybox
    command: ["sh", "-c", "echo hi"]
resources:
  default:
    gpu: 1
"""


@pytest.fixture
def pool():
    return make_nvl72_pool("nvl72", zones=1, spines=1, racks=1, nodes=2)


def _client(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def _submit(client: APIClient, name: str = "alicewf") -> dict:
    response = client.post("/api/workflows/", {"pool": "nvl72", "spec": SPEC.format(name=name)}, format="json")
    assert response.status_code == 201, response.json()
    return response.json()


def test_a_workflow_number_does_not_reveal_another_users_hidden_workflow(user, other_user, pool):
    # given: alice's alicewf-1, which bob cannot see
    alice, bob = _client(user), _client(other_user)
    assert _submit(alice)["id"] == "alicewf-1"
    assert bob.get("/api/workflows/alicewf-1/").status_code == 404
    # when: bob submits a workflow of the same name
    body = _submit(bob)
    # then: his is numbered as if alice's did not exist, and each sees only their own under that id
    assert body["id"] == "alicewf-1"
    assert body["submitted_by"] == "bob"
    assert bob.get("/api/workflows/alicewf-1/").json()["submitted_by"] == "bob"
    assert alice.get("/api/workflows/alicewf-1/").json()["submitted_by"] == "alice"
    assert _submit(alice)["id"] == "alicewf-2"
    assert _submit(bob)["id"] == "alicewf-2"


def test_staff_are_told_which_owners_share_an_id_and_pick_one_with_user(user, other_user, staff_user, pool):
    # given: alice's and bob's alicewf-1, both visible to staff
    _submit(_client(user))
    _submit(_client(other_user))
    staff = _client(staff_user)
    # when
    ambiguous = staff.get("/api/workflows/alicewf-1/")
    cancel = staff.post("/api/workflows/alicewf-1/cancel/")
    # then: a 409 in the envelope naming both owners and how to pick one, and nothing cancelled
    assert ambiguous.status_code == 409
    error = ambiguous.json()
    assert error["code"] == "workflow_ambiguous"
    assert error["details"]["owners"] == ["alice", "bob"]
    assert "?user=<owner>" in error["message"]
    assert cancel.status_code == 409
    assert sorted(Workflow.objects.values_list("status", flat=True)) == ["PENDING", "PENDING"]
    # and ?user= picks one (also for actions), an unknown owner is a 404
    assert staff.get("/api/workflows/alicewf-1/?user=bob").json()["submitted_by"] == "bob"
    assert staff.get("/api/workflows/alicewf-1/spec/?user=alice").json()["workflow"] == "alicewf-1"
    cancelled = staff.post("/api/workflows/alicewf-1/cancel/?user=bob")
    assert cancelled.status_code == 200
    assert dict(Workflow.objects.values_list("submitted_by__username", "status")) == {
        "alice": "PENDING", "bob": "FAILED_CANCELED"}
    assert staff.get("/api/workflows/alicewf-1/?user=carol").status_code == 404
    assert staff.get("/api/workflows/alicewf-1/?user=a%00b").status_code == 404


def test_the_callers_own_workflow_comes_first_when_ids_are_shared(user, staff_user, pool):
    # given: alice's alicewf-1 and the staff user's own alicewf-1
    _submit(_client(user))
    staff = _client(staff_user)
    _submit(staff)
    # when
    body = staff.get("/api/workflows/alicewf-1/").json()
    # then
    assert body["submitted_by"] == "root"
    assert staff.get("/api/workflows/alicewf-1/?user=alice").json()["submitted_by"] == "alice"


def test_names_outside_the_database_stay_unique_across_owners(user, other_user, pool):
    # given: alice's and bob's alicewf-1, placed
    from scheduler.dispatch.pod.manifest import LABEL_WORKFLOW, build_manifest
    from scheduler.dispatch.pod.naming import pod_name_for
    from workflows.models import Task
    from workflows.scheduling.cycle import placement_cycle_run
    from workflows.scheduling.pod.request import pod_request

    _submit(_client(user))
    _submit(_client(other_user))
    # when
    placement_cycle_run(pool_id=pool.pk)
    # then: their global ids, pod names and pod labels differ, and are made from the global id
    workflows = {w.submitted_by.username: w for w in Workflow.objects.select_related("submitted_by")}
    assert {name: w.global_id for name, w in workflows.items()} == {
        "alice": f"alicewf-1-u{user.pk}", "bob": f"alicewf-1-u{other_user.pk}"}
    tasks = {t.workflow.submitted_by.username: t for t in Task.objects.select_related("workflow__submitted_by",
                                                                                      "group", "node")}
    assert {name: t.pod_name for name, t in tasks.items()} == {
        name: pod_name_for(workflows[name].global_id, "train") for name in ("alice", "bob")}
    assert tasks["alice"].pod_name != tasks["bob"].pod_name
    manifests = {name: build_manifest(pod_request(t, pool)) for name, t in tasks.items()}
    assert {name: m["metadata"]["labels"][LABEL_WORKFLOW] for name, m in manifests.items()} == {
        name: workflows[name].global_id for name in ("alice", "bob")}


def test_the_workflow_id_token_is_the_id_its_owner_sees(user, other_user, pool):
    # given: bob's alicewf-1 whose command prints {{workflow_id}}, placed on the simulated backend
    from workflows.models import Task
    from workflows.scheduling.cycle import placement_cycle_run
    from workflows.scheduling.pod.request import pod_request

    _submit(_client(user))
    _submit(_client(other_user), "alicewf").get("id")
    Task.objects.filter(workflow__submitted_by=other_user).update(command=["echo", "{{workflow_id}}"])
    placement_cycle_run(pool_id=pool.pk)
    task = Task.objects.select_related("workflow", "group", "node").get(workflow__submitted_by=other_user)
    # when
    request = pod_request(task, pool)
    # then
    assert request.command == ("echo", "alicewf-1")
    assert request.workflow_id == f"alicewf-1-u{other_user.pk}"


@pytest.mark.django_db(transaction=True)
def test_the_migration_keeps_existing_ids_and_names_them_globally_by_their_id():
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    # every other app at its latest migration, so that its models' state matches the database
    after = MigrationExecutor(connection).loader.graph.leaf_nodes()
    before = [("workflows", "0014_group_requeues"), *[node for node in after if node[0] != "workflows"]]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    old = executor.loader.project_state(before).apps
    pool = old.get_model("scheduler", "Pool").objects.create(name="old")
    users = [old.get_model("auth", "User").objects.create(username=name) for name in ("a", "b")]
    for seq, owner in ((1, users[0]), (2, users[1])):
        old.get_model("workflows", "Workflow").objects.create(workflow_id=f"w-{seq}", name="w", seq=seq, pool=pool,
                                                              submitted_by=owner)
    # when
    executor = MigrationExecutor(connection)
    executor.migrate(after)
    # then
    new = executor.loader.project_state(after).apps
    rows = set(new.get_model("workflows", "Workflow").objects.values_list("workflow_id", "global_id",
                                                                          "submitted_by__username"))
    assert rows == {("w-1", "w-1", "a"), ("w-2", "w-2", "b")}


def test_the_pages_link_to_another_owners_workflow_by_naming_its_owner(client, user, other_user, staff_user, pool):
    # given: alice's and bob's alicewf-1, and a staff viewer
    _submit(_client(user))
    _submit(_client(other_user))
    client.force_login(staff_user)
    # when
    listing = client.get("/workflows/").content.decode()
    bobs = client.get("/workflows/alicewf-1/?user=bob")
    plain = client.get("/workflows/alicewf-1/")
    cancel = client.post("/workflows/alicewf-1/cancel/?user=bob")
    # then: each link names its owner, the owner's page opens, the bare id of two owners names none
    assert '<a href="/workflows/alicewf-1/?user=alice">alicewf-1</a>' in listing
    assert '<a href="/workflows/alicewf-1/?user=bob">alicewf-1</a>' in listing
    assert bobs.status_code == 200
    assert 'action="/workflows/alicewf-1/cancel/?user=bob"' in bobs.content.decode()
    assert 'data-live="/workflows/alicewf-1/?user=bob&amp;partial=1"' in bobs.content.decode()
    assert plain.status_code == 404
    assert (cancel.status_code, cancel["Location"]) == (302, "/workflows/alicewf-1/?user=bob")
    assert dict(Workflow.objects.values_list("submitted_by__username", "status")) == {
        "alice": "PENDING", "bob": "FAILED_CANCELED"}
    # and the owner's own links stay as they were
    client.force_login(user)
    assert '<a href="/workflows/alicewf-1/">alicewf-1</a>' in client.get("/workflows/").content.decode()



def test_the_pool_page_lists_two_owners_workflows_of_one_id_apart(client, user, other_user, staff_user, pool):
    # given: alice's and bob's alicewf-1, both holding capacity
    from workflows.scheduling.cycle import placement_cycle_run

    _submit(_client(user))
    _submit(_client(other_user))
    placement_cycle_run(pool_id=pool.pk)
    client.force_login(staff_user)
    # when
    page = client.get("/pools/nvl72/").content.decode()
    # then: one row each, linked by owner
    row = r'<tr data-workflow="alicewf-1">\s*<td><a href="([^"]+)">alicewf-1</a></td>\s*<td>(\w+)</td>'
    rows = re.findall(row, page)
    assert sorted(rows) == [("/workflows/alicewf-1/?user=alice", "alice"), ("/workflows/alicewf-1/?user=bob", "bob")]
