"""Apps through the REST API (docs/api.md "Apps"): versions, parameters, submission through the
workflow path, and refusals that store nothing, on PostgreSQL."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group

from catalog.models import App, AppVersion
from scheduler.models import PoolGrant
from tests.factories import HELLO_APP_SPEC, make_nvl72_pool
from workflows.models import Workflow

pytestmark = pytest.mark.django_db

SPEC = HELLO_APP_SPEC


@pytest.fixture
def bob_client(other_user):
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(other_user)
    return client


@pytest.fixture
def pool():
    return make_nvl72_pool("nvl72", zones=1, spines=1, racks=1, nodes=2)


def create(client, name="hello-app", spec=SPEC, description="Says hello"):
    return client.post("/api/apps/", {"name": name, "description": description, "spec": spec}, format="json")


def test_create_update_show_and_submit_with_set_records_the_version(user_client, pool):
    # given
    created = create(user_client)
    assert created.status_code == 201, created.json()
    made = created.json()
    assert (made["name"], made["version"], made["created_by"]) == ("hello-app", 1, "alice")
    # when: a second version changes the message's default
    updated = user_client.post("/api/apps/hello-app/versions/", {"spec": SPEC.replace("message: hi", "message: hey")},
                               format="json")
    info = user_client.get("/api/apps/hello-app/")
    shown = user_client.get("/api/apps/hello-app/parameters/")
    first = user_client.get("/api/apps/hello-app/parameters/?version=1")
    submitted = user_client.post("/api/apps/hello-app/submit/", {"pool": "nvl72", "set": {"message": "bonjour"}},
                                 format="json")
    # then: both versions kept, the newest shown with its parameters, the workflow records app and version
    assert updated.status_code == 201 and updated.json()["version"] == 2
    body = info.json()
    assert (body["name"], body["owner"], body["description"], body["latest_version"]) == (
        "hello-app", "alice", "Says hello", 2)
    assert [(v["version"], v["created_by"], v["status"]) for v in body["versions"]] == [
        (1, "alice", "READY"), (2, "alice", "READY")]
    assert shown.json() == {"name": "hello-app", "version": 2, "description": "Says hello", "parameters": [
        {"name": "workflow_name", "default": "hello", "comment": "Name of the workflow"},
        {"name": "image", "default": "busybox", "comment": "The image the task runs"},
        {"name": "message", "default": "hey", "comment": ""}]}
    assert first.json()["parameters"][2] == {"name": "message", "default": "hi", "comment": ""}
    assert submitted.status_code == 201, submitted.json()
    answer = submitted.json()
    assert (answer["id"], answer["pool"]) == ("hello-1", "nvl72")
    assert answer["app"] == {"name": "hello-app", "version": 2, "uuid": body["uuid"]}
    workflow = Workflow.objects.get()
    assert (workflow.app_name, workflow.app_version, str(workflow.app_uuid)) == ("hello-app", 2, body["uuid"])
    assert workflow.template_values == {"workflow_name": "hello", "image": "busybox", "message": "bonjour"}
    assert 'echo bonjour' in workflow.spec_text
    assert user_client.get("/api/workflows/hello-1/").json()["app"]["version"] == 2


def test_submit_an_older_version_and_a_dry_run_that_stores_nothing(user_client, pool):
    create(user_client)
    user_client.post("/api/apps/hello-app/versions/", {"spec": SPEC.replace("hello   #", "second   #")},
                     format="json")
    # when
    dry = user_client.post("/api/apps/hello-app/submit/", {"pool": "nvl72", "version": 1, "dry_run": True},
                           format="json")
    old = user_client.post("/api/apps/hello-app/submit/", {"pool": "nvl72", "version": 1}, format="json")
    # then
    assert dry.status_code == 200 and dry.json()["valid"] is True and dry.json()["workflow"] == "hello"
    assert old.status_code == 201 and (old.json()["id"], old.json()["app"]["version"]) == ("hello-1", 1)
    assert Workflow.objects.count() == 1


def test_an_unknown_parameter_is_refused_naming_it_and_nothing_is_stored(user_client, pool):
    create(user_client)
    # when
    response = user_client.post("/api/apps/hello-app/submit/", {"pool": "nvl72", "set": {"unknown": 1}},
                                format="json")
    # then
    assert response.status_code == 400
    assert response.json()["code"] == "spec_invalid"
    assert response.json()["details"]["errors"] == [
        {"path": "set.unknown", "message": "'unknown' is not a parameter of this app; its parameters: "
                                           "workflow_name, image, message"}]
    assert Workflow.objects.count() == 0


def test_a_user_who_cannot_use_the_pool_is_refused(user_client, other_user, pool):
    # given: a pool granted to a team alice is not in
    private = make_nvl72_pool("private", zones=1, spines=1, racks=1, nodes=2)
    team = Group.objects.create(name="llm")
    PoolGrant.objects.create(pool=private, team=team)
    create(user_client)
    # when
    response = user_client.post("/api/apps/hello-app/submit/", {"pool": "private"}, format="json")
    dry = user_client.post("/api/apps/hello-app/submit/", {"pool": "private", "dry_run": True}, format="json")
    # then
    assert (response.status_code, response.json()["code"]) == (403, "pool_forbidden")
    assert "'private'" in response.json()["message"]
    assert (dry.status_code, dry.json()["code"]) == (403, "pool_forbidden")
    assert Workflow.objects.count() == 0


def test_duplicate_names_are_refused_globally(user_client, bob_client):
    assert create(user_client).status_code == 201
    # when bob creates an app of the same name
    response = create(bob_client, description="mine")
    # then
    assert response.status_code == 409
    assert response.json()["details"]["errors"][0]["path"] == "name"
    assert App.objects.get().owner.username == "alice" and AppVersion.objects.count() == 1


@pytest.mark.parametrize(("body", "status", "paths"), [
    ({"name": "bad name", "spec": SPEC}, 400, ["name"]),
    ({"name": "ok", "spec": ""}, 400, ["spec"]),
    ({"name": "ok", "spec": SPEC, "description": "x" * 1001}, 400, ["description"]),
    ({"name": "ok", "spec": "workflow:\n  name: x\ndefault-values: [1]\n"}, 400, ["default-values"]),
    ({"name": "ok", "spec": SPEC.replace("{{ image }}", "{{ missing }}")}, 400, ["template"]),
    ({"name": "ok", "spec": "tasks: []\n"}, 400, ["tasks", "workflow"]),
    ({"name": "ok", "spec": "workflow:\n  tasks: []\n"}, 400, ["workflow.name"]),
])
def test_invalid_input_on_create_names_the_field_and_stores_nothing(user_client, body, status, paths):
    response = user_client.post("/api/apps/", body, format="json")
    assert response.status_code == status, response.json()
    assert [error["path"] for error in response.json()["details"]["errors"]] == paths
    assert App.objects.count() == 0 and AppVersion.objects.count() == 0


def test_only_the_owner_updates_renames_or_deletes(user_client, bob_client):
    create(user_client)
    api_client = bob_client
    # when bob tries
    update = api_client.post("/api/apps/hello-app/versions/", {"spec": SPEC}, format="json")
    rename = api_client.post("/api/apps/hello-app/rename/", {"new_name": "mine"}, format="json")
    delete = api_client.delete("/api/apps/hello-app/?all_versions=true")
    # then each is refused, and nothing changed; he may still read it
    assert [r.status_code for r in (update, rename, delete)] == [403, 403, 403]
    assert update.json()["code"] == "app_forbidden"
    assert list(AppVersion.objects.values_list("version", "status")) == [(1, "READY")]
    assert App.objects.get().name == "hello-app"
    assert api_client.get("/api/apps/hello-app/spec/").json()["spec"] == SPEC


def test_rename_keeps_the_workflows_name_and_delete_keeps_the_numbers(user_client, pool):
    create(user_client)
    user_client.post("/api/apps/hello-app/submit/", {"pool": "nvl72"}, format="json")
    user_client.post("/api/apps/hello-app/versions/", {"spec": SPEC.replace("hi", "yo")}, format="json")
    create(user_client, name="taken")
    # when
    clash = user_client.post("/api/apps/hello-app/rename/", {"new_name": "taken"}, format="json")
    renamed = user_client.post("/api/apps/hello-app/rename/", {"new_name": "greeter"}, format="json")
    neither = user_client.delete("/api/apps/greeter/")
    one = user_client.delete("/api/apps/greeter/?version=2")
    spec_gone = user_client.get("/api/apps/greeter/spec/?version=2")
    latest = user_client.get("/api/apps/greeter/spec/")
    rest = user_client.delete("/api/apps/greeter/?all_versions=true")
    no_more = user_client.get("/api/apps/greeter/spec/")
    again = user_client.post("/api/apps/greeter/versions/", {"spec": SPEC}, format="json")
    # then
    assert (clash.status_code, clash.json()["details"]["errors"][0]["path"]) == (409, "new_name")
    assert renamed.status_code == 200 and renamed.json()["name"] == "greeter"
    assert Workflow.objects.get().app_name == "hello-app"
    assert (neither.status_code, neither.json()["details"]["errors"][0]["path"]) == (400, "version")
    assert one.json() == {"versions": [2]}
    assert (spec_gone.status_code, spec_gone.json()["code"]) == (410, "app_version_deleted")
    assert latest.json()["version"] == 1
    assert rest.json() == {"versions": [1]}
    assert no_more.status_code == 410
    assert again.json()["version"] == 3
    versions = user_client.get("/api/apps/greeter/").json()["versions"]
    assert [(v["version"], v["status"]) for v in versions] == [(1, "DELETED"), (2, "DELETED"), (3, "READY")]
    assert AppVersion.objects.get(app__name="greeter", version=1).spec_text == ""


def test_list_filters_mine_by_user_all_and_name(user_client, bob_client, pool):
    create(user_client, name="alice-app")
    create(bob_client, name="bob-app")
    create(bob_client, name="bob-other")
    bob_client.delete("/api/apps/bob-other/?all_versions=true")

    def names(client, query=""):
        return [item["name"] for item in client.get(f"/api/apps/{query}").json()["results"]]

    # then: by default one's own (a version made or a workflow started), newest first
    assert names(user_client) == ["alice-app"]
    assert names(user_client, "?user=bob") == ["bob-app"]
    assert names(user_client, "?all_users=true") == ["bob-app", "alice-app"]
    assert names(user_client, "?all_users=true&order=asc") == ["alice-app", "bob-app"]
    assert names(user_client, "?all_users=true&name=BOB") == ["bob-app"]
    # when alice starts a workflow from bob's app, it is hers to list too
    assert user_client.post("/api/apps/bob-app/submit/", {"pool": "nvl72"}, format="json").status_code == 201
    assert names(user_client) == ["bob-app", "alice-app"]
    item = user_client.get("/api/apps/?user=bob").json()["results"][0]
    assert (item["owner"], item["description"], item["latest_version"]) == ("bob", "Says hello", 1)
    # and a flag that is no boolean, or given twice, is a 400 naming it (schemathesis sent ?all_users=null)
    for query in ("?all_users=null", "?all_users=true&all_users=false"):
        refused = user_client.get(f"/api/apps/{query}")
        assert (refused.status_code, refused.json()["details"]["errors"][0]["path"]) == (400, "all_users")


def test_a_deleted_version_is_not_submitted_and_an_oversized_spec_is_refused(user_client, pool):
    create(user_client)
    user_client.post("/api/apps/hello-app/versions/", {"spec": SPEC.replace("hi", "yo")}, format="json")
    user_client.delete("/api/apps/hello-app/?version=1")
    # when
    deleted = user_client.post("/api/apps/hello-app/submit/", {"pool": "nvl72", "version": 1}, format="json")
    newest = user_client.post("/api/apps/hello-app/submit/", {"pool": "nvl72"}, format="json")
    huge = user_client.post("/api/apps/hello-app/versions/", {"spec": SPEC + "#" * (1024 * 1024)}, format="json")
    # then
    assert (deleted.status_code, deleted.json()["code"]) == (410, "app_version_deleted")
    assert newest.status_code == 201 and newest.json()["app"]["version"] == 2
    assert (huge.status_code, huge.json()["details"]["errors"][0]["path"]) == (400, "spec")
    assert list(AppVersion.objects.order_by("version").values_list("version", "status")) == [
        (1, "DELETED"), (2, "READY")]
    assert Workflow.objects.count() == 1


def test_missing_apps_and_versions_are_404_naming_the_field(user_client):
    create(user_client)
    missing = user_client.get("/api/apps/nope/")
    version = user_client.get("/api/apps/hello-app/spec/?version=9")
    bad = user_client.get("/api/apps/hello-app/spec/?version=x")
    assert (missing.status_code, missing.json()["details"]["errors"][0]["path"]) == (404, "name")
    assert (version.status_code, version.json()["details"]["errors"][0]["path"]) == (404, "version")
    assert (bad.status_code, bad.json()["details"]["errors"][0]["path"]) == (400, "version")


def test_admin_lists_apps_with_their_versions(user_client, staff_user, client):
    create(user_client)
    client.force_login(staff_user)
    app = App.objects.get()
    listing = client.get("/admin/catalog/app/")
    page = client.get(f"/admin/catalog/app/{app.pk}/change/")
    assert listing.status_code == 200 and "hello-app" in listing.content.decode()
    assert page.status_code == 200 and "Name of the workflow" in page.content.decode()


def _raw(client, url, body):
    """A JSON body as bytes (a lone surrogate escaped, as a hostile client may send it)."""
    import json

    return client.post(url, json.dumps(body), content_type="application/json")


@pytest.mark.parametrize(("body", "path"), [
    ({"name": "a", "description": "x\x00y", "spec": SPEC}, "description"),
    ({"name": "a", "description": "x\ud800y", "spec": SPEC}, "description"),
    ({"name": "a", "spec": SPEC + "# a comment with \x00"}, "spec"),
    ({"name": "a", "spec": SPEC + "# a comment with \ud800"}, "spec"),
])
def test_text_a_database_cannot_store_is_refused_naming_the_field(user_client, body, path):
    response = _raw(user_client, "/api/apps/", body)
    assert response.status_code == 400
    assert response.json()["details"]["errors"][0]["path"] == path
    assert App.objects.count() == 0


@pytest.mark.parametrize("query", ["?name=a%00b", "?user=a%00b"])
def test_list_filters_a_database_cannot_store_are_400(user_client, query):
    response = user_client.get(f"/api/apps/{query}")
    assert (response.status_code, response.json()["details"]["errors"][0]["path"]) == (400, query[1:5].rstrip("="))
