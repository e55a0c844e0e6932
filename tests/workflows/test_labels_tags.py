"""Workflow labels and tags through the API (docs/api.md, "Labels and tags"): --label over the spec's,
the list's selectors, the admin's label policy, pod labels, tags, and refusals that store nothing."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.factories import make_nvl72_pool
from workflows.models import LabelPolicySetting, LabelValue, Tag, Workflow, WorkflowLabel

pytestmark = pytest.mark.django_db

SPEC = """
workflow:
  name: {name}
  labels:
    project: sim_alpha
    team: robotics
  tasks:
  - name: train
    image: busybox
    command: ["true"]
resources:
  default:
    gpu: 1
"""


@pytest.fixture
def pool():
    return make_nvl72_pool("nvl72", zones=1, spines=1, racks=1, nodes=2)


def submit(client, name="hello", labels=None, **extra):
    body = {"pool": "nvl72", "spec": SPEC.format(name=name), **extra}
    if labels is not None:
        body["labels"] = labels
    return client.post("/api/workflows/", body, format="json")


def listed(client, **params):
    response = client.get("/api/workflows/", params)
    assert response.status_code == 200, response.json()
    return sorted(item["id"] for item in response.json()["results"])


def test_labels_given_at_submission_override_the_specs_and_are_stored(user_client, pool):
    # when
    response = submit(user_client, labels={"team": "vision", "run": "r42"})
    # then
    assert response.status_code == 201, response.json()
    assert response.json()["labels"] == {"project": "sim_alpha", "team": "vision", "run": "r42"}
    workflow = Workflow.objects.get()
    assert workflow.labels == {"project": "sim_alpha", "team": "vision", "run": "r42"}
    assert sorted(WorkflowLabel.objects.values_list("key", "value", "submitted_by__username")) == [
        ("project", "sim_alpha", "alice"), ("run", "r42", "alice"), ("team", "vision", "alice")]
    assert workflow.pod_labels == workflow.labels  # the default policy: every key, no prefix
    # and each value is known once, however many workflows have it
    assert submit(user_client, labels={"team": "vision", "run": "r43"}).status_code == 201
    assert sorted(LabelValue.objects.values_list("key", "value")) == [
        ("project", "sim_alpha"), ("run", "r42"), ("run", "r43"), ("team", "vision")]


def test_a_raw_yaml_submission_takes_label_query_parameters(user_client, pool):
    # when
    response = user_client.post("/api/workflows/?pool=nvl72&label=team=vision&label=run=r1",
                                SPEC.format(name="raw"), content_type="application/yaml")
    # then
    assert response.status_code == 201, response.json()
    assert response.json()["labels"] == {"project": "sim_alpha", "team": "vision", "run": "r1"}


@pytest.mark.parametrize(("labels", "path"), [
    ({"bad key!": "x"}, 'labels["bad key!"]'),
    ({"team": "not ok"}, "labels.team"),
    ({"team": ""}, "labels.team"),
    ({"-team": "x"}, "labels.-team"),
])
def test_a_label_of_bad_syntax_is_a_400_naming_it_and_stores_nothing(user_client, pool, labels, path):
    # when
    response = submit(user_client, labels=labels)
    # then
    assert response.status_code == 400, response.json()
    assert [error["path"] for error in response.json()["details"]["errors"]] == [path]
    assert Workflow.objects.count() == 0
    assert WorkflowLabel.objects.count() == 0


def test_a_dry_run_checks_labels_too(user_client, pool):
    response = submit(user_client, labels={"team": "a b"}, dry_run=True)
    assert response.status_code == 400
    assert response.json()["details"]["errors"][0]["path"] == "labels.team"


@pytest.mark.parametrize("few_max", [256, 0], ids=["by-keys", "by-containment"])
def test_the_list_selects_by_exact_wildcard_and_alternative_selectors(user_client, pool, monkeypatch, few_max):
    """Selectors few workflows match select those by their keys; with more, by the labels' index."""
    # given
    import workflows.labels

    monkeypatch.setattr(workflows.labels, "FEW_WORKFLOWS_MAX", few_max)
    for name, team, project in [("a", "robotics_a", "sim_1"), ("b", "robotics_b", "hil_1"),
                                ("c", "vision", "sim_2"), ("d", "robotics_c", "real_1")]:
        assert submit(user_client, name=name, labels={"team": team, "project": project}).status_code == 201
    # then
    assert listed(user_client, label="team=vision") == ["c-1"]
    assert listed(user_client, label="team=robotics_*") == ["a-1", "b-1", "d-1"]
    assert listed(user_client, label="team=robotics_(a|b)") == ["a-1", "b-1"]
    assert listed(user_client, label="project=(sim_*|hil_*)") == ["a-1", "b-1", "c-1"]
    assert listed(user_client, label="project=*_1") == ["a-1", "b-1", "d-1"]
    assert listed(user_client, label="team=*") == ["a-1", "b-1", "c-1", "d-1"]
    assert listed(user_client, label="nothere=*") == []
    # repeated: all must match
    assert listed(user_client, label=["team=robotics_*", "project=sim_*"]) == ["a-1"]
    # the answers carry the labels
    first = user_client.get("/api/workflows/", {"label": "team=vision"}).json()["results"][0]
    assert first["labels"] == {"project": "sim_2", "team": "vision"}


