"""Pure helpers of the pages: the constraint tree SVG layout and YAML error lines. No database."""

from __future__ import annotations

import re

import pytest

from pages.forms import path_tokens, yaml_line_for_path
from pages.templatetags.tree_svg import tree_svg
from tests.factories import example_spec

SCOPED = {  # seed 003 example 5: rack-group-1 under zone-a and under zone-b are different nodes
    "group": "group1", "keys": ["zone", "rack"], "tasks": [],
    "children": [
        {"key": "zone", "group": "zone-a", "path": [["zone", "zone-a"]], "requirement": "required",
         "display_name": "zone-a", "tasks": [], "children": [
             {"key": "rack", "group": "rack-group-1", "path": [["zone", "zone-a"], ["rack", "rack-group-1"]],
              "requirement": "preferred", "display_name": "zone-a/rack-group-1", "tasks": ["task-1", "task-2"],
              "children": []}]},
        {"key": "zone", "group": "zone-b", "path": [["zone", "zone-b"]], "requirement": "required",
         "display_name": "zone-b", "tasks": [], "children": [
             {"key": "rack", "group": "rack-group-1", "path": [["zone", "zone-b"], ["rack", "rack-group-1"]],
              "requirement": "required", "display_name": "zone-b/rack-group-1", "tasks": ["task-3"], "children": []},
             {"key": "rack", "group": "rack-group-2", "path": [["zone", "zone-b"], ["rack", "rack-group-2"]],
              "requirement": "required", "display_name": "zone-b/rack-group-2", "tasks": ["task-4"], "children": []}]},
    ],
}


def _rects(svg: str) -> list[tuple[float, float, float]]:
    return [(float(x), float(y), float(w)) for x, y, w in
            re.findall(r'<rect x="([\d.]+)" y="([\d.]+)" width="([\d.]+)"', svg)]


def test_tree_svg_draws_root_key_group_nodes_and_task_leaves():
    # when
    svg = tree_svg(SCOPED, report=[{"path": [["zone", "zone-a"], ["rack", "rack-group-1"]], "met": False,
                                    "met_key": "zone"}],
                   tasks={"task-1": {"status": "RUNNING", "node": "n1", "colour": "blue"}})

    # then
    assert svg.startswith("<svg") and svg.endswith("</svg>")
    assert svg.count('data-kind="root"') == 1
    assert svg.count('data-kind="node"') == 5
    assert svg.count('data-kind="task"') == 4
    assert svg.count(">rack = rack-group-1</text>") == 2  # scoped: two different nodes
    assert "preferred · met at zone" in svg and "required" in svg
    assert 'stroke-dasharray="6 4"' in svg  # the preferred box is dashed
    assert "n1" in svg  # the leaf shows its node
    # boxes of one row never overlap
    rows: dict[float, list[tuple[float, float]]] = {}
    for x, y, width in _rects(svg):
        rows.setdefault(y, []).append((x, x + width))
    for boxes in rows.values():
        boxes.sort()
        assert all(left[1] <= right[0] for left, right in zip(boxes, boxes[1:], strict=False))


def test_tree_svg_escapes_text_and_folds_many_leaves():
    # given
    tree = {"group": "<g>", "keys": ["rack"], "tasks": [], "children": [
        {"key": "rack", "group": "a&b", "path": [["rack", "a&b"]], "requirement": "required", "display_name": "a&b",
         "tasks": [f"t{i:02d}" for i in range(30)], "children": []}]}

    # when
    svg = tree_svg(tree)

    # then
    assert "<g>" not in svg.replace('<g class', "").replace("</g>", "")
    assert "&lt;g&gt;" in svg and "a&amp;b" in svg
    assert svg.count('data-kind="task"') == 7 and "+23 more tasks" in svg


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("workflow.name", "  name: multiple-nvl72-same-zone"),
        ("workflow.groups[0].tasks[4].name", "    - name: model2-shard1"),
        ("workflow.resources.model-2.topology[1].key", "    - key: zone"),  # top-level resources
        ("resources.model-1.memory", "    memory: 64Gi"),
        ("workflow.groups[0].tasks[99]", "    tasks:"),  # closest existing ancestor
    ],
    ids=["_case_key", "_case_list_item", "_case_toplevel_resources", "_case_resources", "_case_ancestor"],
)
def test_yaml_line_for_path_maps_error_paths_to_lines(path, expected):
    # given
    text = example_spec("multiple-nvl72-same-zone")

    # when
    line = yaml_line_for_path(text, path)

    # then
    assert text.splitlines()[line - 1] == expected


def test_yaml_line_for_path_handles_quoted_keys_and_bad_input():
    assert path_tokens('workflow.labels["a.b"][2]') == ["workflow", "labels", "a.b", 2]
    assert yaml_line_for_path("workflow:\n  labels:\n    a.b: x\n", 'workflow.labels["a.b"]') == 3
    assert yaml_line_for_path("workflow: [unclosed", "workflow.name") is None
    assert yaml_line_for_path("workflow: {}", "") is None
