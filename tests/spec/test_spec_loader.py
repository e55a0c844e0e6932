"""Safe loading: limits, alias bombs, tags, YAML 1.2 scalars, JSON text, bytes and mappings."""

from __future__ import annotations

import json

import pytest

from parsing.loader import FAST_MAX_BYTES
from workflows.spec import PoolContext, SpecInvalidError, SpecLimits, parse_workflow

POOL = PoolContext(name="nvl72", keys=("zone", "spine", "rack", "gpu-clique"))
MINIMAL = "workflow:\n  name: wf\n  tasks:\n  - {name: a, image: busybox, command: [sleep, '1']}\n"


def errors_of(source: object, limits: SpecLimits | None = None) -> list[tuple[str, str]]:
    with pytest.raises(SpecInvalidError) as caught:
        parse_workflow(source, pool=POOL, limits=limits)
    return [(error.path, error.message) for error in caught.value.errors]


@pytest.mark.parametrize(
    "source",
    [
        pytest.param(MINIMAL, id="_case_yaml_text"),
        pytest.param(MINIMAL.encode(), id="_case_yaml_bytes"),
        pytest.param(b"\xef\xbb\xbf" + MINIMAL.encode(), id="_case_yaml_bytes_with_bom"),
        pytest.param(
            json.dumps(
                {"workflow": {"name": "wf", "tasks": [{"name": "a", "image": "busybox", "command": ["sleep", "1"]}]}}
            ),
            id="_case_json_text",
        ),
        pytest.param(
            {"workflow": {"name": "wf", "tasks": [{"name": "a", "image": "busybox", "command": ["sleep", "1"]}]}},
            id="_case_mapping",
        ),
    ],
)
def test_sources_in_every_accepted_form_give_the_same_spec(source: object) -> None:
    # when
    spec = parse_workflow(source, pool=POOL)

    # then
    assert spec.name == "wf"
    assert [(group.name, [task.name for task in group.tasks]) for group in spec.groups] == [("a-group", ["a"])]
    assert spec.groups[0].tasks[0].command == ("sleep", "1")


def test_spec_larger_than_the_byte_limit_is_rejected_before_parsing() -> None:
    # given
    limits = SpecLimits(max_bytes=100)
    source = MINIMAL + "#" * 100

    # when
    errors = errors_of(source, limits)

    # then
    assert errors == [("", "the spec is larger than 100 bytes")]


def test_alias_bomb_is_rejected() -> None:
    # given
    lines = ["l0: &l0 [x, x, x, x, x, x, x, x, x]"]
    for level in range(1, 13):
        lines.append(f"l{level}: &l{level} [{', '.join([f'*l{level - 1}'] * 9)}]")
    source = "\n".join(lines) + "\n"

    # when
    errors = errors_of(source)

    # then: 11 levels use 99 aliases; the 101st is the second one on line 13
    assert errors == [("", "too many YAML aliases (more than 100) at line 13, column 18")]


def test_alias_fan_out_below_the_alias_limit_is_bounded_by_the_value_limit() -> None:
    # given: 4 aliases per level x 8 levels = 32 aliases, 4**8 = 65536 leaves
    lines = ["workflow: {name: wf}", "l0: &l0 [x, x, x, x]"]
    for level in range(1, 9):
        lines.append(f"l{level}: &l{level} [{', '.join([f'*l{level - 1}'] * 4)}]")
    limits = SpecLimits(max_nodes=10_000)

    # when
    errors = errors_of("\n".join(lines), limits)

    # then
    assert errors == [("", "the spec is too large (more than 10000 values)")]


def test_a_few_anchors_and_merge_keys_are_fine() -> None:
    # given
    source = """
task-defaults: &defaults
  image: busybox
  command: [sleep, "1"]
workflow:
  name: wf
  groups:
  - name: g
    tasks:
    - {<<: *defaults, name: a, lead: true}
    - {<<: *defaults, name: b, image: alpine}
"""

    # when
    errors = errors_of(source)

    # then: the helper key is an unknown field, and nothing else went wrong
    assert errors == [
        (
            "task-defaults",
            "unknown field 'task-defaults'; expected one of: default-values, resources, version, workflow",
        )
    ]


def test_merge_keys_fill_task_fields() -> None:
    # given
    source = """
workflow:
  name: wf
  groups:
  - name: g
    tasks:
    - &first {name: a, lead: true, image: busybox, command: [sleep, "1"]}
    - {<<: *first, name: b, lead: false, image: alpine}
"""

    # when
    spec = parse_workflow(source, pool=POOL)

    # then
    assert [(task.name, task.lead, task.image, task.command) for task in spec.groups[0].tasks] == [
        ("a", True, "busybox", ("sleep", "1")),
        ("b", False, "alpine", ("sleep", "1")),
    ]