@pytest.mark.parametrize("values_max, walk_max, few_max", [(1, 2048, 256), (256, 2, 256), (256, 2048, 0)],
                         ids=["value-list", "pattern", "containment"])
def test_a_wildcard_over_many_values_selects_the_same_workflows(user_client, pool, monkeypatch, values_max,
                                                                 walk_max, few_max):
    """A wildcard matching more values than are selected one by one, or whose range holds more known
    values than are read (either: a semi-join on the pattern), or whose values more workflows have than
    are selected by their keys (containment on the labels' index)."""
    # given
    import workflows.labels

    monkeypatch.setattr(workflows.labels, "GLOB_VALUES_MAX", values_max)
    monkeypatch.setattr(workflows.labels, "GLOB_WALK_MAX", walk_max)
    monkeypatch.setattr(workflows.labels, "FEW_WORKFLOWS_MAX", few_max)
    for name, project in [("a", "sim_1"), ("b", "sim_2"), ("c", "hil_1"), ("d", "real_1"), ("e", "sim_3")]:
        assert submit(user_client, name=name, labels={"project": project}).status_code == 201
    # then
    assert listed(user_client, label="project=sim_*") == ["a-1", "b-1", "e-1"]
    assert listed(user_client, label="project=(sim_*|hil_*)") == ["a-1", "b-1", "c-1", "e-1"]
    assert listed(user_client, label="project=*_1") == ["a-1", "c-1", "d-1"]
    assert listed(user_client, label="project=(real_1|sim_*)") == ["a-1", "b-1", "d-1", "e-1"]
    assert user_client.get("/api/workflows/", {"label": "project=sim_*"}).json()["count"] == 3


@pytest.mark.parametrize("values_max, walk_max", [(256, 2048), (1, 2048), (256, 2)],
                         ids=["values", "value-list", "pattern"])
def test_the_count_of_one_selector_is_of_the_workflows_the_viewer_sees(user_client, staff_client, other_user, pool,
                                                                      monkeypatch, values_max, walk_max):
    """One selector alone is counted on the label rows, which carry the owner: the viewer's matches
    (staff: everyone's), whether the selector's values were looked up or not, and patterns that overlap
    counted once; with any other filter the filtered list is counted."""
    # given: alice's workflows and bob's, one of alice's cancelled
    from rest_framework.test import APIClient

    import workflows.labels

    monkeypatch.setattr(workflows.labels, "GLOB_VALUES_MAX", values_max)
    monkeypatch.setattr(workflows.labels, "GLOB_WALK_MAX", walk_max)
    bob = APIClient()
    bob.force_authenticate(other_user)
    for name, project in [("a", "sim_1"), ("b", "sim_12"), ("c", "hil_1"), ("d", "real_1"), ("e", "sim_3")]:
        assert submit(user_client, name=name, labels={"project": project}).status_code == 201
    for name, project in [("f", "sim_1"), ("g", "hil_2")]:
        assert submit(bob, name=name, labels={"project": project}).status_code == 201
    assert user_client.post("/api/workflows/e-1/cancel/").status_code == 200

    def count(client, **params):
        answer = client.get("/api/workflows/", {"limit": 1, **params}).json()
        return answer["count"], answer["next"] is not None

    # then: one selector, counted on the label rows
    assert count(user_client, label="project=sim_*") == (3, True)
    assert count(user_client, label="project=(sim_*|hil_*)") == (4, True)
    assert count(user_client, label="project=(sim_*|sim_1*)") == (3, True)  # overlapping patterns, once
    assert count(user_client, label="project=(sim_1|sim_*)") == (3, True)
    assert count(user_client, label="project=(real_1|hil_*)") == (2, True)
    assert count(user_client, label="project=*_1") == (3, True)
    assert count(user_client, label="project=(s*_1|hil_*)") == (2, True)  # a prefix's range, then the rest
    assert count(user_client, label="project=*") == (5, True)
    assert count(user_client, label="project=sim_1") == (1, False)
    assert count(user_client, label="project=nothing*") == (0, False)
    assert count(user_client, label="nothere=*") == (0, False)
    assert count(bob, label="project=sim_*") == (1, False)
    assert count(staff_client, label="project=sim_*") == (4, True)
    assert count(staff_client, label="project=(sim_*|hil_*)") == (6, True)
    # and the count reads the label rows alone, no join with the workflows
    with CaptureQueriesContext(connection) as queries:
        user_client.get("/api/workflows/", {"label": "project=(sim_*|hil_*)"})
    counts = [query["sql"] for query in queries.captured_queries if "COUNT(*)" in query["sql"].upper()]
    assert len(counts) == 1 and 'FROM "workflows_workflowlabel"' in counts[0], counts
    assert '"workflows_workflow"' not in counts[0], counts
    # and with another filter, or a second selector, the filtered list
    assert count(user_client, label="project=sim_*", status="FAILED_CANCELED") == (1, False)
    assert count(user_client, label=["project=sim_*", "project=*_1"]) == (1, False)
    assert count(staff_client, label="project=sim_*", user="bob") == (1, False)


