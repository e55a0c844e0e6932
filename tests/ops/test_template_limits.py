"""Spec templates render in a child process bounded by the operating system (docs/spec.md,
"Templates"): what the sandbox's own checks let through is stopped by the memory or CPU limit, the
submission is refused with 400 naming the limit, and the web process's memory does not grow.

Each case replays a finding of the attack run: these templates answered 200 after 8-39 s with the
web worker growing by up to 880 MB."""

from __future__ import annotations

import resource
import time

import pytest
from django.test import override_settings

from tests.factories import make_node, make_pool
from workflows.models import Workflow

pytestmark = pytest.mark.django_db

# Generous wall-clock limit: a refusal that names memory or CPU was stopped by the kernel's limit,
# not by the wall clock, however loaded the machine is.
LIMITS = {"OSMO_TEMPLATE_MAX_MEMORY_MB": 256, "OSMO_TEMPLATE_MAX_CPU_SECONDS": 2,
          "OSMO_TEMPLATE_MAX_WALL_SECONDS": 120.0}
MEMORY = "the template's rendering needs more memory than its limit (256 MiB)"
CPU = "the template's rendering used more CPU time than its limit (2 s)"
SQUARINGS = "{% set a = 3**1000 %}" + "{% set a = a*a %}" * 24 + "{{ a > 0 }}"


def spec(expression: str) -> str:
    return ("workflow:\n  name: bomb\n  groups:\n  - name: g\n    tasks:\n"
            f"    - {{name: t0, lead: true, image: busybox, command: [true], environment: {{X: '{expression}'}}}}\n"
            "resources:\n  default: {gpu: 1}\n")


@pytest.fixture
def pool():
    pool = make_pool("tpl", keys=[("rack", "rack")])
    make_node(pool, "a1", {"rack": "r1"}, gpu=4)
    return pool


def _maxrss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@pytest.mark.parametrize(("expression", "expected"), [
    ("{{ ([[0]*1000000]*100)|tojson|length }}", {MEMORY, CPU}),
    ("{{ ([[0]*1000000]*300)|string|length }}", {MEMORY, CPU}),
    ("{{ ([[0]*1000000]*100)|sum(start=[])|length }}", {MEMORY}),
    (SQUARINGS, {CPU}),
], ids=["tojson", "string", "sum", "squarings"])
def test_a_template_past_the_process_limits_is_refused(user_client, pool, expression, expected):
    # given the web process's peak memory before
    before = _maxrss_mb()
    # when a template that the sandbox's checks let through is submitted
    with override_settings(**LIMITS):
        started = time.monotonic()
        response = user_client.post("/api/workflows/", {"pool": "tpl", "spec": spec(expression)}, format="json")
        elapsed = time.monotonic() - started
    # then it is refused with 400 naming the limit the kernel enforced (not the wall clock)
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "spec_invalid"
    [error] = body["details"]["errors"]
    assert error["path"] == "template"
    assert error["message"] in expected
    assert elapsed < LIMITS["OSMO_TEMPLATE_MAX_WALL_SECONDS"]
    print(f"refused in {elapsed:.2f} s: {error['message']}")
    # and the web process's own memory stayed where it was (the child's allocations are not ours)
    assert _maxrss_mb() - before < 64
    assert Workflow.objects.count() == 0


def test_a_template_past_the_wall_clock_is_refused(user_client, pool):
    # given a wall-clock limit shorter than the CPU limit (a rendering that waits, or a loaded machine)
    limits = {**LIMITS, "OSMO_TEMPLATE_MAX_CPU_SECONDS": 60, "OSMO_TEMPLATE_MAX_WALL_SECONDS": 0.5}
    # when
    with override_settings(**limits):
        response = user_client.post("/api/workflows/", {"pool": "tpl", "spec": spec(SQUARINGS)}, format="json")
    # then
    assert response.status_code == 400
    [error] = response.json()["details"]["errors"]
    assert error == {"path": "template",
                     "message": "the template's rendering took longer than its time limit (0.5 s)"}
    assert Workflow.objects.count() == 0


def test_the_default_cpu_limit_refuses_a_hostile_template_after_two_seconds(user_client, pool):
    """docs/spec.md "Templates": legitimate templates render in milliseconds, so the default CPU limit
    is 2 s; a hostile template used to hold a rendering child for 5 s of CPU before its refusal."""
    # when the big-integer squarings are submitted under the default limits (no override)
    response = user_client.post("/api/workflows/", {"pool": "tpl", "spec": spec(SQUARINGS)}, format="json")
    # then the kernel's CPU limit of 2 s refused it
    assert response.status_code == 400
    assert response.json()["details"]["errors"] == [{"path": "template", "message": CPU}]
    assert Workflow.objects.count() == 0


def test_a_template_within_the_limits_renders_in_its_process(user_client, pool):
    # when an ordinary template is submitted under the limits
    with override_settings(**LIMITS):
        response = user_client.post("/api/workflows/", {"pool": "tpl", "spec": spec("{{ 6 * 7 }}"), "set": {}},
                                    format="json")
    # then it is rendered and stored
    assert response.status_code == 201
    workflow = Workflow.objects.get()
    assert "X: '42'" in workflow.spec_text