def test_self_referencing_alias_is_rejected() -> None:
    # given
    source = "workflow: &w {name: wf, loop: *w}"

    # when
    errors = errors_of(source)

    # then
    assert len(errors) == 1
    assert errors[0][1] == "the spec is nested too deeply (more than 64)"


@pytest.mark.parametrize(
    ("source", "message"),
    [
        pytest.param(
            "workflow: !!python/object:os.system {}",
            "invalid YAML: tag 'tag:yaml.org,2002:python/object:os.system' is not allowed; use plain YAML or JSON "
            "values at line 1, column 11",
            id="_case_python_tag",
        ),
        pytest.param(
            "workflow: !custom x",
            "invalid YAML: tag '!custom' is not allowed; use plain YAML or JSON values at line 1, column 11",
            id="_case_custom_tag",
        ),
        pytest.param(
            "workflow: !!binary aGVsbG8=",
            "invalid YAML: tag 'tag:yaml.org,2002:binary' is not allowed; use plain YAML or JSON values at line 1, "
            "column 11",
            id="_case_binary",
        ),
        pytest.param(
            "workflow: !!set {a: null}",
            "invalid YAML: tag 'tag:yaml.org,2002:set' is not allowed; use plain YAML or JSON values at line 1, "
            "column 11",
            id="_case_set",
        ),
        pytest.param(
            "workflow: [",
            "invalid YAML: expected the node content, but found '<stream end>' at line 1, column 12",
            id="_case_syntax",
        ),
        pytest.param("", "the spec is empty", id="_case_empty"),
        pytest.param("# only a comment\n", "the spec is empty", id="_case_comment_only"),
        pytest.param("- a\n- b\n", "the spec must be a mapping with a 'workflow' key", id="_case_list"),
        pytest.param("just text", "the spec must be a mapping with a 'workflow' key", id="_case_scalar"),
        pytest.param(b"\xff\xfe", "the spec is not valid UTF-8 (byte 0)", id="_case_bad_utf8"),
        pytest.param("[" * 5000, "the spec is nested too deeply", id="_case_deep_brackets"),
        pytest.param(42, "the spec must be YAML or JSON text, or a mapping", id="_case_wrong_type"),
        pytest.param("\ud800", "the spec contains invalid characters (lone surrogates)", id="_case_surrogate"),
    ],
)
def test_unsafe_or_unreadable_documents_are_rejected(source: object, message: str) -> None:
    # when
    errors = errors_of(source)

    # then
    assert errors == [("", message)]


def test_non_string_keys_and_foreign_values_in_a_mapping_source() -> None:
    # given
    source = {"workflow": {"name": "wf", 1: "x", "labels": {"a": {1, 2}}}}

    # when
    errors = errors_of(source)

    # then
    assert errors == [
        ("workflow.1", "field names must be strings"),
        ("workflow.labels.a", "unsupported value of type set"),
    ]


@pytest.mark.parametrize(
    ("scalar", "expected"),
    [
        pytest.param("on", "on", id="_case_yaml11_bool_stays_text"),
        pytest.param("no", "no", id="_case_norway"),
        pytest.param("true", "true", id="_case_bool"),
        pytest.param("017", "17", id="_case_leading_zero_is_decimal"),
        pytest.param("0x1F", "31", id="_case_hex"),
        pytest.param("1:30", "1:30", id="_case_no_sexagesimal"),
        pytest.param("2024-01-01", "2024-01-01", id="_case_no_timestamp"),
        pytest.param("1_000", "1_000", id="_case_no_underscore_int"),
        pytest.param("2e3", "2000.0", id="_case_yaml12_float"),
        pytest.param("~", "", id="_case_null"),
    ],
)
def test_plain_scalars_follow_the_yaml_1_2_core_schema(scalar: str, expected: str) -> None:
    # given
    source = MINIMAL.replace("command: [sleep, '1']}", f"command: [sleep, '1'], environment: {{V: {scalar}}}}}")

    # when
    spec = parse_workflow(source, pool=POOL)

    # then
    assert spec.groups[0].tasks[0].environment == (("V", expected),)


def test_too_many_tasks_is_rejected() -> None:
    # given
    tasks = "".join(f"  - {{name: t{i}, image: busybox, command: [x]}}\n" for i in range(6))
    source = f"workflow:\n  name: wf\n  tasks:\n{tasks}"

    # when
    errors = errors_of(source, SpecLimits(max_tasks=5))

    # then
    assert errors == [("workflow.tasks", "too many tasks: 6 (at most 5)")]


def test_too_many_tasks_counts_every_group() -> None:
    # given
    group = {"tasks": [{"name": "x", "image": "i", "command": ["c"]}] * 3}
    source = {"workflow": {"name": "wf", "groups": [dict(group, name="g1"), dict(group, name="g2")]}}

    # when
    errors = errors_of(source, SpecLimits(max_tasks=5))

    # then
    assert errors == [("workflow.groups", "too many tasks: 6 (at most 5)")]


