"""Normalisation and the validation rules of docs/design.md §3 beyond the numbered cases of test_spec_cases.py."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from workflows.spec import (
    InputSpec,
    PoolContext,
    ResourceSpec,
    SpecError,
    SpecInvalidError,
    TaskSpec,
    TopologyEntry,
    parse_workflow,
)

GI, TI = 2**30, 2**40
KEYS = ("zone", "spine", "rack", "gpu-clique")
GB200 = (4, 144_000, 960 * GI, 4 * TI)
NVL72 = PoolContext(name="nvl72", keys=KEYS, node_capacities=(GB200,))


def task(name: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, "image": "busybox:1.36", "command": ["sh", "-c"], **fields}


def spec_with(**workflow_fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"name": "wf", "groups": [{"name": "g", "tasks": [task("a")]}]}
    body.update(workflow_fields)
    return {"workflow": body}


def errors_of(source: object, pool: PoolContext = NVL72) -> list[tuple[str, str]]:
    with pytest.raises(SpecInvalidError) as caught:
        parse_workflow(source, pool=pool)
    return [(error.path, error.message) for error in caught.value.errors]


# -- normalisation -------------------------------------------------------------------------------


def test_full_spec_is_normalised_into_frozen_values() -> None:
    # given
    source = """
version: 2
default-values: {epochs: 3, name: demo}
workflow:
  name: train_job-1
  timeout: {queue_timeout: 2h, exec_timeout: 1d}
  labels: {team: llm, tier: 1}
  groups:
  - name: prep
    tasks:
    - name: fetch
      image: alpine:3
      command: [wget]
      args: [-q, 10]
      environment: {DEBUG: true, LEVEL: 3}
      resource: small
  - name: train
    tasks:
    - name: worker
      lead: true
      image: nvcr.io/nvidia/pytorch:24.03-py3
      command: [torchrun]
      inputs: [{task: fetch}, {task: fetch}]
      resource: big
    - name: helper
      image: nvcr.io/nvidia/pytorch:24.03-py3
      command: [python]
      inputs: [{task: fetch}]
  resources:
    small: {cpu: 500m, memory: 1Gi}
    big:
      gpu: 4
      cpu: 32
      memory: 256Gi
      storage: 1Ti
      nodesExcluded: [node-9, node-1, node-9]
      topology: [{key: gpu-clique, group: c, requirementType: preferred}]
