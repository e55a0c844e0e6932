"""The spec semantics' numbered cases (1-14), one or more flat tests per case.

Pool keys are zone > spine > rack > gpu-clique unless a case says otherwise. Trees are asserted
as exact outlines or exact JSON; errors as exact (path, message) lists.
"""

from __future__ import annotations

from typing import Any

import pytest

from workflows.spec import (
    ConstraintTree,
    PoolContext,
    SpecInvalidError,
    TopologyEntry,
    WorkflowSpec,
    build_tree,
    parse_workflow,
    tree_to_json,
    tree_to_outline,
)

KEYS = ("zone", "spine", "rack", "gpu-clique")
GI = 2**30
NVL72 = PoolContext(name="nvl72", keys=KEYS, node_capacities=((4, 144_000, 960 * GI, 4 * 2**40),))


def task(name: str, resource: str | None = None, *, lead: bool = False) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name, "image": "nvcr.io/nvidia/pytorch:24.03-py3", "command": ["torchrun"]}
    if resource is not None:
        body["resource"] = resource
    if lead:
        body["lead"] = True
    return body


def topo(*entries: tuple[str, ...]) -> list[dict[str, str]]:
    """``("zone",)``, ``("zone", "g")`` or ``("zone", "g", "preferred")`` -> topology entries."""
    result = []
    for entry in entries:
        item = {"key": entry[0]}
        if len(entry) > 1:
            item["group"] = entry[1]
        if len(entry) > 2:
            item["requirementType"] = entry[2]
        result.append(item)
    return result


def resource(*entries: tuple[str, ...], gpu: int = 4) -> dict[str, Any]:
    return {"gpu": gpu, "cpu": 16, "memory": "64Gi", "topology": topo(*entries)}


def workflow(groups: dict[str, list[dict[str, Any]]], resources: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"name": "wf", "groups": [{"name": name, "tasks": tasks} for name, tasks in groups.items()]}
    if resources is not None:
        body["resources"] = resources
    return {"workflow": body}


def errors_of(source: object, pool: PoolContext = NVL72) -> list[tuple[str, str]]:
    with pytest.raises(SpecInvalidError) as caught:
        parse_workflow(source, pool=pool)
    return [(error.path, error.message) for error in caught.value.errors]


def tree_of(spec: WorkflowSpec, group: str = "group1") -> ConstraintTree:
    return spec.group(group).tree


# -- case 1: no topology anywhere -> a plain gang ----------------------------------------------------


@pytest.mark.parametrize(
    "resources",
    [
        pytest.param({"r": {"gpu": 4}}, id="_case_no_topology_field"),
        pytest.param({"r": {"gpu": 4, "topology": []}}, id="_case_empty_topology_list"),
    ],
)
def test_case_01_no_topology_is_a_plain_gang(resources: dict[str, Any]) -> None:
    # given
    source = workflow({"group1": [task("c", "r"), task("a", "r", lead=True), task("b", "r")]}, resources)

    # when
    spec = parse_workflow(source, pool=NVL72)

    # then
    tree = tree_of(spec)
    assert tree == ConstraintTree(group="group1", children=(), tasks=("a", "b", "c"), keys=KEYS)
    assert not tree.is_constrained
    assert tree_to_json(tree) == {"group": "group1", "keys": list(KEYS), "tasks": ["a", "b", "c"], "children": []}
    assert tree_to_outline(tree) == "group1\n└─ (no topology): a, b, c"


def test_case_01_no_resources_section_uses_implicit_empty_default() -> None:
    # given
    source = workflow({"group1": [task("a", lead=True), task("b")]})

    # when
    spec = parse_workflow(source, pool=NVL72)

    # then
    assert [t.resource_spec.requests() for t in spec.tasks()] == [{"gpu": 0, "cpu": 0, "memory": 0, "storage": 0}] * 2
    assert tree_to_outline(tree_of(spec)) == "group1\n└─ (no topology): a, b"


# -- case 2: four tasks, gpu-clique, default group -> one required node of 4 -------------------------


