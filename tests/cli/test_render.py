"""Pure parts of the CLI: no server needed."""

from __future__ import annotations

import subprocess
import sys

import pytest

from cli import render
from parsing.yamlpos import line_of, lines_of, path_segments
from tests.factories import EXAMPLES, SEED_EXAMPLES

SERVER_PACKAGES = ("django", "rest_framework", "celery", "workflows", "scheduler", "osmo")


def test_the_cli_imports_no_server_package():
    code = (
        "import sys, cli.main\n"
        f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {SERVER_PACKAGES!r})\n"
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == ""


@pytest.mark.parametrize("name", SEED_EXAMPLES)
def test_tree_outline_matches_the_servers(name):
    """The CLI draws trees from their JSON exactly as the server's tree_to_outline does."""
    from workflows.spec import PoolContext, parse_workflow, tree_to_json, tree_to_outline

    pool = PoolContext(name="nvl72", keys=("zone", "spine", "rack", "gpu-clique"),
                       node_capacities=((4, 144_000, 960 * 2**30, 4 * 2**40),))
    spec = parse_workflow((EXAMPLES / f"{name}.yaml").read_text(), pool=pool)
    for group in spec.groups:
        assert render.tree_outline(tree_to_json(group.tree)) == tree_to_outline(group.tree).splitlines()


def test_paths_and_lines():
    assert path_segments('workflow.resources["a.b"].topology[1].key') == ["workflow", "resources", "a.b",
                                                                         "topology", 1, "key"]
    text = "workflow:\n  name: x\n  groups:\n  - name: g\n    tasks:\n    - name: t\n"
    assert line_of(text, "workflow.groups[0].tasks[0].name") == 6
    assert line_of(text, "workflow.groups[0].tasks[0].image") == 6  # missing key: its parent's line
    assert line_of(text, "workflow.resources.r.gpu") is None
    assert line_of("{not: [yaml", "workflow") is None


def test_line_of_a_template_reads_its_expressions_as_words():
    # given: expressions YAML cannot read before rendering (a flow mapping followed by text)
    text = "workflow:\n  name: {{ name }}\n  tasks:\n  - name: t\n    outputs:\n    - url: {{ bucket }}/o/{{output}}\n"
    looped = "workflow:\n  tasks:\n{% for i in range(2) %}\n  - name: t{{ i }}\n{% endfor %}\n"
    # when / then: the lines of the file; a template with block tags is not guessed at
    assert line_of(text, "workflow.tasks[0].outputs[0].url") == 6
    assert line_of(text, "workflow.name") == 2
    assert line_of(looped, "workflow.tasks[1].name") is None


def test_units_and_durations():
    assert render.fmt_bytes(960 * 2**30) == "960Gi"
    assert render.fmt_bytes(1536 * 2**20) == "1.5Gi"
    assert render.fmt_cpu(500) == "0.5"
    assert render.fmt_duration(75) == "1m15s"
    assert render.reason_message({"status": "unschedulable", "message": "no room"}) == "unschedulable: no room"


def test_a_waiting_reason_is_not_said_waiting_twice():
    # given: a group that waits for its pool (status "waiting"), and one that cannot be placed now
    offline = {"status": "waiting", "code": "pool_not_online", "message": "pool demo is OFFLINE"}
    busy = {"status": "unschedulable", "message": "no room"}
    group = {"name": "g", "status": "SCHEDULING", "unschedulable_reason": offline, "tasks": [],
             "constraint_tree": {"group": "g", "keys": [], "tasks": ["t"], "children": []}}
    # when
    texts = [render.waiting_reason(offline), render.waiting_reason(busy)]
    lines = render.workflow_lines({"id": "w-1", "status": "PENDING", "groups": [group], "history": []})
    # then: "group g waiting: waiting: pool demo is OFFLINE" before
    assert texts == ["pool demo is OFFLINE", "unschedulable: no room"]
    assert "  waiting: pool demo is OFFLINE" in lines


def test_tree_outline_lists_tasks_in_natural_order():
    """A tree stored before its tasks were kept in natural order still reads ``t2`` before ``t10``."""
    # given a tree as an older server stored it (plain string order)
    tree = {"group": "g", "keys": ["rack"], "tasks": ["u1", "u10", "u2"],
            "children": [{"key": "rack", "group": "r", "path": [["rack", "r"]], "requirement": "required",
                          "tasks": ["t1", "t10", "t11", "t2"], "children": []}]}
    # when
    lines = render.tree_outline(tree)
    # then
    assert lines == ["g", "├─ (no topology): u1, u2, u10", "└─ rack=r (required): t1, t2, t10, t11"]


def test_dry_run_lines_name_what_holds_the_capacity():
    # given a dry run's answer whose group cannot be placed now
    answer = {"workflow": "w", "pool": "p", "groups": [{
        "name": "g", "constraint_outline": "g", "placement": {"status": "unschedulable", "message": "fits 0 of 4"},
        "waiting_lines": ["No gpu-clique has room for any of these tasks now; the gpu-cliques are held by: hog-1 "
                          "(64 GPUs, 8 tasks)."]}]}
    # when
    lines = render.dry_run_lines(answer, pool="p")
    # then
    assert lines[-3:] == ["  Placement preview: unschedulable", "    fits 0 of 4",
                          "    No gpu-clique has room for any of these tasks now; the gpu-cliques are held by: "
                          "hog-1 (64 GPUs, 8 tasks)."]


def test_lines_of_many_paths_composes_the_text_once_and_answers_as_line_of(monkeypatch):
    """A templated spec of 1,000 tasks has 1,000 errors: one composition per error took 0.3 s each on
    100 KB (five minutes of a web process on the API's refusal path)."""
    import yaml

    # given a spec with a repeated key, and paths that exist, miss their last part, or miss more
    text = "workflow:\n  name: a\n  name: b\n  tasks:\n  - name: t0\n    image: x\n  - name: t1\n"
    paths = ["workflow.name", "workflow.tasks[1].name", "workflow.tasks[0].command", "workflow.nope.deeper", "",
             "workflow.tasks[5]"]
    composed = []
    real_compose = yaml.compose
    monkeypatch.setattr(yaml, "compose", lambda *a, **k: composed.append(1) or real_compose(*a, **k))

    # when
    lines = lines_of(text, paths)

    # then one composition answered every path as line_of does one by one
    assert composed == [1]
    assert lines == [3, 7, 5, None, None, 4]  # a repeated key: its last line, the value kept
    assert lines == [line_of(text, path) for path in paths]
