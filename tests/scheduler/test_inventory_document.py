"""The pure inventory package (docs/design.md §7): document loading and validation, rendering, synthetic pools
and the Kubernetes node mapping. No database."""

from __future__ import annotations

import json

import pytest
import yaml

from parsing import ErrorList, PathError
from scheduler.inventory import (
    GENERATED_KEYS,
    Inventory,
    InventoryInvalidError,
    KeySpec,
    NodeSpec,
    PoolShape,
    inventory_document,
    inventory_dump,
    kubernetes_node_to_spec,
    load_inventory_text,
    node_inventory_entry,
    node_list_arguments,
    node_list_page,
    parse_inventory,
    parse_node_spec,
    pool_generate_inventory,
    topology_keys_validate,
)
from scheduler.inventory import document as inventory_document_module
from tests.scheduler.conftest import FIXTURES, GIB, KEYS, alias_bomb_inventory, node_entry

TIB = 1024 * GIB


def errors_of(document: object) -> tuple[str, list[tuple[str, str]]]:
    with pytest.raises(InventoryInvalidError) as caught:
        parse_inventory(document)
    return caught.value.message, [(error.path, error.message) for error in caught.value.errors]


# ------------------------------------------------------------------------------------------------
# Validation
# ------------------------------------------------------------------------------------------------
def test_valid_document_becomes_frozen_values_in_base_units():
    # given
    document = {
        "pool": {"name": "small", "description": "test pool", "backend": "kubernetes", "sim_task_seconds": 3},
        "topology_keys": KEYS,
        "nodes": [
            node_entry("a1", "a", "r1", used_gpu=2),
            {"name": "loose", "capacity": {"gpu": 1, "cpu": "500m"}, "schedulable": False},
        ],
    }

    # when
    inventory = parse_inventory(document)

    # then
    assert inventory == Inventory(
        name="small",
        pool_fields={"description": "test pool", "backend": "kubernetes", "sim_task_seconds": 3.0},
        keys=(KeySpec("zone", "topology.kubernetes.io/zone"), KeySpec("rack", "topology.kubernetes.io/rack")),
        nodes=(
            NodeSpec(
                name="a1",
                labels={"topology.kubernetes.io/zone": "a", "topology.kubernetes.io/rack": "r1"},
                gpu=8,
                cpu_millis=32_000,
                memory_bytes=256 * GIB,
                storage_bytes=TIB,
                used_gpu=2,
            ),
            NodeSpec(name="loose", labels={}, gpu=1, cpu_millis=500, schedulable=False),
        ),
    )


def test_document_without_topology_keys_leaves_the_keys_alone():
    # when
    inventory = parse_inventory({"pool": {"name": "p"}})

    # then
    assert (inventory.keys, inventory.nodes, inventory.pool_fields) == (None, (), {})


def test_every_problem_is_reported_in_document_order_with_its_path():
    # given: one problem in each section
    document = {
        "pool": {"name": "p", "backend": "slurm"},
        "topology_keys": [*KEYS, {"key": "Rack_2", "label": "x/rack2"}],
        "nodes": [node_entry("n0", "a", "r1"), node_entry("n1", "a", "r1", used_gpu=9), node_entry("n0", "a", "r1")],
    }

    # when
    message, errors = errors_of(document)

    # then
    assert message == "The pool inventory is invalid."
    assert errors == [
        ("pool.backend", "must be one of: simulated, kubernetes, local"),
        (
            "topology_keys[2].key",
            "key 'Rack_2' is not valid: use lowercase letters, digits and inner hyphens, e.g. gpu-clique",
        ),
        ("nodes[1].allocated.gpu", "allocated gpu (9) exceeds the node's capacity (8)"),
        ("nodes[2].name", "node 'n0' is already listed at nodes[0]"),
    ]


@pytest.mark.parametrize(
    ("_case", "document", "expected"),
    [
        ("_case_not_a_mapping", ["pool"], [("", "must be a mapping, got list")]),
        (
            "_case_label_key_with_dots",
            {"pool": {"name": "p"}, "nodes": [{"name": "n", "labels": {"a b": "x"}, "capacity": {}}]},
            [('nodes[0].labels["a b"]', "'a b' is not a valid label key (e.g. topology.kubernetes.io/zone)")],
        ),
        (
            "_case_huge_yaml_integer",
            {"pool": {"name": "p"}, "nodes": [{"name": "n", "capacity": {"gpu": 2**5000}}]},
            [("nodes[0].capacity.gpu", "gpu is far too large")],
        ),
        (
            "_case_nul_in_description",
            {"pool": {"name": "p", "description": "a\x00b"}},
            [("pool.description", "must not contain NUL characters or unpaired surrogates")],
        ),
    ],
)
def test_invalid_documents_name_the_place(_case, document, expected):
    # when
    _message, errors = errors_of(document)

    # then
    assert errors == expected


