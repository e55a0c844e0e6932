"""Templates over the API (docs/design.md §11): values in the JSON body or as query parameters of a
raw YAML body; the rendered spec and the values are stored; GET .../spec/ returns them."""

from __future__ import annotations

import pytest

from tests.factories import EXAMPLES, make_nvl72_pool
from workflows.models import Task, Workflow

pytestmark = pytest.mark.django_db

TEMPLATE = (EXAMPLES / "templates" / "sharded-training.yaml").read_text()


@pytest.fixture
def pool():
    return make_nvl72_pool("nvl72", zones=1, spines=1, racks=2, nodes=4)


def test_json_submission_renders_and_stores_the_spec_and_values(user_client, pool):
    # when
    response = user_client.post("/api/workflows/", {"pool": "nvl72", "spec": TEMPLATE, "set": {"shards": 3, "ngpu": 2},
                                                    "set_env": {"RUN": "a b"}}, format="json")
    # then
    assert response.status_code == 201, response.json()
    workflow = Workflow.objects.get()
    assert workflow.template_values == {"shards": 3, "ngpu": 2, "image": "nvcr.io/nvidia/pytorch:24.03-py3"}
    assert "{{" not in workflow.spec_text and "shard3" in workflow.spec_text
    assert list(Task.objects.order_by("position").values_list("name", "gpu", "environment")) == [
        ("shard1", 2, {"RUN": "a b"}), ("shard2", 2, {"RUN": "a b"}), ("shard3", 2, {"RUN": "a b"})]
    spec = user_client.get("/api/workflows/sharded-training-1/spec/").json()
    assert spec == {"workflow": "sharded-training-1", "pool": "nvl72", "priority": "NORMAL",
                    "spec": workflow.spec_text, "template_values": workflow.template_values}


def test_raw_yaml_takes_values_from_the_query(user_client, pool):
    # when
    response = user_client.generic("POST", "/api/workflows/?pool=nvl72&set=shards=4&set_string=image=busybox:1",
                                   TEMPLATE, content_type="application/yaml")
    # then
    assert response.status_code == 201, response.json()
    assert Workflow.objects.get().template_values == {"shards": 4, "ngpu": 4, "image": "busybox:1"}
    assert set(Task.objects.values_list("image", flat=True)) == {"busybox:1"}


def test_raw_yaml_without_a_content_type_is_read_as_the_spec(user_client, pool):
    """The replayed report: a raw YAML body posted without Content-Type but with ?pool= answered
    "pool: required, spec: required"."""
    # when
    response = user_client.generic("POST", "/api/workflows/?pool=nvl72&set=shards=1", TEMPLATE, content_type="")
    form = user_client.generic("POST", "/api/workflows/?pool=nvl72", TEMPLATE,
                               content_type="application/x-www-form-urlencoded")
    # then
    assert response.status_code == 201, response.json()
    assert form.status_code == 201, form.json()
    assert [w.template_values["shards"] for w in Workflow.objects.order_by("pk")] == [1, 2]


def test_raw_yaml_without_a_content_type_or_pool_says_how_to_send_it(user_client, pool):
    # when: no ?pool= and no content type: nothing says the body is a spec
    response = user_client.generic("POST", "/api/workflows/", TEMPLATE, content_type="")

    # then: a precise 415, not DRF's bare one
    assert response.status_code == 415
    body = response.json()
    assert body["code"] == "unsupported_media_type"
    assert body["message"] == (
        'Unsupported media type "". Send JSON ({"pool": ..., "spec": ...}), or the raw YAML spec with '
        "?pool=<pool> in the URL (Content-Type: application/yaml, or none)."
    )
    assert Workflow.objects.count() == 0


