"""Deeply nested JSON bodies are refused with the error envelope on every JSON endpoint, never a 500
(docs/design.md §7: no 5xx for any input)."""

from __future__ import annotations

import pytest

from scheduler.models import Node, Pool
from tests.factories import make_node, make_pool
from workflows.models import Workflow

pytestmark = pytest.mark.django_db


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.fixture
def pool():
    pool = make_pool("deep", keys=[("rack", "rack")])
    make_node(pool, "a1", {"rack": "r1"})
    return pool


ENDPOINTS = [
    ("workflows", "post", "/api/workflows/", '{{"pool": "deep", "spec": {body}}}'),
    ("workflows_body", "post", "/api/workflows/", "{body}"),
    ("pools", "post", "/api/pools/", '{{"name": "p2", "topology_keys": {body}}}'),
    ("pool_update", "patch", "/api/pools/deep/", '{{"description": {body}}}'),
    ("import", "post", "/api/pools/import/", '{{"pool": {{"name": "p3"}}, "nodes": {body}}}'),
    ("nodes", "post", "/api/pools/deep/nodes/", '{{"name": "n2", "labels": {body}}}'),
    ("node_update", "patch", "/api/pools/deep/nodes/a1/", '{{"labels": {body}}}'),
]


@pytest.mark.parametrize("depth", [990, 5000, 100_000])
@pytest.mark.parametrize(("_case", "method", "url", "template"), ENDPOINTS)
def test_deeply_nested_json_is_refused_with_the_envelope(staff_client, pool, depth, _case, method, url, template):
    """Replays the fuzzing finding: JSON nested ~990 levels or more answered 500 (RecursionError)
    on every JSON endpoint."""
    # given a body nesting arrays `depth` levels deep
    body = template.format(body=nested(depth))
    # when
    response = getattr(staff_client, method)(url, data=body, content_type="application/json")
    # then
    assert response.status_code == 400
    assert response.json() == {
        "code": "parse_error",
        "message": "JSON parse error - nested deeper than 200 levels.",
        "details": {},
    }
    assert (Workflow.objects.count(), Pool.objects.count(), Node.objects.count()) == (0, 1, 1)


@pytest.mark.parametrize("depth", [50, 199])
def test_json_within_the_nesting_limit_is_parsed(staff_client, pool, depth):
    # when a workflow spec nests lists (wrongly) but within the limit
    body = f'{{"pool": "deep", "spec": {nested(depth)}}}'
    response = staff_client.post("/api/workflows/", data=body, content_type="application/json")
    # then it reaches validation, which names the field
    assert response.status_code == 400
    assert response.json()["code"] == "validation_error"
    assert Workflow.objects.count() == 0


@pytest.mark.parametrize(("_case", "method", "url", "template"), ENDPOINTS)
def test_json_between_the_limit_and_the_recursion_limit_is_a_4xx(staff_client, pool, _case, method, url, template):
    # given a body nesting 500 levels: over the limit, but one Python's decoder still parses
    body = template.format(body=nested(500))
    # when
    response = getattr(staff_client, method)(url, data=body, content_type="application/json")
    # then it is refused with the envelope, and nothing is stored
    assert response.status_code == 400
    assert set(response.json()) == {"code", "message", "details"}
    assert (Workflow.objects.count(), Pool.objects.count(), Node.objects.count()) == (0, 1, 1)
