"""A user may have at most OSMO_MAX_ACTIVE_WORKFLOWS_PER_USER workflows that have not ended (docs/design.md
§7, "Hostile input costs little"): past it a submission answers 429, nothing stored, until some end."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from tests.factories import make_nvl72_pool
from workflows.models import Workflow

pytestmark = pytest.mark.django_db

SPEC = """
workflow:
  name: hello
  tasks:
  - {name: train, image: busybox, command: [sh, -c, "echo hi"]}
resources:
  default: {gpu: 1}
"""


@pytest.fixture
def limited(settings):
    settings.OSMO_MAX_ACTIVE_WORKFLOWS_PER_USER = 2
    return make_nvl72_pool("nvl72", zones=1, spines=1, racks=1, nodes=4)


def _submit(client: APIClient, **extra):
    return client.post("/api/workflows/", {"pool": "nvl72", "spec": SPEC, **extra}, format="json")


def test_a_submission_past_the_limit_answers_429_and_stores_nothing(user_client, limited):
    # given two workflows that have not ended
    assert [_submit(user_client).status_code for _ in range(2)] == [201, 201]

    # when a third is submitted
    response = _submit(user_client)

    # then it is refused, saying the limit, and nothing is stored
    assert response.status_code == 429
    body = response.json()
    assert body["code"] == "active_workflow_limit"
    assert body["details"] == {"limit": 2}
    assert body["message"].startswith("Your workflows that have not ended are at the limit of 2 per user; ")
    assert Workflow.objects.count() == 2


def test_the_limit_is_each_users_and_frees_as_workflows_end(user_client, other_user, limited):
    # given a user at the limit
    first, _second = (_submit(user_client).json()["id"] for _ in range(2))
    other = APIClient()
    other.force_authenticate(other_user)

    # when another user submits, and the first user cancels one and submits again
    others = _submit(other)
    cancelled = user_client.post(f"/api/workflows/{first}/cancel/")
    again = _submit(user_client)

    # then the other user was not limited by the first, and the ended workflow no longer counts
    assert others.status_code == 201, others.json()
    assert cancelled.status_code == 200, cancelled.json()
    assert again.status_code == 201, again.json()
    assert Workflow.objects.filter(submitted_by__username="alice").count() == 3


def test_a_dry_run_and_a_replayed_submission_are_answered_at_the_limit(user_client, limited):
    # given a user at the limit, the first submission sent with an Idempotency-Key
    first = user_client.post("/api/workflows/", {"pool": "nvl72", "spec": SPEC}, format="json",
                             HTTP_IDEMPOTENCY_KEY="k-1")
    _submit(user_client)

    # when the same request is sent again, and a dry run
    replay = user_client.post("/api/workflows/", {"pool": "nvl72", "spec": SPEC}, format="json",
                              HTTP_IDEMPOTENCY_KEY="k-1")
    dry = _submit(user_client, dry_run=True)

    # then the replay answers the stored workflow and the dry run is still answered
    assert replay.status_code == 200, replay.json()
    assert replay.json()["id"] == first.json()["id"]
    assert dry.status_code == 200, dry.json()
    assert Workflow.objects.count() == 2


def test_zero_means_no_limit(user_client, limited, settings):
    # given no limit
    settings.OSMO_MAX_ACTIVE_WORKFLOWS_PER_USER = 0

    # when three are submitted
    codes = [_submit(user_client).status_code for _ in range(3)]

    # then
    assert codes == [201, 201, 201]


def test_the_limit_query_names_the_statuses_that_have_not_ended(user_client, limited):
    """Workflows are kept once ended: a query excluding the ended statuses cannot use the index's status
    and read every workflow the user ever had at each submission (a sequential scan, 41 ms of a 55 ms
    submission at 300,000 ended; 0.05 ms naming PENDING and RUNNING, an index range)."""
    # given
    _submit(user_client)

    # when a submission's limit query is read
    with CaptureQueriesContext(connection) as queries:
        assert _submit(user_client).status_code == 201
    [limit_query] = [query["sql"] for query in queries.captured_queries if "OFFSET 1" in query["sql"]]

    # then it asks for the statuses that have not ended, by the owner
    assert '"status" IN (\'PENDING\', \'RUNNING\')' in limit_query
    assert "NOT" not in limit_query