def test_node_entry_alone_raises_with_the_node_message():
    # when
    with pytest.raises(InventoryInvalidError) as caught:
        parse_node_spec({"name": "n1", "capacity": {"gpu": "lots"}}, "")

    # then
    assert caught.value.message == "The node is invalid."
    assert caught.value.to_list() == [
        {
            "path": "capacity.gpu",
            "message": "invalid gpu quantity 'lots'; expected a non-negative number with an optional Kubernetes "
            "suffix, e.g. 4, 500m, 1.5, 64Gi, 2e3",
        }
    ]


def test_node_entry_problems_go_to_the_callers_list_even_when_it_is_empty():
    # given: an empty list is falsy; it must still be the list written to
    errors = ErrorList()

    # when
    spec = parse_node_spec({"name": "-bad-", "capacity": {}}, "nodes[4]", errors)

    # then
    assert spec is None
    assert errors.errors == [
        PathError("nodes[4].name", "node name '-bad-' is not valid: use letters, digits, '.', '_' and inner hyphens")
    ]


def test_topology_keys_accept_key_specs_and_report_duplicates():
    # when
    specs, errors = topology_keys_validate([KeySpec("zone", "z/zone"), {"key": "zone", "label": "z/zone"}])

    # then
    assert specs == [KeySpec("zone", "z/zone")]
    assert errors == [
        {"path": "topology_keys[1].key", "message": "key 'zone' is already used by topology_keys[0]"},
        {"path": "topology_keys[1].label", "message": "label 'z/zone' is already used by topology_keys[0]"},
    ]


def test_name_patterns_and_backends_match_the_models():
    # given: the models validate the same fields (database constraints); the pure package cannot import them
    from scheduler import models
    from scheduler.choices import DispatchBackend

    # then
    assert inventory_document_module.KEY_NAME_RE == models.KEY_NAME_RE
    assert inventory_document_module.POOL_NAME_RE == models.POOL_NAME_RE
    assert inventory_document_module.LABEL_KEY_RE == models.LABEL_KEY_RE
    assert inventory_document_module.NODE_NAME_RE == models.NODE_NAME_RE
    assert list(inventory_document_module.POOL_BACKENDS) == list(DispatchBackend.values)


# ------------------------------------------------------------------------------------------------
# Loading
# ------------------------------------------------------------------------------------------------
def test_yaml_text_loads_with_shared_capacity_through_aliases():
    # given: a file sharing one capacity mapping between its nodes
    text = (
        "pool: {name: p}\n"
        "nodes:\n"
        "- {name: n1, capacity: &cap {gpu: 8, cpu: 96, memory: 1Ti}}\n"
        "- {name: n2, capacity: *cap}\n"
    )

    # when
    inventory = parse_inventory(load_inventory_text(text))

    # then
    assert [(node.name, node.gpu, node.cpu_millis, node.memory_bytes) for node in inventory.nodes] == [
        ("n1", 8, 96_000, TIB),
        ("n2", 8, 96_000, TIB),
    ]


@pytest.mark.parametrize(
    ("_case", "text", "expected"),
    [
        ("_case_list", "- pool\n", "the inventory must be a mapping with a 'pool' key"),
        ("_case_empty", "", "the inventory is empty"),
        (
            "_case_python_tag",
            "pool: !!python/name:os.system x\n",
            "invalid YAML: tag 'tag:yaml.org,2002:python/name:os.system' is not allowed; use plain YAML or JSON "
            "values at line 1, column 7",
        ),
        (
            "_case_alias_bomb",
            alias_bomb_inventory(),
            "YAML aliases expand to more than 12800 values at line 7, column 8",
        ),
    ],
)
def test_unreadable_text_is_refused_with_the_loader_message(_case, text, expected):
    # when
    with pytest.raises(InventoryInvalidError) as caught:
        load_inventory_text(text)

    # then
    assert caught.value.message == "The pool inventory could not be read."
    assert caught.value.to_list() == [{"path": "", "message": expected}]