@pytest.mark.django_db(transaction=True)
def test_the_migrations_give_existing_label_rows_their_workflows_owner_and_know_their_values():
    from django.db.migrations.executor import MigrationExecutor

    # every other app at its latest migration, so that its models' state matches the database
    after = MigrationExecutor(connection).loader.graph.leaf_nodes()
    before = [("workflows", "0022_labels_tags_policy"), *[node for node in after if node[0] != "workflows"]]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    old = executor.loader.project_state(before).apps
    pool = old.get_model("scheduler", "Pool").objects.create(name="old")
    for seq, name in enumerate(("a", "b"), start=1):
        owner = old.get_model("auth", "User").objects.create(username=name)
        workflow = old.get_model("workflows", "Workflow").objects.create(
            workflow_id=f"w-{seq}", global_id=f"w-{seq}-{name}", name="w", seq=seq, pool=pool, submitted_by=owner,
            labels={"team": name})
        old.get_model("workflows", "WorkflowLabel").objects.create(workflow=workflow, key="team", value=name)
    # when
    executor = MigrationExecutor(connection)
    executor.migrate(after)
    # then
    new = executor.loader.project_state(after).apps
    rows = set(new.get_model("workflows", "WorkflowLabel").objects.values_list("value", "submitted_by__username"))
    assert rows == {("a", "a"), ("b", "b")}
    assert set(new.get_model("workflows", "LabelValue").objects.values_list("key", "value")) == {
        ("team", "a"), ("team", "b")}


@pytest.mark.parametrize("selector", ["team", "team=", "team=(a", "team=(a)", "team=a|b", "team=((a|b)|c)",
                                      "bad key=x", "team=a b", "team=(a|b)(c|d)(e|f)(g|h)(i|j)(k|l)"])
def test_a_selector_that_does_not_parse_is_a_400_naming_label(user_client, pool, selector):
    # when
    response = user_client.get("/api/workflows/", {"label": selector})
    # then
    assert response.status_code == 400, response.json()
    body = response.json()
    assert "label" in str(body["details"])


def test_the_label_policy_refuses_keys_outside_it_and_asks_for_required_ones(user_client, pool):
    # given
    LabelPolicySetting.objects.create(allowed_keys=["project", "team", "run"], required_keys=["run"], max_labels=3)
    # when: no run label
    missing = submit(user_client)
    # and: a key outside the policy
    outside = submit(user_client, labels={"run": "r1", "owner": "me"})
    # and: one too many (the spec's two and run is three, at most 3 allowed: fine)
    fine = submit(user_client, labels={"run": "r1"})
    # then
    assert missing.status_code == 400
    assert [e["path"] for e in missing.json()["details"]["errors"]] == ["labels.run"]
    assert outside.status_code == 400
    assert "labels.owner" in [e["path"] for e in outside.json()["details"]["errors"]]
    assert fine.status_code == 201, fine.json()
    assert Workflow.objects.count() == 1


def test_the_policy_puts_only_chosen_keys_on_pods_with_its_prefix(user_client, pool):
    # given
    LabelPolicySetting.objects.create(pod_label_keys=["team"], pod_label_prefix="example.com/")
    # when
    response = submit(user_client)
    # then
    assert response.status_code == 201, response.json()
    assert Workflow.objects.get().pod_labels == {"example.com/team": "robotics"}


