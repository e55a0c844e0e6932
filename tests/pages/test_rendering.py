"""Pure helpers of the pages: the constraint tree SVG layout and YAML error lines. No database."""

from __future__ import annotations

import re

import pytest

from pages.forms import yaml_line_for_path
from pages.templatetags.tree_svg import tree_svg
from parsing.yamlpos import path_segments
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
    assert path_segments('workflow.labels["a.b"][2]') == ["workflow", "labels", "a.b", 2]
    assert yaml_line_for_path("workflow:\n  labels:\n    a.b: x\n", 'workflow.labels["a.b"]') == 3
    assert yaml_line_for_path("workflow: [unclosed", "workflow.name") is None
    assert yaml_line_for_path("workflow: {}", "") is None


# ------------------------------------------------------------------------------------------------
# Page details: domain headers, placement-map task names, "just now", the favicon
# ------------------------------------------------------------------------------------------------
def _box(**fields):
    from pages.viewmodels.domains import DomainBox

    return DomainBox(key="rack", value="r1", path=("r1",), capacity=8, free=8, node_count=2, **fields)


def test_domain_header_separates_only_labels_that_are_there():
    from pages.templatetags.domain_boxes import domain_boxes

    # given: a rack folded with its gpu-clique, whose label value is empty (Kubernetes allows "")
    html = str(domain_boxes(_box(merged=[("gpu-clique", "")]), "pool"))
    alone = str(domain_boxes(_box(), "pool"))

    # then: one separator, between the two labels, and the empty value said
    head = re.search(r'<div class="dom-head[^>]*>(.*?)<span class="cap">', html, re.S).group(1)
    assert head.count("·") == 1
    assert re.sub(r"<[^>]+>", "", head).split() == ["rack", "r1", "·", "gpu-clique", "(empty)"]
    alone_head = re.search(r'<div class="dom-head[^>]*>(.*?)<span class="cap">', alone, re.S).group(1)
    assert "·" not in alone_head


def test_placement_map_cells_carry_the_full_task_names():
    from types import SimpleNamespace

    from pages.templatetags.domain_boxes import domain_boxes
    from pages.viewmodels.domains import NodeCell

    # given: a node cell holding two long-named tasks
    cell = NodeCell(name="z1-s1-r1-n01", gpu=4, in_use=4, free=0, schedulable=True, ours=4,
                    tasks=[SimpleNamespace(name="model1-shard12-with-a-long-name"), SimpleNamespace(name="m-2")])

    # when
    html = str(domain_boxes(_box(nodes=[cell]), "workflow"))

    # then: the whole name in the text and in the tooltip, never cut with an ellipsis
    assert '<div class="tk" title="model1-shard12-with-a-long-name">model1-shard12-with-a-long-name</div>' in html
    assert "…" not in html


def test_since_says_just_now_under_a_minute():
    from datetime import timedelta

    from django.utils import timezone

    from pages.templatetags.osmo_pages import since

    now = timezone.now()
    assert since(now - timedelta(seconds=5)) == "just now"
    assert since(now - timedelta(seconds=59)) == "just now"
    assert since(now - timedelta(minutes=5, seconds=3)).replace("\xa0", " ") == "5 minutes ago"
    assert since(None) == ""


def test_favicon_is_a_static_svg_linked_from_every_page():
    from pathlib import Path
    from xml.etree import ElementTree

    from django.contrib.staticfiles import finders

    # when
    found = finders.find("osmo/favicon.svg")
    base = (Path(__file__).resolve().parents[2] / "templates" / "base.html").read_text()

    # then
    assert found is not None
    assert ElementTree.parse(found).getroot().tag == "{http://www.w3.org/2000/svg}svg"
    assert """<link rel="icon" href="{% static 'osmo/favicon.svg' %}" type="image/svg+xml">""" in base


def test_tree_svg_draws_leaves_in_natural_order():
    """A tree stored in string order (``t1, t10, t11, t2``) is drawn ``t1, t2, t10, t11``."""
    # given
    tree = {"group": "g", "keys": ["rack"], "tasks": [], "children": [
        {"key": "rack", "group": "r", "path": [["rack", "r"]], "requirement": "required", "display_name": "r",
         "tasks": ["t1", "t10", "t11", "t2"], "children": []}]}
    # when
    svg = tree_svg(tree)
    # then
    drawn = sorted((svg.index(f">{name}<"), name) for name in ("t1", "t2", "t10", "t11"))
    assert [name for _at, name in drawn] == ["t1", "t2", "t10", "t11"]
