"""Hypothesis properties: no input makes ``parse_workflow`` raise anything but ``SpecInvalidError``,
and constraint trees are invariant under permutation of topology entries and of tasks."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parsing.natural import natural_key, natural_sorted
from workflows.spec import (
    ConstraintTree,
    PoolContext,
    SpecError,
    SpecInvalidError,
    SpecLimits,
    WorkflowSpec,
    parse_workflow,
    tree_to_json,
)

KEYS = ("zone", "spine", "rack", "gpu-clique")
NVL72 = PoolContext(name="nvl72", keys=KEYS, node_capacities=((4, 144_000, 960 * 2**30, 4 * 2**40),))
EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.yaml"))
EXAMPLE_TEXTS = [path.read_text() for path in EXAMPLES]
#: SPEC_FUZZ_EXAMPLES=5000 for a deeper local run; the default keeps tests/spec well under 30 s.
EXAMPLES_PER_TEST = int(os.environ.get("SPEC_FUZZ_EXAMPLES", "150"))
FUZZ = settings(
    max_examples=EXAMPLES_PER_TEST, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
SMALL_LIMITS = SpecLimits(max_tasks=20, max_nodes=5_000)


def assert_parses_or_reports(source: object) -> WorkflowSpec | None:
    """The property: a spec, or a SpecInvalidError with sorted, non-empty, well-formed errors."""
    try:
        return parse_workflow(source, pool=NVL72, limits=SMALL_LIMITS)
    except SpecInvalidError as exc:
        assert exc.errors
        assert list(exc.errors) == sorted(set(exc.errors))
        assert all(isinstance(e, SpecError) and isinstance(e.path, str) and e.message for e in exc.errors)
        return None


# -- random inputs --------------------------------------------------------------------------------

scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12)
json_values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)
field_names = st.sampled_from(
    ["workflow", "name", "groups", "tasks", "resources", "topology", "key", "group", "requirementType", "lead",
     "image", "command", "args", "environment", "resource", "inputs", "task", "gpu", "cpu", "memory", "storage",
     "nodesExcluded", "timeout", "queue_timeout", "exec_timeout", "labels", "version", "default-values"]
)  # fmt: skip
plausible = (
    st.sampled_from(["zone", "rack", "gpu-clique", "required", "preferred", "default", "a", "a-b", "1Gi", "500m"])
    | st.sampled_from(["2h", "0", "-1", "1.5", "x!", "model-1", "g1", "t1"])
    | st.integers(-2, 10)
    | st.booleans()
    | st.none()
)
near_specs = st.recursive(
    plausible,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(field_names, children, max_size=6),
    max_leaves=40,
)


@st.composite
def structured_specs(draw: st.DrawFn) -> dict[str, Any]:
    """Mostly well-shaped specs with junk sprinkled in, to reach the deep validation paths."""
    tasks = []
    for index in range(draw(st.integers(0, 5))):
        body: dict[str, Any] = {"name": draw(st.sampled_from([f"t{index}", "t0", "bad name", 3]))}
        body["image"] = draw(st.sampled_from(["busybox", "", None]))
        body["command"] = draw(st.sampled_from([["run"], [], "run", [1, None]]))
        for field, values in (
            ("lead", st.sampled_from([True, False, "yes"])),
            ("resource", st.sampled_from(["r0", "r1", "missing", "default"])),
            ("inputs", st.lists(st.fixed_dictionaries({"task": st.sampled_from(["t0", "t1", "t2", "nope"])}))),
            ("extra", near_specs),
        ):
            if draw(st.booleans()):
                body[field] = draw(values)
        tasks.append(body)
    resources = {}
    for index in range(draw(st.integers(0, 3))):
        entries = draw(
            st.lists(
                st.fixed_dictionaries(
                    {"key": st.sampled_from([*KEYS, "row", 1])},
                    optional={
                        "group": st.sampled_from(["a", "b", "a-b", "", None]),
                        "requirementType": st.sampled_from(["required", "preferred", "must"]),
                    },
                ),
                max_size=4,
            )
        )
        resources[f"r{index}"] = {
            "gpu": draw(st.sampled_from([0, 1, 4, 8, "0.5", "x"])),
            "memory": draw(st.sampled_from(["1Gi", "2Ti", "-1", 5])),
            "topology": entries,
        }
    workflow: dict[str, Any] = {"name": draw(st.sampled_from(["wf", "2bad", ""]))}
    if draw(st.booleans()):
        workflow["tasks"] = tasks
    else:
        split = draw(st.integers(0, len(tasks)))
        workflow["groups"] = [{"name": "g1", "tasks": tasks[:split]}, {"name": "g2", "tasks": tasks[split:]}]
    document: dict[str, Any] = {"workflow": workflow}
    where = draw(st.sampled_from(["top", "workflow", "both"]))
    if where in ("top", "both"):
        document["resources"] = resources
    if where in ("workflow", "both"):
        workflow["resources"] = resources
    return document


@FUZZ
@given(source=json_values)
def test_random_json_values_never_crash(source: object) -> None:
    assert_parses_or_reports(source)
    assert_parses_or_reports({"workflow": source})


@FUZZ
@given(source=st.dictionaries(field_names, near_specs, max_size=5))
def test_random_near_specs_never_crash(source: dict[str, Any]) -> None:
    assert_parses_or_reports(source)
    assert_parses_or_reports({"workflow": source})


@FUZZ
@given(source=structured_specs())
def test_random_structured_specs_never_crash(source: dict[str, Any]) -> None:
    assert_parses_or_reports(source)
    assert_parses_or_reports(yaml.safe_dump(source))


@FUZZ
@given(text=st.text(max_size=200))
def test_random_text_never_crashes(text: str) -> None:
    assert_parses_or_reports(text)


@FUZZ
@given(data=st.binary(max_size=200))
def test_random_bytes_never_crash(data: bytes) -> None:
    assert_parses_or_reports(data)


@FUZZ
@given(
    text=st.sampled_from(EXAMPLE_TEXTS),
    edits=st.lists(
        st.tuples(st.integers(0, 5000), st.sampled_from(["", ":", "-", " ", "\n", "&a", "*a", "!t", "{", "'"]))
    ),
)
def test_mutated_example_yaml_never_crashes(text: str, edits: list[tuple[int, str]]) -> None:
    for position, insert in edits:
        at = position % (len(text) + 1)
        text = text[:at] + insert + text[at + (0 if insert else 1) :]
    assert_parses_or_reports(text)


# -- permutation invariance -----------------------------------------------------------------------

TOPOLOGY_GROUPS = ["a", "b", "a-b", "b-c", "default"]


def requirement_of(path: tuple[tuple[str, str], ...]) -> str:
    """A fixed function of the node path, so tasks sharing a node always agree."""
    return "preferred" if len("".join(group for _key, group in path)) % 2 else "required"


@st.composite
def valid_specs(draw: st.DrawFn) -> dict[str, Any]:
    key_set = sorted(draw(st.lists(st.sampled_from(KEYS), min_size=1, max_size=4, unique=True)), key=KEYS.index)
    groups, resources, counter = [], {}, 0
    for group_index in range(draw(st.integers(1, 3))):
        tasks = []
        for _ in range(draw(st.integers(1, 6))):
            name = f"t{counter}"
            counter += 1
            task: dict[str, Any] = {"name": name, "image": "busybox", "command": ["true"]}
            if draw(st.integers(0, 4)):  # mostly with topology; some hang off the root
                path: tuple[tuple[str, str], ...] = ()
                entries = []
                for key in key_set:
                    group = draw(st.sampled_from(TOPOLOGY_GROUPS))
                    path = (*path, (key, group))
                    entries.append({"key": key, "group": group, "requirementType": requirement_of(path)})
                resources[f"r-{name}"] = {"gpu": 1, "topology": entries}
                task["resource"] = f"r-{name}"
            tasks.append(task)
        tasks[draw(st.integers(0, len(tasks) - 1))]["lead"] = True
        groups.append({"name": f"g{group_index}", "tasks": tasks})
    return {"workflow": {"name": "wf", "groups": groups, "resources": resources}}


def trees_of(spec: WorkflowSpec) -> dict[str, ConstraintTree]:
    return {group.name: group.tree for group in spec.groups}


def _natural_path(path: tuple[tuple[str, str], ...]) -> list[tuple[Any, Any]]:
    return [(natural_key(key), natural_key(group)) for key, group in path]


def assert_tree_invariants(tree: ConstraintTree, task_names: set[str]) -> None:
    assert sorted(tree.all_tasks()) == sorted(task_names)
    # natural order (docs/design.md §4): t9 before t10, a path compared part by part
    assert list(tree.tasks) == natural_sorted(tree.tasks)
    assert list(tree.children) == sorted(tree.children, key=lambda node: _natural_path(node.path))
    for node in tree.nodes():
        assert list(node.tasks) == natural_sorted(node.tasks)
        assert list(node.children) == sorted(node.children, key=lambda child: _natural_path(child.path))
        keys = [key for key, _group in node.path]
        assert keys == sorted(keys, key=KEYS.index) and len(set(keys)) == len(keys)
        assert node.requirement == requirement_of(node.path)
        assert all(child.path[:-1] == node.path for child in node.children)


@settings(max_examples=EXAMPLES_PER_TEST, deadline=None, database=None)
@given(source=valid_specs(), data=st.data())
def test_trees_are_invariant_under_permutation_of_entries_and_tasks(
    source: dict[str, Any], data: st.DataObject
) -> None:
    # given
    original = parse_workflow(source, pool=NVL72)
    permuted_source = {"workflow": dict(source["workflow"])}
    permuted_source["workflow"]["resources"] = {
        name: {**body, "topology": data.draw(st.permutations(body["topology"]))}
        for name, body in data.draw(st.permutations(list(source["workflow"]["resources"].items())))
    }
    permuted_source["workflow"]["groups"] = [
        {"name": group["name"], "tasks": data.draw(st.permutations(group["tasks"]))}
        for group in source["workflow"]["groups"]
    ]

    # when
    permuted = parse_workflow(permuted_source, pool=NVL72)

    # then
    assert trees_of(permuted) == trees_of(original)
    assert [tree_to_json(group.tree) for group in permuted.groups] == [tree_to_json(g.tree) for g in original.groups]
    for group in original.groups:
        assert_tree_invariants(group.tree, {task.name for task in group.tasks})
