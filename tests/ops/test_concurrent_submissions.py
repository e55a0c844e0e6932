"""Submissions racing for one workflow name, and Idempotency-Key reuse (docs/design.md §7)."""

from __future__ import annotations

import threading
from collections import Counter

import pytest
from django.db import connection
from rest_framework.test import APIClient

from tests.factories import make_node, make_pool
from tests.pipeline.helpers import gang_spec
from workflows.models import Workflow

SPEC = gang_spec("race", 1, 1, key=None)


@pytest.fixture
def race_pool(db):
    pool = make_pool("race", keys=[("rack", "rack")])
    make_node(pool, "a1", {"rack": "r1"}, gpu=8)
    return pool


def _json(response) -> dict:
    return response.json() if response["Content-Type"] == "application/json" else {}


def _submit_in_threads(user, threads: int, each: int, body) -> list[tuple[int, dict]]:
    """``threads`` real threads, each with its own database connection, submitting ``each`` times
    through the whole request path (authentication, the request transaction, the view)."""
    results: list[tuple[int, dict]] = []
    lock = threading.Lock()
    start = threading.Barrier(threads)

    def run(index: int) -> None:
        client = APIClient(raise_request_exception=False)  # a crash is a 500 answer, as a server gives
        client.force_authenticate(user)
        try:
            start.wait()
            for n in range(each):
                response = client.post("/api/workflows/", body(index, n), format="json")
                with lock:
                    results.append((response.status_code, _json(response)))
        finally:
            connection.close()

    workers = [threading.Thread(target=run, args=(index,)) for index in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=300)
    return results


@pytest.mark.django_db(transaction=True)
def test_concurrent_submissions_of_one_name_all_succeed_with_distinct_numbers(user, race_pool):
    """Replays the fault run: 16 threads x 8 submissions of one name on PostgreSQL; 79 of 128 answered
    500 (IntegrityError on workflow_id after the retries)."""
    # when 16 threads submit the same name 8 times each
    results = _submit_in_threads(user, 16, 8, lambda index, n: {"pool": "race", "spec": SPEC})
    # then every submission is stored once, numbered race-1 .. race-128
    assert Counter(status for status, _body in results) == {201: 128}
    ids = sorted((body["id"] for _status, body in results), key=lambda value: int(value.rsplit("-", 1)[1]))
    assert ids == [f"race-{n}" for n in range(1, 129)]
    assert sorted(Workflow.objects.filter(name="race").values_list("seq", flat=True)) == list(range(1, 129))


@pytest.mark.django_db(transaction=True)
def test_concurrent_retries_with_one_idempotency_key_store_one_workflow(user, race_pool):
    # when 8 threads send the same request with the same key, twice each
    results: list[tuple[int, dict]] = []
    lock = threading.Lock()
    start = threading.Barrier(8)

    def run() -> None:
        client = APIClient(raise_request_exception=False)
        client.force_authenticate(user)
        try:
            start.wait()
            for _ in range(2):
                response = client.post("/api/workflows/", {"pool": "race", "spec": SPEC}, format="json",
                                       HTTP_IDEMPOTENCY_KEY="retry-me")
                with lock:
                    results.append((response.status_code, _json(response).get("id")))
        finally:
            connection.close()

    workers = [threading.Thread(target=run) for _ in range(8)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=300)
    # then one is created, the 15 others return it
    assert Counter(status for status, _id in results) == {201: 1, 200: 15}
    assert {workflow_id for _status, workflow_id in results} == {"race-1"}
    assert Workflow.objects.count() == 1


@pytest.mark.django_db
def test_an_idempotency_key_reused_with_another_body_is_422(user_client, race_pool):
    """Replays the fault run: a key reused with a different body silently returned the first workflow."""
    # given a workflow submitted with key k1
    first = user_client.post("/api/workflows/", {"pool": "race", "spec": SPEC}, format="json",
                             HTTP_IDEMPOTENCY_KEY="k1")
    assert first.status_code == 201
    # when the same key comes with another spec, and with another priority
    other_spec = user_client.post("/api/workflows/", {"pool": "race", "spec": gang_spec("other", 1, 1, key=None)},
                                  format="json", HTTP_IDEMPOTENCY_KEY="k1")
    other_priority = user_client.post("/api/workflows/", {"pool": "race", "spec": SPEC, "priority": "HIGH"},
                                      format="json", HTTP_IDEMPOTENCY_KEY="k1")
    same = user_client.post("/api/workflows/", {"pool": "race", "spec": SPEC}, format="json",
                            HTTP_IDEMPOTENCY_KEY="k1")
    # then both are refused naming the key, and only a true retry returns the first workflow
    expected = {
        "code": "idempotency_key_reused",
        "message": "Idempotency-Key 'k1' was already used with a different request (workflow race-1).",
        "details": {"errors": [{"path": "Idempotency-Key", "message": "already used with a different request"}],
                    "idempotency_key": "k1", "workflow_id": "race-1"},
    }
    assert (other_spec.status_code, other_spec.json()) == (422, expected)
    assert (other_priority.status_code, other_priority.json()) == (422, expected)
    assert (same.status_code, same.json()["id"]) == (200, "race-1")
    assert Workflow.objects.count() == 1


@pytest.mark.django_db
def test_a_yaml_body_retried_with_its_key_returns_the_first_workflow(user_client, race_pool):
    # given a raw YAML submission with a key
    first = user_client.post("/api/workflows/?pool=race", SPEC, content_type="application/yaml",
                             HTTP_IDEMPOTENCY_KEY="y1")
    # when it is sent again, and then with a changed spec
    again = user_client.post("/api/workflows/?pool=race", SPEC, content_type="application/yaml",
                             HTTP_IDEMPOTENCY_KEY="y1")
    changed = user_client.post("/api/workflows/?pool=race", SPEC.replace("gpu: 1", "gpu: 2"),
                               content_type="application/yaml", HTTP_IDEMPOTENCY_KEY="y1")
    # then
    assert [first.status_code, again.status_code, changed.status_code] == [201, 200, 422]
    assert again.json()["id"] == first.json()["id"]