def shared_node_entries(label_count: int) -> str:
    """An anchored node entry of ``label_count + 5`` values (entry, name, labels, capacity, gpu) and
    100 aliases to it, one per line from line 4 on."""
    labels = ", ".join(f"example.com/l{index}: v" for index in range(label_count))
    lines = ["pool: {name: p}", "nodes:", f"- &node {{name: n, labels: {{{labels}}}, capacity: {{gpu: 1}}}}"]
    return "\n".join([*lines, *["- *node"] * 100]) + "\n"


def test_aliases_may_stand_for_100_node_entries_of_the_allowed_size():
    # given: 100 aliases, each standing for a node entry of 128 values (VALUES_PER_NODE)
    text = shared_node_entries(123)

    # when
    document = load_inventory_text(text)

    # then: loaded (the duplicate names are the validator's business)
    assert len(document["nodes"]) == 101
    assert len(document["nodes"][100]["labels"]) == 123


def test_aliases_standing_for_more_than_that_are_refused_at_the_alias_that_passes_the_bound():
    # given: entries of 129 values; 99 aliases stand for 12,771 values, the 100th passes 12,800
    text = shared_node_entries(124)

    # when
    with pytest.raises(InventoryInvalidError) as caught:
        load_inventory_text(text)

    # then
    assert caught.value.to_list() == [
        {"path": "", "message": "YAML aliases expand to more than 12800 values at line 103, column 3"}
    ]


# ------------------------------------------------------------------------------------------------
# Rendering and synthetic pools
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("output_format", ["yaml", "json"])
def test_generated_inventory_round_trips_through_the_document_and_text(output_format):
    # given
    inventory = pool_generate_inventory(name="syn", shape=PoolShape(nodes_per_clique=3, occupancy=0.5, seed=4))

    # when
    text = inventory_dump(inventory_document(inventory), output_format=output_format)
    again = parse_inventory(load_inventory_text(text))

    # then
    assert again == inventory


def test_generated_inventory_has_the_requested_shape_and_is_seeded():
    # given
    shape = PoolShape(zones=1, spines_per_zone=1, racks_per_spine=2, cliques_per_rack=2, nodes_per_clique=1)

    # when
    inventory = pool_generate_inventory(name="g", shape=shape)

    # then
    assert inventory.keys == GENERATED_KEYS
    assert inventory.pool_fields == {"description": "synthetic: 4 nodes x 4 GPUs"}
    assert [(node.name, node.labels["topology.kubernetes.io/rack"], node.labels["nvidia.com/gpu-clique"])
            for node in inventory.nodes] == [
        ("g-1", "rack-0001", "clique-rack-0001-c1"),
        ("g-2", "rack-0001", "clique-rack-0001-c2"),
        ("g-3", "rack-0002", "clique-rack-0002-c1"),
        ("g-4", "rack-0002", "clique-rack-0002-c2"),
    ]
    busy = PoolShape(nodes_per_clique=2, occupancy=0.5, seed=9)
    assert pool_generate_inventory(name="o", shape=busy) == pool_generate_inventory(name="o", shape=busy)


def test_node_entry_writes_allocated_only_when_used():
    # given
    idle = NodeSpec(name="i", labels={"b": "2", "a": "1"}, gpu=4, cpu_millis=1500, memory_bytes=GIB)
    busy = NodeSpec(name="b", labels={}, gpu=4, used_gpu=1, schedulable=False)

    # then
    assert node_inventory_entry(idle) == {
        "name": "i",
        "labels": {"a": "1", "b": "2"},
        "capacity": {"gpu": 4, "cpu": "1500m", "memory": "1Gi", "storage": 0},
        "schedulable": True,
    }
    assert node_inventory_entry(busy) == {
        "name": "b",
        "labels": {},
        "capacity": {"gpu": 4, "cpu": 0, "memory": 0, "storage": 0},
        "allocated": {"gpu": 1},
        "schedulable": False,
    }


def test_yaml_dump_uses_flow_mappings_for_small_leaves():
    # when
    text = inventory_dump({"pool": {"name": "p"}, "nodes": [{"name": "n", "capacity": {"gpu": 1}}]})

    # then
    assert text == "pool: {name: p}\nnodes:\n- name: n\n  capacity: {gpu: 1}\n"
    assert yaml.safe_load(text) == {"pool": {"name": "p"}, "nodes": [{"name": "n", "capacity": {"gpu": 1}}]}


# ------------------------------------------------------------------------------------------------
# Kubernetes
# ------------------------------------------------------------------------------------------------
def recorded_items() -> list[dict]:
    pages = [json.loads((FIXTURES / "k8s" / name).read_text()) for name in ("nodes-page-1.json", "nodes-page-2.json")]
    return [item for page in pages for item in page["items"]]


