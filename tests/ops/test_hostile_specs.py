"""What a hostile spec may cost one web process (docs/spec.md, "Limits"; docs/design.md §7: refused
with the envelope before the work, nothing stored)."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from parsing.errors import PathError
from tests.factories import make_node, make_pool
from tests.pipeline.helpers import gang_spec
from workflows.models import Task, Workflow
from workflows.scheduling.cycle import placement_cycle_run
from workflows.services import workflow_submit

pytestmark = pytest.mark.django_db


@pytest.fixture
def pool():
    pool = make_pool("hostile", keys=[("rack", "rack")])
    make_node(pool, "a1", {"rack": "r1"})
    return pool


def test_a_megabyte_of_tiny_yaml_values_is_refused_while_it_is_composed(user_client, pool):
    """Replays the attack run's finding: 1 MiB of ``[1,1,...`` (520,000 values) was composed whole by the
    pure-Python loader, 12 s of CPU and ~300 MB, before the walk after loading refused it."""
    # given: past the limit by a tenth (the replayed text had five times as many)
    spec = "workflow:\n  name: flat\n  junk: [" + ",".join(["1"] * 110_000) + "]\n"

    # when
    response = user_client.post("/api/workflows/?pool=hostile", spec, content_type="application/yaml")

    # then: refused at the 100,001st node, the 99,994th value (column 10 + 2 x 99,993)
    assert response.status_code == 400
    assert response.json() == {"code": "spec_invalid", "message": "Workflow spec is invalid.", "details": {"errors": [
        {"path": "", "message": "too many YAML nodes (more than 100000, keys included) at line 3, column 199996"}]}}
    assert Workflow.objects.count() == 0


def test_tens_of_thousands_of_errors_are_sorted_by_one_key_each(user_client, pool, monkeypatch):
    """Replays the attack run's finding: 20,000 resources with a negative gpu gave 20,000 errors, sorted
    through ``PathError.__lt__``, which built both sides' natural keys at every comparison (8 s of the
    10 s the answer took for 46,000)."""
    # given
    spec = "workflow:\n  name: many\n  tasks:\n  - {name: t0, image: x, command: [a]}\n  resources:\n" + "".join(
        f"    r{index}: {{gpu: -1}}\n" for index in range(20_000))
    keys: list[int] = []
    sort_key = PathError.sort_key
    monkeypatch.setattr(PathError, "sort_key", lambda error: keys.append(1) or sort_key(error))

    # when
    response = user_client.post("/api/workflows/?pool=hostile&dry_run=true", spec, content_type="application/yaml")

    # then: one key per error, in natural order
    errors = response.json()["details"]["errors"]
    assert response.status_code == 400
    assert len(errors) == 20_000
    assert len(keys) == 20_000
    assert [error["path"] for error in errors[:3]] == ["workflow.resources.r0.gpu", "workflow.resources.r1.gpu",
                                                        "workflow.resources.r2.gpu"]
    assert errors[-1]["path"] == "workflow.resources.r19999.gpu"
    assert Workflow.objects.count() == 0


def test_set_env_that_would_grow_the_spec_past_its_size_is_refused_and_nothing_stored(user_client, pool):
    """Replays the attack run's finding: ``set_env`` of 1 MB on a spec of 100 tasks answered 400 after 40 s
    of CPU (the spec dumped at 100 MB, then refused for its size)."""
    # given: 250 variables of 4,000 characters (~1 MB) on 3 tasks
    rows = "".join(f"  - {{name: t{index}, image: busybox, command: ['true']}}\n" for index in range(3))
    body = {"pool": "hostile", "spec": f"workflow:\n  name: env\n  tasks:\n{rows}",
            "set_env": {f"V{index}": "x" * 4000 for index in range(250)}}

    # when
    response = user_client.post("/api/workflows/", body, format="json")

    # then
    per_task = sum(len(f"V{index}") + 4003 for index in range(250))
    assert response.status_code == 400
    assert response.json()["details"]["errors"] == [
        {"path": "set_env", "message": f"250 environment variables of {per_task} bytes on each of 3 tasks make the "
                                       "spec larger than 1048576 bytes"}]
    assert Workflow.objects.count() == 0


def _three_dispatched_tasks(user):
    """A workflow of one group of three tasks, placed and dispatched half a minute ago."""
    pool = make_pool("sim", keys=[("rack", "rack")])
    for name in ("n1", "n2", "n3"):
        make_node(pool, name, {"rack": "r1"}, gpu=4)
    workflow, _ = workflow_submit(user=user, pool_name="sim", spec=gang_spec("wide", 3, 4))
    placement_cycle_run(pool_id=pool.pk)
    Task.objects.filter(workflow=workflow).update(dispatched_at=timezone.now() - timedelta(seconds=30))
    return workflow


@pytest.mark.parametrize("what", ["logs/", "logs/?task=t1", "events/"], ids=["_case_logs", "_case_task_log",
                                                                          "_case_events"])
def test_logs_and_events_read_the_stored_spec_once(user, user_client, what):
    """Replays the attack run's finding: on a workflow of 1,000 tasks with a 1 MB spec, one task's log took
    3.4 s of CPU and grew the web process by 840 MB: the tasks' query joined the workflow, copying its
    stored spec into every task's row (events: 1.7 s)."""
    # given three dispatched tasks
    workflow = _three_dispatched_tasks(user)

    # when
    with CaptureQueriesContext(connection) as queries:
        response = user_client.get(f"/api/workflows/{workflow.workflow_id}/{what}")

    # then: the spec comes with the workflow's own row only
    assert response.status_code == 200, response.json()
    assert sum("spec_text" in query["sql"] for query in queries.captured_queries) == 1