@pytest.mark.parametrize("content_type", ["", "application/yaml"], ids=["_case_no_type", "_case_yaml"])
def test_raw_yaml_with_an_invalid_priority_lists_the_choices(user_client, pool, content_type):
    # when
    response = user_client.generic("POST", "/api/workflows/?pool=nvl72&priority=URGENT", TEMPLATE,
                                   content_type=content_type)

    # then
    assert response.status_code == 400
    assert response.json()["details"]["errors"] == [
        {"path": "priority", "message": '"URGENT" is not a priority; choose one of LOW, NORMAL, HIGH.'}]


def test_dry_run_returns_the_rendered_spec_and_stores_nothing(user_client, pool):
    # when
    body = user_client.post("/api/workflows/", {"pool": "nvl72", "spec": TEMPLATE, "set": {"shards": 1},
                                                "dry_run": True}, format="json").json()
    # then
    assert body["template_values"] == {"shards": 1, "ngpu": 4, "image": "nvcr.io/nvidia/pytorch:24.03-py3"}
    assert "- name: shard1\n" in body["spec"] and "shard2" not in body["spec"]
    assert body["groups"][0]["placement"]["status"] == "placed"
    assert Workflow.objects.count() == 0


def test_template_error_names_its_line_and_stores_nothing(user_client, pool):
    # when
    spec = TEMPLATE.replace("gpu: {{ ngpu }}", "gpu: {{ ngpus }}")
    response = user_client.post("/api/workflows/", {"pool": "nvl72", "spec": spec}, format="json")
    # then
    assert response.status_code == 400
    assert response.json()["details"]["errors"] == [{"path": "template", "message": "line 23: 'ngpus' is undefined"}]
    assert Workflow.objects.count() == 0


def test_invalid_priority_lists_the_choices(user_client, pool):
    # when
    response = user_client.post("/api/workflows/", {"pool": "nvl72", "spec": TEMPLATE, "priority": "URGENT"},
                                format="json")
    # then
    assert response.status_code == 400
    assert response.json()["details"]["errors"] == [
        {"path": "priority", "message": '"URGENT" is not a priority; choose one of LOW, NORMAL, HIGH.'}]


RAW_TEMPLATE = """\
default-values:
  greeting: hello
workflow:
  name: rawtest
  tasks:
  - name: t
    image: busybox
    command: [sh, -c, "echo {{ greeting }} '{% raw %}{{ .State }}{% endraw %}' > {{output}}/a"]
"""


def test_restart_submits_the_stored_spec_as_rendered_with_its_values(user_client, pool):
    # given: a template whose rendering keeps text that looks like Jinja ({% raw %}: a Go template
    # of docker inspect), submitted with a value
    first = user_client.post("/api/workflows/", {"pool": "nvl72", "spec": RAW_TEMPLATE, "set": {"greeting": "hi"},
                                                 "priority": "HIGH"}, format="json")
    assert first.status_code == 201, first.json()
    # when: it is restarted, as is and in another pool
    make_nvl72_pool("other", zones=1, spines=1, racks=1, nodes=2)
    again = user_client.post("/api/workflows/rawtest-1/restart/", {}, format="json")
    moved = user_client.post("/api/workflows/rawtest-1/restart/", {"pool": "other"}, format="json")
    missing = user_client.post("/api/workflows/nope-1/restart/", {}, format="json")
    # then: not rendered a second time (which said "'State' is undefined"), and its values kept
    assert again.status_code == 201, again.json()
    assert (again.json()["id"], again.json()["pool"], again.json()["priority"]) == ("rawtest-2", "nvl72", "HIGH")
    assert moved.status_code == 201, moved.json()
    assert (moved.json()["id"], moved.json()["pool"]) == ("rawtest-3", "other")
    stored = {w.workflow_id: (w.spec_text, w.template_values) for w in Workflow.objects.all()}
    assert stored["rawtest-2"] == stored["rawtest-1"] == stored["rawtest-3"]
    assert "echo hi '{{ .State }}' > {{output}}/a" in stored["rawtest-1"][0]
    assert stored["rawtest-1"][1] == {"greeting": "hi"}
    assert (missing.status_code, missing.json()["code"]) == (404, "not_found")
    assert Workflow.objects.count() == 3