def test_case_02_default_group_gives_one_gpu_clique_node() -> None:
    # given
    tasks = [task(f"shard{i}", lead=i == 1) for i in (3, 1, 4, 2)]
    source = workflow({"group1": tasks}, {"default": resource(("gpu-clique",))})

    # when
    spec = parse_workflow(source, pool=NVL72)

    # then
    assert tree_to_json(tree_of(spec)) == {
        "group": "group1",
        "keys": ["zone", "spine", "rack", "gpu-clique"],
        "tasks": [],
        "children": [
            {
                "key": "gpu-clique",
                "group": "default",
                "path": [["gpu-clique", "default"]],
                "requirement": "required",
                "display_name": "default",
                "tasks": ["shard1", "shard2", "shard3", "shard4"],
                "children": [],
            }
        ],
    }


# -- case 3: two groups at gpu-clique, tasks interleaved -> two sibling nodes of 4 -------------------


def test_case_03_two_gpu_clique_groups_with_interleaved_tasks() -> None:
    # given
    tasks = []
    for i in range(1, 5):
        tasks += [task(f"model2-shard{i}", "model-2"), task(f"model1-shard{i}", "model-1", lead=i == 1)]
    resources = {
        "model-1": resource(("gpu-clique", "model-1-group")),
        "model-2": resource(("gpu-clique", "model-2-group")),
    }

    # when
    spec = parse_workflow(workflow({"group1": tasks}, resources), pool=NVL72)

    # then
    assert tree_to_outline(tree_of(spec)) == (
        "group1\n"
        "├─ gpu-clique=model-1-group (required): model1-shard1, model1-shard2, model1-shard3, model1-shard4\n"
        "└─ gpu-clique=model-2-group (required): model2-shard1, model2-shard2, model2-shard3, model2-shard4"
    )


# -- case 4: seed "Multiple NVL72 Racks in Same Zone", gpu-clique listed before zone ----------------


def _same_zone_source(*, clique_first: bool) -> dict[str, Any]:
    tasks = [task(f"model{m}-shard{i}", f"model-{m}", lead=(m, i) == (1, 1)) for m in (1, 2) for i in range(1, 5)]
    resources = {}
    for m in (1, 2):
        entries = [("gpu-clique", f"model-{m}-group"), ("zone", "workflow-group")]
        resources[f"model-{m}"] = resource(*(entries if clique_first else entries[::-1]))
    return workflow({"group1": tasks}, resources)


def test_case_04_same_zone_yaml_order_is_irrelevant() -> None:
    # given
    clique_first = _same_zone_source(clique_first=True)
    zone_first = _same_zone_source(clique_first=False)

    # when
    tree = tree_of(parse_workflow(clique_first, pool=NVL72))

    # then
    assert tree == tree_of(parse_workflow(zone_first, pool=NVL72))
    shards = {m: [f"model{m}-shard{i}" for i in range(1, 5)] for m in (1, 2)}
    assert tree_to_json(tree) == {
        "group": "group1",
        "keys": list(KEYS),
        "tasks": [],
        "children": [
            {
                "key": "zone",
                "group": "workflow-group",
                "path": [["zone", "workflow-group"]],
                "requirement": "required",
                "display_name": "workflow-group",
                "tasks": [],
                "children": [
                    {
                        "key": "gpu-clique",
                        "group": f"model-{m}-group",
                        "path": [["zone", "workflow-group"], ["gpu-clique", f"model-{m}-group"]],
                        "requirement": "required",
                        "display_name": f"workflow-group/model-{m}-group",
                        "tasks": shards[m],
                        "children": [],
                    }
                    for m in (1, 2)
                ],
            }
        ],
    }


def test_case_04_resource_topology_is_stored_in_pool_key_order() -> None:
    # given
    source = _same_zone_source(clique_first=True)

    # when
    spec = parse_workflow(source, pool=NVL72)

    # then
    model_1 = next(r for r in spec.resources if r.name == "model-1")
    assert model_1.topology == (
        TopologyEntry(key="zone", group="workflow-group", requirement="required"),
        TopologyEntry(key="gpu-clique", group="model-1-group", requirement="required"),
    )


# -- case 5: seed "Best-Effort Topology" -> same shape, every node preferred ------------------------