@pytest.mark.parametrize("what", ["logs/", "logs/?task=t1", "events/", ""],
                         ids=["_case_logs", "_case_task_log", "_case_events", "_case_detail"])
def test_logs_events_and_detail_do_not_copy_the_groups_json_into_every_row(user, user_client, what):
    """A finding of the review: the tasks' (and the transitions') query joined the group, copying its
    constraint tree and per-task requests (34 KB for a group of 1,000 tasks) into every row: one task's
    log of such a workflow took 6.1 s (0.5 s without), its events 10.6 s (0.4 s), the workflow 4 s (0.3 s)."""
    # given three dispatched tasks of one group
    workflow = _three_dispatched_tasks(user)

    # when
    with CaptureQueriesContext(connection) as queries:
        response = user_client.get(f"/api/workflows/{workflow.workflow_id}/{what}")

    # then: no query of tasks or transitions reads the group's JSON columns
    assert response.status_code == 200, response.json()
    copies = [query["sql"] for query in queries.captured_queries
              if re.search(r'FROM "workflows_(task|statustransition)" ', query["sql"])
              and re.search(r'"workflows_taskgroup"\."(constraint_tree|task_requests|placement_report)"', query["sql"])]
    assert copies == []


def _regex_spec(field: str, regex: str) -> str:
    item = "inputs:\n    - url: s3://bucket/data" if field == "inputs" else "outputs:\n    - url: s3://bucket/out"
    return (f"workflow:\n  name: rx\n  tasks:\n  - name: t0\n    image: busybox\n    command: [a]\n    {item}\n"
            f"      regex: '{regex}'\n")


@pytest.mark.parametrize(
    ("regex", "message"),
    [("(" * 5000 + ")" * 5000, "it nests groups too deeply"),
     ("a{99999999999}", "the repetition number is too large")],
    ids=["_case_nested_groups", "_case_repeat_count"],
)
@pytest.mark.parametrize("field", ["inputs", "outputs"])
def test_a_regex_python_cannot_compile_is_refused_at_its_path(user_client, pool, field, regex, message):
    """Replays the attack run's findings: ``regex: a{99999999999}`` answered 500 (OverflowError escaped
    ``re.compile``), and 5,000 nested groups 400 "JSON parse error - nested deeper than 200 levels"
    for a YAML body (a RecursionError caught as a deep body), 500 on the submit page."""
    # when
    response = user_client.post("/api/workflows/?pool=hostile", _regex_spec(field, regex),
                                content_type="application/yaml")

    # then
    assert response.status_code == 400
    assert response.json()["details"]["errors"] == [
        {"path": f"workflow.tasks[0].{field}[0].regex", "message": f"regex {regex[:80]!r} does not compile: {message}"}]
    assert Workflow.objects.count() == 0


def test_a_dry_run_of_many_waiting_groups_reads_their_holders_at_once(user, user_client):
    """Replays the attack run's finding: a dry run of 1,000 one-task groups, each waiting for a gpu-clique
    another workflow held, ran 2 queries per group (2,013) and took 2.7 s of CPU."""
    # given both cliques held whole by "hog"
    pool = make_pool("cliques", keys=[("gpu-clique", "clique")])
    for clique in ("c1", "c2"):
        for node in range(1, 5):
            make_node(pool, f"{clique}-n{node}", {"clique": clique}, gpu=8)
    workflow_submit(user=user, pool_name=pool.name, spec=gang_spec("hog", 8, 8, key=None))
    placement_cycle_run(pool_id=pool.pk)
    counts = {}
    for groups in (2, 40):
        rows = "".join(f"  - {{name: t{index}, image: busybox, command: ['true']}}\n" for index in range(groups))
        spec = (f"workflow:\n  name: waiters\n  tasks:\n{rows}"
                "resources:\n  default: {gpu: 8, topology: [{key: gpu-clique}]}\n")

        # when
        with CaptureQueriesContext(connection) as queries:
            response = user_client.post("/api/workflows/", {"pool": "cliques", "spec": spec, "dry_run": True},
                                        format="json")
        counts[groups] = len(queries.captured_queries)

        # then every group names the holder
        assert response.status_code == 200, response.json()
        assert {tuple(group["waiting_lines"]) for group in response.json()["groups"]} == {(
            "No gpu-clique has room for any of these tasks now; the gpu-cliques are held by: hog-1 (64 GPUs, 8 tasks).",
            "It can start when enough of these finish (or a gang ahead of it is placed elsewhere).")}
    assert counts[40] == counts[2]