"""

    # when
    spec = parse_workflow(source, pool=NVL72)

    # then
    assert (spec.name, spec.version, spec.pool) == ("train_job-1", 2, "nvl72")
    assert (spec.queue_timeout_s, spec.exec_timeout_s) == (7200, 86400)
    assert spec.labels == (("team", "llm"), ("tier", "1"))
    assert spec.default_values == (("epochs", 3), ("name", "demo"))
    assert [(group.name, group.inputs, group.lead.name) for group in spec.groups] == [
        ("prep", (), "fetch"),
        ("train", ("prep",), "worker"),
    ]
    big = ResourceSpec(
        name="big",
        gpu=4,
        cpu=32_000,
        memory=256 * GI,
        storage=TI,
        nodes_excluded=("node-1", "node-9"),
        topology=(TopologyEntry("gpu-clique", "c", "preferred"),),
    )
    assert spec.resources == (big, ResourceSpec(name="small", cpu=500, memory=GI))
    assert spec.group("train").tasks[0] == TaskSpec(
        name="worker",
        lead=True,
        image="nvcr.io/nvidia/pytorch:24.03-py3",
        command=("torchrun",),
        resource="big",
        inputs=("fetch",),
        resource_spec=big,
        input_specs=(InputSpec(task="fetch"), InputSpec(task="fetch")),  # in spec order: {{input:1}} is the second
    )
    assert spec.group("prep").tasks[0].args == ("-q", "10")
    assert spec.group("prep").tasks[0].environment == (("DEBUG", "true"), ("LEVEL", "3"))
    assert spec.group("train").tasks[1].resource_spec == ResourceSpec(name="default")
    assert spec.group_order() == ("prep", "train")


def test_to_dict_is_json_ready() -> None:
    # given
    source = spec_with(resources={"default": {"gpu": 1, "topology": [{"key": "rack"}]}})

    # when
    rendered = parse_workflow(source, pool=NVL72).to_dict()

    # then
    assert rendered == {
        "name": "wf",
        "version": 2,
        "pool": "nvl72",
        "spec_pool": None,
        "queue_timeout_s": None,
        "exec_timeout_s": None,
        "labels": {},
        "default_values": {},
        "resources": [
            {
                "name": "default",
                "gpu": 1,
                "cpu": 0,
                "memory": 0,
                "storage": 0,
                "nodes_excluded": [],
                "topology": [{"key": "rack", "group": "default", "requirementType": "required"}],
                "platform": None,
            }
        ],
        "groups": [
            {
                "name": "g",
                "inputs": [],
                "barrier": True,
                "ignore_nonlead_status": True,
                "tasks": [
                    {
                        "name": "a",
                        "lead": True,
                        "image": "busybox:1.36",
                        "command": ["sh", "-c"],
                        "args": [],
                        "environment": {},
                        "resource": "default",
                        "inputs": [],
                        "requests": {"gpu": 1, "cpu": 0, "memory": 0, "storage": 0},
                        "nodes_excluded": [],
                        "topology": [{"key": "rack", "group": "default", "requirementType": "required"}],
                        "platform": None,
                        "input_specs": [],
                        "outputs": [],
                        "files": [],
                        "credentials": [],
                        "exit_actions": [],
                        "checkpoints": [],
                        "volume_mounts": [],
                        "privileged": False,
                        "host_network": False,
                    }
                ],
                "constraint_tree": {
                    "group": "g",
                    "keys": list(KEYS),
                    "tasks": [],
                    "children": [
                        {
                            "key": "rack",
                            "group": "default",
                            "path": [["rack", "default"]],
                            "requirement": "required",
                            "display_name": "default",
                            "tasks": ["a"],
                            "children": [],
                        }
                    ],
                },
            }
        ],
    }


def test_bare_tasks_become_one_task_groups_named_after_them() -> None:
    # given
    source = {
        "workflow": {
            "name": "wf",
            "tasks": [task("first"), task("second", inputs=[{"task": "first"}])],
        }
    }

    # when
    spec = parse_workflow(source, pool=NVL72)

    # then
    assert [(g.name, [t.name for t in g.tasks], g.inputs, g.lead.name) for g in spec.groups] == [
        ("first-group", ["first"], (), "first"),
        ("second-group", ["second"], ("first-group",), "second"),
    ]


def test_resources_at_top_level_are_accepted() -> None:
    # given
    source = spec_with()
    source["resources"] = {"default": {"gpu": 2}}

    # when
    spec = parse_workflow(source, pool=NVL72)

    # then
    assert spec.groups[0].tasks[0].resource_spec == ResourceSpec(name="default", gpu=2)


def test_resources_in_both_places_are_rejected() -> None:
    # given
    source = spec_with(resources={"default": {"gpu": 2}})
    source["resources"] = {"default": {"gpu": 2}}

    # when
    errors = errors_of(source)

    # then
    assert errors == [
        (
            "resources",
            "resources are given both at the top level and under workflow; keep one of them "
            "(workflow.resources is canonical)",
        )
    ]


def test_lone_task_is_lead_even_when_marked_false() -> None:
    # given
    source = {"workflow": {"name": "wf", "groups": [{"name": "g", "tasks": [task("a", lead=False)]}]}}

    # when
    spec = parse_workflow(source, pool=NVL72)

    # then
    assert spec.groups[0].tasks[0].lead is True


# -- errors ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("workflow_name", "valid"),
    [
        pytest.param("a", True, id="_case_single_letter"),
        pytest.param("My_flow-2", True, id="_case_mixed"),
        pytest.param("2flow", False, id="_case_leading_digit"),
        pytest.param("flow-", False, id="_case_trailing_dash"),
        pytest.param("flow.x", False, id="_case_dot"),
        pytest.param("a" * 64, False, id="_case_too_long"),
    ],
)
def test_workflow_name_pattern(workflow_name: str, valid: bool) -> None:
    # given
    source = spec_with(name=workflow_name)

    # when / then
    if valid:
        assert parse_workflow(source, pool=NVL72).name == workflow_name
    else:
        assert errors_of(source) == [
            (
                "workflow.name",
                f"invalid workflow name {workflow_name!r}: use letters, digits, '-' and '_', start with a letter, "
                "end with a letter or digit, at most 63 characters",
            )
        ]


def test_every_error_is_reported_at_once_sorted_by_path() -> None:
    # given
    source = {
        "version": 3,
        "workflow": {
            "name": "wf",
            "timeout": {"queue_timeout": "soon"},
            "groups": [
                {"name": "g", "tasks": [task("a", lead=True), task("a"), {"name": "c", "image": ""}]},
                {"name": "g", "tasks": [task("d", resource="nope", inputs=[{"task": "zzz"}])]},
            ],
            "resources": {"r": {"gpu": "lots", "nodesExcluded": "node-1"}},
        },
    }

    # when
    errors = errors_of(source)

    # then
    assert errors == [
        ("version", "unsupported version 3; the only supported version is 2"),
        (
            "workflow.groups[0].tasks[1].name",
            "duplicate task name 'a' (first used at workflow.groups[0].tasks[0].name); "
            "task names must be unique across the workflow",
        ),
        ("workflow.groups[0].tasks[2].command", "this field is required"),
        ("workflow.groups[0].tasks[2].image", "must not be empty"),
        (
            "workflow.groups[1].name",
            "duplicate group name 'g' (first used at workflow.groups[0].name); group names must be unique",
        ),
        ("workflow.groups[1].tasks[0].inputs[0].task", "unknown task 'zzz'; inputs must name a task of this workflow"),
        ("workflow.groups[1].tasks[0].resource", "unknown resource 'nope'; defined resources: r"),
        (
            "workflow.resources.r.gpu",
            "invalid gpu quantity 'lots'; expected a non-negative number with an optional "
            "Kubernetes suffix, e.g. 4, 500m, 1.5, 64Gi, 2e3",
        ),
        ("workflow.resources.r.nodesExcluded", "must be a list of strings, got a string"),
        (
            "workflow.timeout.queue_timeout",
            "invalid queue_timeout 'soon'; expected seconds or a duration like 45s, 30m, 2h, 1d",
        ),
    ]


def test_spec_invalid_error_is_sorted_deduplicated_and_renders_for_the_api() -> None:
    # given
    errors = [SpecError("b", "y"), SpecError("a", "z"), SpecError("b", "x"), SpecError("a", "z")]

    # when
    exc = SpecInvalidError(errors)

    # then
    assert exc.errors == (SpecError("a", "z"), SpecError("b", "x"), SpecError("b", "y"))
    assert exc.to_list() == [
        {"path": "a", "message": "z"},
        {"path": "b", "message": "x"},
        {"path": "b", "message": "y"},
    ]
    assert exc.code == "spec_invalid"
    assert str(exc) == "Workflow spec is invalid: a: z (and 2 more)"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        pytest.param({}, [("workflow", "this field is required")], id="_case_missing_workflow"),
        pytest.param({"workflow": "x"}, [("workflow", "must be a mapping, got a string")], id="_case_workflow_string"),
        pytest.param(
            {"workflow": {"groups": [{"name": "g", "tasks": [task("a")]}]}},
            [("workflow.name", "this field is required")],
            id="_case_missing_name",
        ),
        pytest.param(
            {"workflow": {"name": "wf"}},
            [("workflow", "the workflow needs groups (or tasks); neither is given")],
            id="_case_no_groups",
        ),
        pytest.param(
            {"workflow": {"name": "wf", "groups": [], "tasks": []}},
            [("workflow", "give either groups or tasks, not both")],
            id="_case_groups_and_tasks",
        ),
        pytest.param(
            {"workflow": {"name": "wf", "groups": []}},
            [("workflow.groups", "must be a non-empty list, got nothing")],
            id="_case_empty_groups",
        ),
        pytest.param(
            {"workflow": {"name": "wf", "groups": [{"name": "g", "tasks": []}]}},
            [("workflow.groups[0].tasks", "must be a non-empty list of tasks")],
            id="_case_empty_group",
        ),
        pytest.param(
            {"workflow": {"name": "wf", "tasks": [{"name": "a", "image": "i", "command": []}]}},
            [("workflow.tasks[0].command", "must not be empty")],
            id="_case_empty_command",
        ),
        pytest.param(
            {"workflow": {"name": "wf", "tasks": [{"name": "a", "image": "i", "command": "run"}]}},
            [("workflow.tasks[0].command", "must be a list of strings, got a string")],
            id="_case_command_string",
        ),
        pytest.param(
            {"workflow": {"name": "wf", "tasks": [task("a", lead="yes")]}},
            [("workflow.tasks[0].lead", "must be true or false, got a string")],
            id="_case_lead_not_bool",
        ),
        pytest.param(
            {"workflow": {"name": "wf", "tasks": [task("a", environment={"1BAD=": "x", "OK": [1]})]}},
            [
                ("workflow.tasks[0].environment.OK", "must be a string, got a list"),
                ('workflow.tasks[0].environment["1BAD="]', "invalid name '1BAD='"),
            ],
            id="_case_environment",
        ),
        pytest.param(
            {"workflow": {"name": "wf", "tasks": [task("a", inputs=[{"url": "s3://x", "task": "b"}, "b"])]}},
            [
                ("workflow.tasks[0].inputs[0]", "an input needs exactly one of task, url (got task, url)"),
                ("workflow.tasks[0].inputs[1]", "must be a mapping, got a string"),
            ],
            id="_case_inputs",
        ),
        pytest.param(
            spec_with(labels=["a"]), [("workflow.labels", "must be a mapping, got a list")], id="_case_labels_list"
        ),
        pytest.param(
            spec_with(timeout={"exec_timeout": 0, "idle": 5}),
            [
                ("workflow.timeout.exec_timeout", "exec_timeout must be positive, got 0"),
                ("workflow.timeout.idle", "unknown field 'idle'; expected one of: exec_timeout, queue_timeout"),
            ],
            id="_case_timeouts",
        ),
        pytest.param(
            spec_with(resources={"bad.name": {"gpu": 1}, "r": None, "s": {"topology": {"key": "zone"}}}),
            [
                ("workflow.resources.r", "must be a mapping, got null"),
                ("workflow.resources.s.topology", "must be a list of topology entries, got a mapping"),
                (
                    'workflow.resources["bad.name"]',
                    "invalid resource name 'bad.name': use letters, digits, '-' and '_', start with a letter, end "
                    "with a letter or digit, at most 63 characters",
                ),
            ],
            id="_case_resources",
        ),
        pytest.param(
            spec_with(resources={"default": {"topology": [{"group": "g"}, "zone", {"key": 1, "group": ""}]}}),
            [
                ("workflow.resources.default.topology[0].key", "this field is required"),
                ("workflow.resources.default.topology[1]", "must be a mapping, got a string"),
                ("workflow.resources.default.topology[2].group", "must not be empty"),
                ("workflow.resources.default.topology[2].key", "must be a string, got a number"),
            ],
            id="_case_topology_entries",
        ),
    ],
)
def test_structural_errors(source: dict[str, Any], expected: list[tuple[str, str]]) -> None:
    # when
    errors = errors_of(copy.deepcopy(source))

    # then
    assert errors == expected


def test_multi_task_group_needs_exactly_one_lead() -> None:
    # given
    source = {
        "workflow": {
            "name": "wf",
            "groups": [
                {"name": "none", "tasks": [task("a"), task("b")]},
                {"name": "two", "tasks": [task("c", lead=True), task("d", lead=True), task("e")]},
                {"name": "one", "tasks": [task("f", lead=True), task("g")]},
            ],
        }
    }

    # when
    errors = errors_of(source)

    # then
    assert errors == [
        ("workflow.groups[0]", "group 'none' has no lead task; mark exactly one of its tasks with lead: true"),
        ("workflow.groups[1]", "group 'two' has 2 lead tasks (c, d); exactly one task may have lead: true"),
    ]


def test_inputs_within_the_same_group_are_rejected() -> None:
    # given
    source = {
        "workflow": {
            "name": "wf",
            "groups": [{"name": "g", "tasks": [task("a", lead=True), task("b", inputs=[{"task": "a"}])]}],
        }
    }

    # when
    errors = errors_of(source)

    # then
    assert errors == [
        (
            "workflow.groups[0].tasks[1].inputs[0].task",
            "task 'a' is in the same group ('g'); inputs must come from tasks of other groups",
        )
    ]


def test_a_task_naming_itself_as_input_is_told_so() -> None:
    """OSMO's inputs page shows a task whose task input is itself; it was told the task is "in the
    same group" as itself."""
    # given
    source = {"workflow": {"name": "wf", "tasks": [task("a", inputs=[{"task": "a"}])]}}

    # when
    errors = errors_of(source)

    # then
    assert errors == [
        ("workflow.tasks[0].inputs[0].task",
         "task 'a' names itself: its inputs come from tasks of other groups, which finish before it starts"),
    ]


