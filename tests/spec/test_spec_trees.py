"""The tree builder on its own: identity by path, invariants, rendering, round trip, purity."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from workflows.spec import (
    ConstraintTree,
    RequirementConflict,
    ResourceSpec,
    TaskSpec,
    TopologyEntry,
    TreeNode,
    build_tree,
    find_requirement_conflicts,
    tree_from_json,
    tree_to_json,
    tree_to_outline,
)

KEYS = ("zone", "spine", "rack", "gpu-clique")
ROOT = Path(__file__).resolve().parents[2]


def entries(*items: tuple[str, str] | tuple[str, str, str]) -> tuple[TopologyEntry, ...]:
    return tuple(TopologyEntry(*item) for item in items)  # type: ignore[arg-type]


def test_single_child_chain_keeps_every_level() -> None:
    # given
    tasks = [("t1", entries(("gpu-clique", "c"), ("zone", "z"), ("spine", "s", "preferred"), ("rack", "r")))]

    # when
    tree = build_tree("g", tasks, KEYS)

    # then
    assert tree == ConstraintTree(
        group="g",
        keys=KEYS,
        children=(
            TreeNode(
                key="zone",
                group="z",
                path=(("zone", "z"),),
                requirement="required",
                children=(
                    TreeNode(
                        key="spine",
                        group="s",
                        path=(("zone", "z"), ("spine", "s")),
                        requirement="preferred",
                        children=(
                            TreeNode(
                                key="rack",
                                group="r",
                                path=(("zone", "z"), ("spine", "s"), ("rack", "r")),
                                requirement="required",
                                children=(
                                    TreeNode(
                                        key="gpu-clique",
                                        group="c",
                                        path=(("zone", "z"), ("spine", "s"), ("rack", "r"), ("gpu-clique", "c")),
                                        requirement="required",
                                        tasks=("t1",),
                                    ),
                                ),
                            ),
                        ),
                    ),
                ),
            ),
        ),
    )
    assert [node.display_name for node in tree.nodes()] == ["z", "z/s", "z/s/r", "z/s/r/c"]


def test_build_tree_accepts_task_specs_and_pairs_alike() -> None:
    # given
    spec = TaskSpec(
        name="t", lead=True, image="i", command=("c",), resource_spec=ResourceSpec("r", topology=entries(("rack", "x")))
    )

    # when
    from_spec = build_tree("g", [spec], KEYS)
    from_pair = build_tree("g", [("t", entries(("rack", "x")))], KEYS)

    # then
    assert from_spec == from_pair


@pytest.mark.parametrize(
    ("tasks", "message"),
    [
        pytest.param([("t", entries(("row", "x")))], "topology key 'row' is not one of the pool keys", id="_case_key"),
        pytest.param(
            [("t", entries(("rack", "x"), ("rack", "y")))], "topology key 'rack' appears more than once", id="_case_dup"
        ),
        pytest.param([("t", ()), ("t", ())], "task 't' appears more than once", id="_case_task_twice"),
        pytest.param(
            [("a", entries(("rack", "x"))), ("b", entries(("rack", "x", "preferred")))],
            "tasks disagree on the requirement of node",
            id="_case_conflict",
        ),
        pytest.param([("t", entries(("rack", "x", "soft")))], "requirement 'soft' is neither", id="_case_requirement"),
    ],
)
def test_build_tree_refuses_invalid_input(tasks: list[tuple[str, tuple[TopologyEntry, ...]]], message: str) -> None:
    # when
    with pytest.raises(ValueError) as caught:
        build_tree("g", tasks, KEYS)

    # then
    assert message in str(caught.value)


def test_find_requirement_conflicts_lists_required_first() -> None:
    # given
    tasks = [
        ("c", entries(("zone", "z", "preferred"))),
        ("a", entries(("zone", "z"))),
        ("b", entries(("zone", "z", "preferred"))),
    ]

    # when
    conflicts = find_requirement_conflicts(tasks, KEYS)

    # then
    assert conflicts == (
        RequirementConflict(
            path=(("zone", "z"),), tasks_by_requirement=(("required", ("a",)), ("preferred", ("b", "c")))
        ),
    )
    assert (conflicts[0].key, conflicts[0].group) == ("zone", "z")


def test_json_round_trip_and_serialisable() -> None:
    # given
    tasks = [
        ("free", ()),
        ("a", entries(("zone", "z"), ("rack", "r1", "preferred"))),
        ("b", entries(("zone", "z"), ("rack", "r2", "preferred"))),
    ]
    tree = build_tree("g", tasks, KEYS)

    # when
    data = json.loads(json.dumps(tree_to_json(tree)))

    # then
    assert tree_from_json(data) == tree


def test_outline_marks_unconstrained_tasks_and_nests_with_guides() -> None:
    # given
    tasks = [
        ("loader", ()),
        ("a", entries(("zone", "z1"), ("rack", "r1"))),
        ("b", entries(("zone", "z1"), ("rack", "r2"))),
        ("c", entries(("zone", "z2"), ("rack", "r1"))),
    ]

    # when
    outline = tree_to_outline(build_tree("g", tasks, KEYS))

    # then
    assert outline == (
        "g\n"
        "├─ (no topology): loader\n"
        "├─ zone=z1 (required)\n"
        "│  ├─ rack=r1 (required): a\n"
        "│  └─ rack=r2 (required): b\n"
        "└─ zone=z2 (required)\n"
        "   └─ rack=r1 (required): c"
    )


def test_spec_package_imports_nothing_from_django_or_the_scheduler() -> None:
    # given
    code = (
        "import sys, workflows.spec\n"
        "roots = {'django', 'rest_framework', 'celery', 'scheduler'}\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in roots)\n"
        "print(','.join(bad))\n"
    )

    # when
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)

    # then
    assert result.stdout.strip() == ""


def test_tree_lists_tasks_and_groups_in_natural_order() -> None:
    """Replays a dry run that listed ``t1, t10, t11, t12, t2``: a person reads ``t2`` before ``t10``,
    and ``rack-group-2`` before ``rack-group-10`` (docs/design.md §4)."""
    # given twelve tasks in one gpu-clique, and twelve more each in its own rack group
    clique = [(f"t{i}", entries(("gpu-clique", "c"))) for i in range(12, 0, -1)]
    racks = [(f"r{i}", entries(("rack", f"rack-group-{i}"))) for i in (10, 2, 1)]

    # when
    tree = build_tree("g", [*clique, *racks], KEYS)

    # then
    assert [child.group for child in tree.children] == ["c", "rack-group-1", "rack-group-2", "rack-group-10"]
    assert tree.children[0].tasks == tuple(f"t{i}" for i in range(1, 13))
    assert tree_to_outline(tree).splitlines()[1] == (
        "├─ gpu-clique=c (required): t1, t2, t3, t4, t5, t6, t7, t8, t9, t10, t11, t12")