BAD_TEXT = "text must not contain NUL characters or unpaired surrogates"


@pytest.mark.parametrize(
    ("source", "path", "message"),
    [
        ({"workflow": {"name": "a\x00b"}}, "workflow.name", BAD_TEXT),
        ({"workflow": {"name": "a\ud800"}}, "workflow.name", BAD_TEXT),
        ('workflow: {name: "a\\0b"}', "workflow.name", BAD_TEXT),
        ("workflow: {version: 0x" + "f" * 5000 + "}", "workflow.version", "the number is too large"),
    ],
    ids=["_case_nul", "_case_surrogate", "_case_yaml_nul_escape", "_case_huge_int"],
)
def test_unstorable_values_are_spec_errors(source, path, message):
    # given a value no database can store or no message can format
    # when / then it is an ordinary validation error with its path, never another exception
    with pytest.raises(SpecInvalidError) as caught:
        parse_workflow(source, pool=PoolContext(name="p"))
    assert (path, message) in [(e.path, e.message) for e in caught.value.errors]


def test_a_repeated_key_keeps_its_last_value_with_a_warning_naming_both_lines() -> None:
    # given: OSMO's loader keeps the last value of a repeated key
    source = (
        "workflow:\n"
        "  name: first\n"
        "  name: wf\n"
        "  tasks:\n"
        "  - {name: a, image: busybox, command: [sleep, '1'], image: ubuntu}\n"
    )

    # when
    spec = parse_workflow(source, pool=POOL)

    # then
    assert spec.name == "wf"
    assert spec.groups[0].tasks[0].image == "ubuntu"
    assert [(warning.path, warning.message) for warning in spec.warnings] == [
        ("workflow.name", "duplicate key 'name' at line 3 (first at line 2): the last value is kept"),
        ("workflow.tasks[0].image", "duplicate key 'image' at line 5 (first at line 5): the last value is kept"),
    ]


def test_a_repeated_key_is_found_by_the_pure_loader_too() -> None:
    # given: a '|' block scalar keeps the text off libyaml's path
    source = "workflow:\n  name: wf\n  tasks:\n  - name: a\n    image: busybox\n    command: [sh]\n" \
             "    args:\n    - |\n      echo hi\n    name: b\n"

    # when
    spec = parse_workflow(source, pool=POOL)

    # then
    assert spec.groups[0].tasks[0].name == "b"
    assert [(warning.path, warning.message) for warning in spec.warnings] == [
        ("workflow.tasks[0].name", "duplicate key 'name' at line 10 (first at line 4): the last value is kept"),
    ]


def test_a_spec_without_repeated_keys_has_no_warnings() -> None:
    # when
    spec = parse_workflow(MINIMAL, pool=POOL)

    # then
    assert spec.warnings == ()


def test_yaml_past_the_node_limit_is_refused_where_it_passes_it() -> None:
    """Replays the attack run's finding: 1 MiB of ``[1,1,...`` (520,000 values) was composed whole, 12 s
    of CPU and ~300 MB, before the walk after loading refused it for its 200,000 values."""
    # given: the 13th node (keys included) is ``f``; past 64 KiB, so not libyaml's (FAST_MAX_BYTES, whose
    # texts hold too few nodes to reach the default limit)
    source = "workflow:\n  name: wf\n  tasks: [a, b, c, d, e, f" + ", g" * 30_000 + "]\n"
    assert len(source) > FAST_MAX_BYTES

    # when
    errors = errors_of(source, SpecLimits(max_yaml_nodes=12))

    # then
    assert errors == [("", "too many YAML nodes (more than 12, keys included) at line 3, column 26")]


def test_yaml_within_the_node_limit_loads() -> None:
    # given: 12 nodes
    source = "workflow:\n  name: wf\n  tasks: [a, b, c, d, e]\n"

    # when
    errors = errors_of(source, SpecLimits(max_yaml_nodes=12))

    # then: the loader took it; the parser speaks of the tasks
    assert errors and all(path.startswith("workflow.tasks") for path, _message in errors)


def test_a_thousand_task_spec_with_variables_fits_the_default_node_limit() -> None:
    # given: 1,000 tasks, each with arguments and ten environment variables (~36,000 YAML nodes)
    lines = ["workflow:", "  name: wide", "  tasks:"]
    for index in range(1000):
        lines += [f"  - name: t{index}", "    image: busybox", "    command: [python, train.py]",
                  "    args: [--epochs, '3', --lr, '0.1']", "    environment:",
                  *[f"      VAR_{var}: value-{var}" for var in range(10)]]
    source = "\n".join(lines) + "\n"

    # when
    spec = parse_workflow(source, pool=POOL)

    # then
    assert len(list(spec.tasks())) == 1000