def test_case_05_best_effort_every_node_preferred() -> None:
    # given
    tasks = [task(f"model{m}-shard{i}", f"model-{m}", lead=(m, i) == (1, 1)) for m in (1, 2) for i in range(1, 5)]
    resources = {
        f"model-{m}": resource(("rack", f"model-{m}-group", "preferred"), ("spine", "workflow-group", "preferred"))
        for m in (1, 2)
    }

    # when
    spec = parse_workflow(workflow({"group1": tasks}, resources), pool=NVL72)

    # then
    tree = tree_of(spec)
    assert [node.requirement for node in tree.nodes()] == ["preferred", "preferred", "preferred"]
    assert tree_to_outline(tree) == (
        "group1\n"
        "└─ spine=workflow-group (preferred)\n"
        "   ├─ rack=model-1-group (preferred): model1-shard1, model1-shard2, model1-shard3, model1-shard4\n"
        "   └─ rack=model-2-group (preferred): model2-shard1, model2-shard2, model2-shard3, model2-shard4"
    )


# -- case 6: reused group names do not imply co-location -------------------------------------------


def test_case_06_reused_rack_group_under_two_zones_is_two_nodes() -> None:
    # given
    tasks = [
        task("task-1", "rack-a", lead=True),
        task("task-2", "rack-a"),
        task("task-3", "rack-b1"),
        task("task-4", "rack-b2"),
    ]
    resources = {
        "rack-a": resource(("zone", "zone-a"), ("rack", "rack-group-1")),
        "rack-b1": resource(("zone", "zone-b"), ("rack", "rack-group-1")),
        "rack-b2": resource(("zone", "zone-b"), ("rack", "rack-group-2")),
    }

    # when
    spec = parse_workflow(workflow({"group1": tasks}, resources), pool=NVL72)

    # then
    tree = tree_of(spec)
    rack_nodes = [(node.path, node.tasks) for node in tree.nodes() if node.key == "rack"]
    assert rack_nodes == [
        ((("zone", "zone-a"), ("rack", "rack-group-1")), ("task-1", "task-2")),
        ((("zone", "zone-b"), ("rack", "rack-group-1")), ("task-3",)),
        ((("zone", "zone-b"), ("rack", "rack-group-2")), ("task-4",)),
    ]
    assert tree_to_outline(tree) == (
        "group1\n"
        "├─ zone=zone-a (required)\n"
        "│  └─ rack=rack-group-1 (required): task-1, task-2\n"
        "└─ zone=zone-b (required)\n"
        "   ├─ rack=rack-group-1 (required): task-3\n"
        "   └─ rack=rack-group-2 (required): task-4"
    )


# -- case 7: zone R + rack P shared by all tasks -> both levels kept ------------------------------


def test_case_07_required_zone_above_preferred_rack_is_kept() -> None:
    # given
    tasks = [task("a", lead=True), task("b"), task("c")]
    source = workflow({"group1": tasks}, {"default": resource(("rack", "default", "preferred"), ("zone",))})

    # when
    spec = parse_workflow(source, pool=NVL72)

    # then
    assert tree_to_outline(tree_of(spec)) == (
        "group1\n└─ zone=default (required)\n   └─ rack=default (preferred): a, b, c"
    )
    assert [(node.key, node.requirement) for node in tree_of(spec).nodes()] == [
        ("zone", "required"),
        ("rack", "preferred"),
    ]


# -- case 8: tasks sharing a node disagree on requirementType -> error -----------------------------


def test_case_08_requirement_disagreement_names_key_group_and_tasks() -> None:
    # given
    tasks = [task("a", "hard", lead=True), task("b", "soft"), task("c", "hard"), task("d", "soft")]
    resources = {
        "hard": resource(("zone", "z1"), ("rack", "r1")),
        "soft": resource(("zone", "z1", "preferred"), ("rack", "r1")),
    }

    # when
    errors = errors_of(workflow({"group1": tasks}, resources))

    # then
    assert errors == [
        (
            "workflow.groups[0]",
            "tasks of group 'group1' share the topology node key 'zone', group 'z1' but disagree on its "
            "requirementType: required by a, c; preferred by b, d",
        )
    ]


