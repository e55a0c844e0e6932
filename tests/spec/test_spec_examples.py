"""The five examples of seed document 003, written out in ``examples/``, parse against the NVL72
pool and give the trees the seed describes."""

from __future__ import annotations

from pathlib import Path

import pytest

from workflows.spec import PoolContext, parse_workflow, tree_to_outline

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
GB200_NODE = (4, 144_000, 960 * 2**30, 4 * 2**40)
NVL72 = PoolContext(name="nvl72", keys=("zone", "spine", "rack", "gpu-clique"), node_capacities=(GB200_NODE,))
MODEL_1 = "model1-shard1, model1-shard2, model1-shard3, model1-shard4"
MODEL_2 = "model2-shard1, model2-shard2, model2-shard3, model2-shard4"


@pytest.mark.parametrize(
    ("filename", "outline"),
    [
        pytest.param(
            "single-nvl72-rack.yaml",
            f"group1\n└─ gpu-clique=default (required): {MODEL_1}",
            id="_case_single_nvl72_rack",
        ),
        pytest.param(
            "multiple-nvl72-racks.yaml",
            f"group1\n├─ gpu-clique=model-1-group (required): {MODEL_1}\n"
            f"└─ gpu-clique=model-2-group (required): {MODEL_2}",
            id="_case_multiple_nvl72_racks",
        ),
        pytest.param(
            "multiple-nvl72-same-zone.yaml",
            "group1\n└─ zone=workflow-group (required)\n"
            f"   ├─ gpu-clique=model-1-group (required): {MODEL_1}\n"
            f"   └─ gpu-clique=model-2-group (required): {MODEL_2}",
            id="_case_multiple_nvl72_same_zone",
        ),
        pytest.param(
            "best-effort-topology.yaml",
            "group1\n└─ spine=workflow-group (preferred)\n"
            f"   ├─ rack=model-1-group (preferred): {MODEL_1}\n"
            f"   └─ rack=model-2-group (preferred): {MODEL_2}",
            id="_case_best_effort_topology",
        ),
        pytest.param(
            "scoped-group-example.yaml",
            "group1\n├─ zone=zone-a (required)\n│  └─ rack=rack-group-1 (required): task-1, task-2\n"
            "└─ zone=zone-b (required)\n   ├─ rack=rack-group-1 (required): task-3\n"
            "   └─ rack=rack-group-2 (required): task-4",
            id="_case_scoped_group_example",
        ),
    ],
)
def test_seed_example_parses_to_the_seed_tree(filename: str, outline: str) -> None:
    # given
    source = (EXAMPLES / filename).read_bytes()

    # when
    spec = parse_workflow(source, pool=NVL72)

    # then
    assert spec.name == filename.removesuffix(".yaml")
    assert [group.name for group in spec.groups] == ["group1"]
    assert tree_to_outline(spec.groups[0].tree) == outline
    group = spec.groups[0]
    assert [task.name for task in group.tasks if task.lead] == [group.tasks[0].name]
    assert {task.resource_spec.as_tuple() for task in group.tasks} == {(4, 16_000, 64 * 2**30, 100 * 2**30)}
    assert all(
        task.image == "nvcr.io/nvidia/pytorch:24.03-py3" and task.command == ("torchrun",) for task in group.tasks
    )


def test_examples_directory_holds_exactly_the_five_seed_examples() -> None:
    # given
    expected = {
        "best-effort-topology.yaml",
        "multiple-nvl72-racks.yaml",
        "multiple-nvl72-same-zone.yaml",
        "scoped-group-example.yaml",
        "single-nvl72-rack.yaml",
    }

    # when
    found = {path.name for path in EXAMPLES.glob("*.yaml")}

    # then
    assert found == expected


def test_same_zone_example_lists_gpu_clique_before_zone_as_the_seed_does() -> None:
    # given
    text = (EXAMPLES / "multiple-nvl72-same-zone.yaml").read_text()

    # when
    clique_at = text.index("- key: gpu-clique")
    zone_at = text.index("- key: zone")

    # then
    assert clique_at < zone_at