def test_group_cycles_are_reported_in_data_flow_order() -> None:
    # given: x feeds y, y feeds z, z feeds x; w is fine
    source = {
        "workflow": {
            "name": "wf",
            "groups": [
                {"name": "w", "tasks": [task("tw")]},
                {"name": "x", "tasks": [task("tx", inputs=[{"task": "tz"}, {"task": "tw"}])]},
                {"name": "y", "tasks": [task("ty", inputs=[{"task": "tx"}])]},
                {"name": "z", "tasks": [task("tz", inputs=[{"task": "ty"}])]},
            ],
        }
    }

    # when
    errors = errors_of(source)

    # then
    assert errors == [("workflow.groups", "task groups depend on each other in a cycle: x -> y -> z -> x")]


def test_requests_must_fit_a_node_shape_of_the_pool() -> None:
    # given
    pool = PoolContext(name="mixed", keys=KEYS, node_capacities=(GB200, (0, 64_000, 256 * GI, TI)))
    source = spec_with(
        resources={
            "default": {"gpu": 4, "cpu": 16, "memory": "64Gi"},
            "fat": {"gpu": 4, "cpu": 200},
            "cpu-only": {"cpu": "64", "memory": "256Gi", "storage": "1Ti"},
            "greedy": {"gpu": 1, "memory": "961Gi"},
        }
    )

    # when
    errors = errors_of(source, pool)

    # then
    shapes = "gpu 4, cpu 144, memory 960Gi, storage 4Ti; gpu 0, cpu 64, memory 256Gi, storage 1Ti"
    assert errors == [
        (
            "workflow.resources.fat",
            f"resource 'fat' requests gpu 4, cpu 200, memory 0, storage 0, which fits no node of pool 'mixed' "
            f"(node shapes: {shapes})",
        ),
        (
            "workflow.resources.greedy",
            f"resource 'greedy' requests gpu 1, cpu 0, memory 961Gi, storage 0, which fits no node of pool 'mixed' "
            f"(node shapes: {shapes})",
        ),
    ]


def test_fit_check_is_skipped_without_node_capacities() -> None:
    # given
    pool = PoolContext(name="nvl72", keys=KEYS)
    source = spec_with(resources={"default": {"gpu": 1000}})

    # when
    spec = parse_workflow(source, pool=pool)

    # then
    assert spec.groups[0].tasks[0].resource_spec.gpu == 1000


def test_one_bad_quantity_does_not_hide_topology_errors_elsewhere() -> None:
    # given
    source = {
        "workflow": {
            "name": "wf",
            "groups": [{"name": "g", "tasks": [task("a", lead=True, resource="r1"), task("b", resource="r2")]}],
            "resources": {
                "r1": {"gpu": "x", "topology": [{"key": "zone", "group": "z"}]},
                "r2": {"gpu": 1, "topology": [{"key": "zone", "group": "z", "requirementType": "preferred"}]},
            },
        }
    }

    # when
    errors = errors_of(source)

    # then
    assert [path for path, _message in errors] == ["workflow.groups[0]", "workflow.resources.r1.gpu"]