def test_case_08_disagreement_on_a_nested_node_names_its_ancestors() -> None:
    # given
    tasks = [task("a", "hard", lead=True), task("b", "soft")]
    resources = {
        "hard": resource(("zone", "z1"), ("rack", "r1")),
        "soft": resource(("zone", "z1"), ("rack", "r1", "preferred")),
    }

    # when
    errors = errors_of(workflow({"group1": tasks}, resources))

    # then
    assert errors == [
        (
            "workflow.groups[0]",
            "tasks of group 'group1' share the topology node key 'rack', group 'r1' (under zone=z1) but disagree "
            "on its requirementType: required by a; preferred by b",
        )
    ]


def test_case_08_same_group_name_under_different_ancestors_may_differ() -> None:
    # given
    tasks = [task("a", "hard", lead=True), task("b", "soft")]
    resources = {
        "hard": resource(("zone", "z1"), ("rack", "r1")),
        "soft": resource(("zone", "z2"), ("rack", "r1", "preferred")),
    }

    # when
    spec = parse_workflow(workflow({"group1": tasks}, resources), pool=NVL72)

    # then
    assert [(node.display_name, node.requirement) for node in tree_of(spec).nodes()] == [
        ("z1", "required"),
        ("z1/r1", "required"),
        ("z2", "required"),
        ("z2/r1", "preferred"),
    ]


# -- case 9: hyphenated group names that collide when joined -> distinct nodes --------------------


def test_case_09_hyphenated_names_colliding_when_joined_stay_distinct() -> None:
    # given: zone a-b + rack c and zone a + rack b-c both join to "a-b-c"
    tasks = [task("t1", "r1", lead=True), task("t2", "r2")]
    resources = {"r1": resource(("zone", "a-b"), ("rack", "c")), "r2": resource(("zone", "a"), ("rack", "b-c"))}

    # when
    spec = parse_workflow(workflow({"group1": tasks}, resources), pool=NVL72)

    # then
    assert [(node.path, node.tasks) for node in tree_of(spec).nodes()] == [
        ((("zone", "a"),), ()),
        ((("zone", "a"), ("rack", "b-c")), ("t2",)),
        ((("zone", "a-b"),), ()),
        ((("zone", "a-b"), ("rack", "c")), ("t1",)),
    ]


def test_case_09_zone_a_b_versus_zone_a_rack_b_builds_distinct_nodes() -> None:
    # given: "a-b" alone and "a" + "b" join to the same string
    entries = {
        "t1": (TopologyEntry("zone", "a-b"),),
        "t2": (TopologyEntry("rack", "b"), TopologyEntry("zone", "a")),
    }

    # when
    tree = build_tree("group1", entries.items(), KEYS)

    # then
    assert tree_to_outline(tree) == (
        "group1\n├─ zone=a (required)\n│  └─ rack=b (required): t2\n└─ zone=a-b (required): t1"
    )


def test_case_09_zone_a_b_versus_zone_a_rack_b_in_a_spec_is_a_key_set_error_not_a_crash() -> None:
    # given
    tasks = [task("t1", "r1", lead=True), task("t2", "r2")]
    resources = {"r1": resource(("zone", "a-b")), "r2": resource(("zone", "a"), ("rack", "b"))}

    # when
    errors = errors_of(workflow({"group1": tasks}, resources))

    # then
    assert errors == [
        (
            "workflow.resources",
            "all tasks must use the same topology keys, but they use 2 different key sets: "
            "[zone] (e.g. task 't1' with resource 'r1'); [zone, rack] (e.g. task 't2' with resource 'r2')",
        )
    ]


# -- case 10: a task without topology beside tasks with it ----------------------------------------


def test_case_10_task_without_topology_is_in_the_gang_unconstrained() -> None:
    # given
    tasks = [task("loader", "plain"), task("shard1", "clique", lead=True), task("shard2", "clique")]
    resources = {"plain": {"cpu": 2}, "clique": resource(("gpu-clique", "g"))}

    # when
    spec = parse_workflow(workflow({"group1": tasks}, resources), pool=NVL72)

    # then
    tree = tree_of(spec)
    assert tree.tasks == ("loader",)
    assert tree.all_tasks() == ("loader", "shard1", "shard2")
    assert tree_to_outline(tree) == ("group1\n├─ (no topology): loader\n└─ gpu-clique=g (required): shard1, shard2")


# -- case 11: different key sets -> error listing the key sets in a stable order -----------------


