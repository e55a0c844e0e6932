"""Regressions found by fuzzing POST /api/workflows/ (schemathesis and hand-made odd specs).

Each input used to reach the database or an error message unchecked and end in a 500 on PostgreSQL
(or on any database for the huge integer); now it is a 400 whose ``details.errors`` names the place,
the same for a dry run, and nothing is stored.
"""

from __future__ import annotations

import json

import pytest

from tests.factories import make_nvl72_pool
from workflows.models import Task, Workflow

pytestmark = pytest.mark.django_db


@pytest.fixture
def pool():
    return make_nvl72_pool("nvl72", zones=1, spines=1, racks=1, nodes=2)


def spec(**task_fields) -> dict:
    task = {"name": "train", "image": "busybox", "command": ["sh"], **task_fields}
    return {"workflow": {"name": "fuzz", "tasks": [task]}, "resources": {"default": {"gpu": 1}}}


def submit(client, body, **extra):
    # json.dumps escapes lone surrogates (\\ud800); the test client's own JSON encoder cannot send them
    return client.post("/api/workflows/", json.dumps(body), content_type="application/json", **extra)


def assert_invalid(response, code: str, path: str) -> None:
    assert response.status_code == 400, response.content[:500]
    body = response.json()
    assert set(body) == {"code", "message", "details"}
    assert body["code"] == code
    assert path in [error["path"] for error in body["details"]["errors"]], body


UNSTORABLE = {
    "image NUL": (spec(image="busy\x00box"), "workflow.tasks[0].image"),
    "command NUL": (spec(command=["sh\x00"]), "workflow.tasks[0].command[0]"),
    "environment value NUL": (spec(environment={"A": "\x00"}), "workflow.tasks[0].environment.A"),
    "environment name NUL": (spec(environment={"A\x00": "x"}), 'workflow.tasks[0].environment["A\\u0000"]'),
    "image lone surrogate": (spec(image="\ud800"), "workflow.tasks[0].image"),
    "label NUL": (
        {**spec(), "workflow": {**spec()["workflow"], "labels": {"team": "a\x00"}}},
        "workflow.labels.team",
    ),
    "nodesExcluded NUL": (
        {**spec(), "resources": {"default": {"gpu": 1, "nodesExcluded": ["n\x00"]}}},
        "resources.default.nodesExcluded[0]",
    ),
    "YAML text with a \\0 escape": (
        'workflow: {name: fuzz, tasks: [{name: train, image: "a\\0b", command: [sh]}]}\n'
        "resources: {default: {gpu: 1}}\n",
        "workflow.tasks[0].image",
    ),
    "YAML text with a lone surrogate escape": (
        'workflow: {name: fuzz, labels: {a: "\\ud800"}, tasks: [{name: train, image: a, command: [sh]}]}\n'
        "resources: {default: {gpu: 1}}\n",
        "workflow.labels.a",
    ),
}


@pytest.mark.parametrize("dry_run", [False, True], ids=["submit", "dry_run"])
@pytest.mark.parametrize("case", list(UNSTORABLE), ids=list(UNSTORABLE))
def test_nul_and_lone_surrogates_in_spec_text_get_400(user_client, pool, case, dry_run):
    # given a spec whose text PostgreSQL cannot store (NUL) or UTF-8 cannot encode (lone surrogate)
    document, path = UNSTORABLE[case]
    # when it is submitted
    response = submit(user_client, {"pool": "nvl72", "spec": document, "dry_run": dry_run})
    # then a 400 names the value and nothing is stored
    assert_invalid(response, "spec_invalid", path)
    assert Workflow.objects.count() == 0 and Task.objects.count() == 0


@pytest.mark.parametrize("dry_run", [False, True], ids=["submit", "dry_run"])
def test_image_longer_than_its_column_gets_400(user_client, pool, dry_run):
    response = submit(user_client, {"pool": "nvl72", "spec": spec(image="r/" + "x" * 600), "dry_run": dry_run})

    assert_invalid(response, "spec_invalid", "workflow.tasks[0].image")
    assert Workflow.objects.count() == 0