def test_pod_labels_reach_the_kubernetes_manifest(user_client, pool):
    # given
    from scheduler.dispatch.pod.manifest import build_manifest
    from scheduler.dispatch.pod.request import PodRequest

    LabelPolicySetting.objects.create(pod_label_keys=["project"], pod_label_prefix="wf-")
    submit(user_client)
    workflow = Workflow.objects.get()
    # when
    request = PodRequest(pod_name="p", namespace="osmo", node_name="n", pool="nvl72", workflow_id=workflow.global_id,
                         group="g", task="t", image="busybox", labels=workflow.pod_labels)
    manifest = build_manifest(request)
    # then
    assert manifest["metadata"]["labels"]["wf-project"] == "sim_alpha"
    assert "team" not in manifest["metadata"]["labels"]


def test_metric_dimensions_count_allow_listed_values_and_other(user_client, pool):
    # given
    from osmo.metrics import WORKFLOW_LABEL_SUBMISSIONS

    LabelPolicySetting.objects.create(metric_values={"team": ["robotics"]})

    def count(value):
        wanted = {"pool": "nvl72", "label": "team", "value": value}
        return sum(sample.value for metric in WORKFLOW_LABEL_SUBMISSIONS.collect() for sample in metric.samples
                   if sample.name.endswith("_total") and sample.labels == wanted)

    robotics, other = count("robotics"), count("other")
    # when
    submit(user_client, name="one")
    submit(user_client, name="two", labels={"team": "free-form-text-from-a-user"})
    # then
    assert count("robotics") == robotics + 1
    assert count("other") == other + 1


def test_restart_keeps_the_labels_and_takes_new_ones(user_client, pool):
    # given
    submit(user_client, labels={"run": "r1"})
    # when
    response = user_client.post("/api/workflows/hello-1/restart/", {"labels": {"run": "r2"}}, format="json")
    # then
    assert response.status_code == 201, response.json()
    assert response.json()["labels"] == {"project": "sim_alpha", "team": "robotics", "run": "r2"}
    bad = user_client.post("/api/workflows/hello-1/restart/", {"labels": {"run": "r 2"}}, format="json")
    assert bad.status_code == 400
    assert bad.json()["details"]["errors"][0]["path"] == "labels.run"
    assert Workflow.objects.count() == 2


def test_tags_are_listed_added_removed_shown_and_filtered(user_client, pool):
    # given
    Tag.objects.create(name="baseline", description="the reference run")
    Tag.objects.create(name="keep")
    submit(user_client, name="a")
    submit(user_client, name="b")
    # when
    tags = user_client.get("/api/tags/").json()
    added = user_client.post("/api/workflows/a-1/tag/", {"add": ["baseline", "keep"]}, format="json")
    user_client.post("/api/workflows/b-1/tag/", {"add": ["keep"]}, format="json")
    removed = user_client.post("/api/workflows/a-1/tag/", {"remove": ["keep"], "add": []}, format="json")
    # then
    assert tags["tags"] == ["baseline", "keep"]
    assert added.json() == {"workflow": "a-1", "tags": ["baseline", "keep"]}
    assert removed.json() == {"workflow": "a-1", "tags": ["baseline"]}
    assert user_client.get("/api/workflows/a-1/").json()["tags"] == ["baseline"]
    assert listed(user_client, tag="keep") == ["b-1"]
    assert listed(user_client, tag="baseline") == ["a-1"]
    assert listed(user_client, tag=["baseline", "keep"]) == []


def test_an_unknown_tag_is_a_400_naming_the_field_and_changes_nothing(user_client, pool):
    # given
    Tag.objects.create(name="keep")
    submit(user_client)
    # when
    response = user_client.post("/api/workflows/hello-1/tag/", {"add": ["keep", "nope"]}, format="json")
    # then
    assert response.status_code == 400
    assert response.json()["code"] == "tag_unknown"
    assert response.json()["details"]["errors"][0]["path"] == "add"
    assert list(Workflow.objects.get().tags.all()) == []


def test_another_users_workflow_cannot_be_tagged(user_client, other_user, pool):
    # given
    from rest_framework.test import APIClient

    Tag.objects.create(name="keep")
    submit(user_client)
    api_client = APIClient()
    api_client.force_authenticate(other_user)
    # when
    response = api_client.post("/api/workflows/hello-1/tag/?user=alice", {"add": ["keep"]}, format="json")
    # then
    assert response.status_code == 404
    assert list(Workflow.objects.get().tags.all()) == []