def test_case_11_different_key_sets_are_rejected_with_a_stable_message() -> None:
    # given
    forward = [task("a", "zone-rack", lead=True), task("b", "zone-rack"), task("c", "zone-only"), task("d", "spine")]
    resources = {
        "zone-rack": resource(("rack",), ("zone",)),
        "zone-only": resource(("zone",)),
        "spine": resource(("spine",)),
    }
    expected = [
        (
            "workflow.resources",
            "all tasks must use the same topology keys, but they use 3 different key sets: "
            "[zone] (e.g. task 'c' with resource 'zone-only'); "
            "[zone, rack] (e.g. task 'a' with resource 'zone-rack'); "
            "[spine] (e.g. task 'd' with resource 'spine')",
        )
    ]

    # when
    errors_forward = errors_of(workflow({"group1": forward}, resources))
    errors_reversed = errors_of(workflow({"group1": forward[::-1]}, dict(reversed(resources.items()))))

    # then
    assert errors_forward == expected
    assert errors_reversed == expected


# -- case 12: unknown keys, in any resource; any key on a pool without keys -----------------------


def test_case_12_unknown_key_in_used_and_unused_resources() -> None:
    # given
    tasks = [task("a", "used", lead=True)]
    resources = {"used": resource(("gpu_clique",)), "unused": resource(("zone",), ("row", "r"))}

    # when
    errors = errors_of(workflow({"group1": tasks}, resources))

    # then
    assert errors == [
        (
            "workflow.resources.unused.topology[1].key",
            "unknown topology key 'row' in resource 'unused': pool 'nvl72' has keys zone, spine, rack, gpu-clique",
        ),
        (
            "workflow.resources.used.topology[0].key",
            "unknown topology key 'gpu_clique' in resource 'used': pool 'nvl72' has keys zone, spine, rack, gpu-clique",
        ),
    ]


def test_case_12_any_key_on_a_pool_without_keys() -> None:
    # given
    flat_pool = PoolContext(name="cpu-pool", keys=())
    source = workflow({"group1": [task("a", lead=True)]}, {"default": resource(("zone",))})

    # when
    errors = errors_of(source, pool=flat_pool)

    # then
    assert errors == [
        (
            "workflow.resources.default.topology[0].key",
            "topology key 'zone' in resource 'default' cannot be used: pool 'cpu-pool' has no topology keys",
        )
    ]


def test_case_12_pool_without_keys_accepts_specs_without_topology() -> None:
    # given
    flat_pool = PoolContext(name="cpu-pool", keys=())
    source = workflow({"group1": [task("a", lead=True), task("b")]}, {"default": {"cpu": 1}})

    # when
    spec = parse_workflow(source, pool=flat_pool)

    # then
    assert tree_of(spec) == ConstraintTree(group="group1", tasks=("a", "b"), keys=())


def test_case_12_top_level_resources_report_top_level_paths() -> None:
    # given
    source = workflow({"group1": [task("a", lead=True)]})
    source["resources"] = {"default": resource(("rak",))}

    # when
    errors = errors_of(source)

    # then
    assert errors == [
        (
            "resources.default.topology[0].key",
            "unknown topology key 'rak' in resource 'default': pool 'nvl72' has keys zone, spine, rack, gpu-clique",
        )
    ]


# -- case 13: same key twice; unknown fields; bad requirementType --------------------------------


def test_case_13_same_key_twice_in_one_resource() -> None:
    # given
    source = workflow(
        {"group1": [task("a", lead=True)]}, {"default": resource(("zone", "x"), ("rack",), ("zone", "y"))}
    )

    # when
    errors = errors_of(source)

    # then
    assert errors == [
        (
            "workflow.resources.default.topology[2].key",
            "topology key 'zone' appears more than once in resource 'default' (also at topology[0]); "
            "use each key at most once",
        )
    ]