def test_image_as_long_as_its_column_is_accepted(user_client, pool):
    response = submit(user_client, {"pool": "nvl72", "spec": spec(image="x" * 512)})

    assert response.status_code == 201, response.json()
    assert Task.objects.get().image == "x" * 512


@pytest.mark.parametrize(
    "text, path",
    [
        # 0x + 5000 hex digits: more than the 4300 decimal digits Python agrees to format in a message
        ("resources: {default: {gpu: 0x" + "f" * 5000 + "}}\nworkflow: {name: fuzz}\n", "resources.default.gpu"),
        ("version: 0o" + "7" * 6000 + "\nworkflow: {name: fuzz}\n", "version"),
    ],
    ids=["quantity", "version"],
)
def test_yaml_integer_too_large_to_format_gets_400(user_client, pool, text, path):
    # as a raw YAML body and as the spec string of a JSON body
    raw = user_client.post("/api/workflows/?pool=nvl72", text, content_type="application/yaml")
    as_json = submit(user_client, {"pool": "nvl72", "spec": text, "dry_run": True})

    assert_invalid(raw, "spec_invalid", path)
    assert_invalid(as_json, "spec_invalid", path)
    assert Workflow.objects.count() == 0


@pytest.mark.parametrize("key, message", [("k" * 256, "at most 255"), ("a\x00b", "control"), ("a\tb", "control")],
                         ids=["too long", "NUL", "tab"])
def test_bad_idempotency_key_gets_400(user_client, pool, key, message):
    response = submit(user_client, {"pool": "nvl72", "spec": spec()}, HTTP_IDEMPOTENCY_KEY=key)

    assert_invalid(response, "validation_error", "Idempotency-Key")
    assert message in response.json()["details"]["errors"][0]["message"]
    assert Workflow.objects.count() == 0


def test_idempotency_key_of_255_characters_still_works(user_client, pool):
    first = submit(user_client, {"pool": "nvl72", "spec": spec()}, HTTP_IDEMPOTENCY_KEY="k" * 255)
    again = submit(user_client, {"pool": "nvl72", "spec": spec()}, HTTP_IDEMPOTENCY_KEY="k" * 255)

    assert (first.status_code, again.status_code) == (201, 200)
    assert first.json()["id"] == again.json()["id"]


def test_json_body_over_the_upload_limit_gets_413_envelope(user_client, pool, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10_000
    response = submit(user_client, {"pool": "nvl72", "spec": spec(args=["x" * 20_000])})

    assert response.status_code == 413
    assert response.json() == {
        "code": "request_too_large",
        "message": "The request body is too large.",
        "details": {"max_bytes": 10_000},
    }
    assert Workflow.objects.count() == 0


@pytest.mark.parametrize("method, url", [("get", "/api/workflows/a%00b/"), ("post", "/api/workflows/a%00b/cancel/")])
def test_nul_in_workflow_id_is_404(user_client, pool, method, url):
    response = getattr(user_client, method)(url)

    assert response.status_code == 404
    assert response.json()["code"] == "not_found"


def test_nul_in_url_still_needs_credentials(api_client, pool):
    assert api_client.get("/api/workflows/a%00b/").status_code == 401


def test_unknown_api_url_gets_404_envelope(user_client):
    response = user_client.get("/api/nothing-here/")
    assert response.status_code == 404
    assert response.json() == {"code": "not_found", "message": "No API endpoint at /api/nothing-here/.", "details": {}}


def test_yaml_body_that_is_not_utf8_gets_400(user_client):
    make_nvl72_pool("nvl72", zones=1, spines=1, racks=1, nodes=2)
    response = user_client.generic("POST", "/api/workflows/?pool=nvl72", b"workflow:\n  name: \xff\xfe\n",
                                   content_type="application/yaml")
    assert response.status_code == 400
    assert response.json()["code"] == "parse_error"
    assert "not valid UTF-8" in response.json()["message"]