def test_recorded_nodes_map_to_specs():
    # given
    items = recorded_items()

    # when
    results = [kubernetes_node_to_spec(item, tolerated_taints=["nvidia.com/gpu"]) for item in items]

    # then: cordoned gpu-a2 and NoExecute-tainted gpu-b2 are unschedulable; the tolerated taint of gpu-b1
    # and the PreferNoSchedule taints do not count
    assert [(spec.name, spec.gpu, spec.cpu_millis, spec.schedulable) for spec, _reason in results] == [
        ("gpu-a1", 4, 143_500, True),
        ("gpu-a2", 4, 143_500, False),
        ("gpu-b1", 4, 143_500, True),
        ("gpu-b2", 4, 143_500, False),
        ("login-0", 0, 15_800, True),
    ]
    first, reason = results[0]
    assert reason is None
    assert (first.memory_bytes, first.storage_bytes) == (1006392860 * 1024, 3683282291043)
    assert first.labels["nvidia.com/gpu-clique"] == "cluster-uuid-1.1"


@pytest.mark.parametrize(
    ("_case", "item", "reason"),
    [
        ("_case_no_name", {"metadata": {}}, "invalid node name None"),
        (
            "_case_bad_quantity",
            {"metadata": {"name": "n"}, "status": {"allocatable": {"cpu": "lots"}}},
            "status.allocatable['cpu']: invalid cpu quantity 'lots'; expected a non-negative number with an "
            "optional Kubernetes suffix, e.g. 4, 500m, 1.5, 64Gi, 2e3",
        ),
    ],
)
def test_unusable_node_objects_give_a_reason(_case, item, reason):
    # when
    spec, got = kubernetes_node_to_spec(item)

    # then
    assert (spec, got) == (None, reason)


def test_node_list_paging_arguments_and_pages():
    # when
    first = node_list_arguments(label_selector=None, page_size=2, continue_token=None)
    second = node_list_arguments(label_selector="pool=a", page_size=2, continue_token="tok")
    middle = node_list_page(b'{"items": [{"metadata": {"name": "n"}}], "metadata": {"continue": "tok"}}')
    last = node_list_page('{"items": null, "metadata": {"continue": ""}}')

    # then
    assert first == {"limit": 2, "_preload_content": False}
    assert second == {"limit": 2, "_preload_content": False, "label_selector": "pool=a", "_continue": "tok"}
    assert (middle.items, middle.continue_token) == ([{"metadata": {"name": "n"}}], "tok")
    assert (last.items, last.continue_token) == ([], None)


@pytest.mark.parametrize(("_case", "fields", "expected"), [
    ("_case_seconds", {"min_runtime": 600, "fairshare_half_life": 3600, "sim_task_seconds": 2.5},
     {"min_runtime": 600, "fairshare_half_life": 3600, "sim_task_seconds": 2.5}),
    ("_case_spec_durations", {"min_runtime": "10m", "fairshare_half_life": "1h30m", "sim_task_seconds": "45s"},
     {"min_runtime": 600, "fairshare_half_life": 5400, "sim_task_seconds": 45.0}),
    ("_case_zero_spelt", {"min_runtime": "0s", "fairshare_half_life": "0"},
     {"min_runtime": 0, "fairshare_half_life": 0}),
    ("_case_seconds_as_text", {"min_runtime": "90"}, {"min_runtime": 90}),
])
def test_a_pools_durations_take_the_specs_duration_syntax(_case, fields, expected):
    """A papercut an operator met: `min_runtime: 10m` in a pool document (the spec's own syntax, as in
    `exec_timeout`) was refused as "must be a whole number of seconds"."""
    # when
    inventory = parse_inventory({"pool": {"name": "durations", **fields}})

    # then
    assert {name: inventory.pool_fields[name] for name in expected} == expected


def test_a_pools_duration_that_does_not_parse_or_is_too_long_names_its_field():
    # when
    with pytest.raises(InventoryInvalidError) as caught:
        parse_inventory({"pool": {"name": "durations", "min_runtime": "10 minutes", "fairshare_half_life": "400d"}})

    # then
    assert [error.path for error in caught.value.errors] == ["pool.min_runtime", "pool.fairshare_half_life"]
    assert "or a duration (45s, 10m, 2h, 1d or 1h30m" in caught.value.errors[0].message