def test_case_13_unknown_fields_at_every_level() -> None:
    # given
    source = workflow({"group1": [task("a", lead=True)]}, {"default": resource(("zone",))})
    source["extra"] = 1
    source["workflow"]["priority"] = "HIGH"
    source["workflow"]["groups"][0]["retries"] = 3
    source["workflow"]["groups"][0]["tasks"][0]["securityContext"] = {}
    source["workflow"]["resources"]["default"]["gpuType"] = "h100"
    source["workflow"]["resources"]["default"]["topology"][0]["weight"] = 2

    # when
    errors = errors_of(source)

    # then
    assert errors == [
        ("extra", "unknown field 'extra'; expected one of: default-values, resources, version, workflow"),
        (
            "workflow.groups[0].retries",
            "unknown field 'retries'; expected one of: barrier, ignoreNonleadStatus, name, tasks",
        ),
        (
            "workflow.groups[0].tasks[0].securityContext",
            "unknown field 'securityContext'; expected one of: args, checkpoint, command, credentials, "
            "environment, exitActions, files, hostNetwork, image, inputs, lead, name, outputs, privileged, "
            "resource, volumeMounts",
        ),
        (
            "workflow.priority",
            "unknown field 'priority'; expected one of: groups, labels, name, pool, resources, tasks, timeout",
        ),
        (
            "workflow.resources.default.gpuType",
            "unknown field 'gpuType'; expected one of: cpu, gpu, memory, nodesExcluded, platform, storage, topology",
        ),
        (
            "workflow.resources.default.topology[0].weight",
            "unknown field 'weight'; expected one of: group, key, requirementType",
        ),
    ]


def test_case_14_omitted_group_equals_group_default() -> None:
    # given
    omitted = workflow({"group1": [task("a", lead=True), task("b")]}, {"default": resource(("rack",))})
    explicit = workflow({"group1": [task("a", lead=True), task("b")]}, {"default": resource(("rack", "default"))})

    # when
    tree_omitted = tree_of(parse_workflow(omitted, pool=NVL72))

    # then
    assert tree_omitted == tree_of(parse_workflow(explicit, pool=NVL72))
    assert tree_to_outline(tree_omitted) == "group1\n└─ rack=default (required): a, b"


def test_case_14_non_adjacent_levels_build_a_two_level_tree() -> None:
    # given
    source = workflow(
        {"group1": [task("a", "m", lead=True), task("b", "m")]},
        {"m": resource(("gpu-clique", "c1"), ("zone", "z1", "preferred"))},
    )

    # when
    spec = parse_workflow(source, pool=NVL72)

    # then
    assert tree_to_outline(tree_of(spec)) == ("group1\n└─ zone=z1 (preferred)\n   └─ gpu-clique=c1 (required): a, b")


def test_case_14_co_location_is_scoped_to_one_task_group() -> None:
    # given: both groups name zone group "shared"; each group gets its own tree
    source = workflow(
        {"train": [task("t1", lead=True), task("t2")], "eval": [task("e1", lead=True)]},
        {"default": resource(("zone", "shared"))},
    )

    # when
    spec = parse_workflow(source, pool=NVL72)

    # then
    assert tree_to_outline(spec.group("train").tree) == "train\n└─ zone=shared (required): t1, t2"
    assert tree_to_outline(spec.group("eval").tree) == "eval\n└─ zone=shared (required): e1"


def test_case_14_key_set_uniformity_is_checked_across_task_groups() -> None:
    # given
    source = workflow(
        {"train": [task("t1", "zone-rack", lead=True)], "eval": [task("e1", "zone-only", lead=True)]},
        {"zone-rack": resource(("zone",), ("rack",)), "zone-only": resource(("zone",))},
    )

    # when
    errors = errors_of(source)

    # then
    assert errors == [
        (
            "workflow.resources",
            "all tasks must use the same topology keys, but they use 2 different key sets: "
            "[zone] (e.g. task 'e1' with resource 'zone-only'); "
            "[zone, rack] (e.g. task 't1' with resource 'zone-rack')",
        )
    ]


def test_case_14_requirement_agreement_is_scoped_to_one_task_group() -> None:
    # given: the same (zone, shared) node is required in one group and preferred in the other
    source = workflow(
        {"train": [task("t1", "hard", lead=True)], "eval": [task("e1", "soft", lead=True)]},
        {"hard": resource(("zone", "shared")), "soft": resource(("zone", "shared", "preferred"))},
    )

    # when
    spec = parse_workflow(source, pool=NVL72)

    # then
    assert [node.requirement for node in spec.group("train").tree.nodes()] == ["required"]
    assert [node.requirement for node in spec.group("eval").tree.nodes()] == ["preferred"]
