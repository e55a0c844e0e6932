"""import_pool / export_pool: validation with paths, atomicity, idempotency, round trip."""

from __future__ import annotations

import io
import json

import pytest
import yaml
from django.core.management import CommandError, call_command

from osmo.errors import ValidationFailedError
from scheduler.models import Node, Pool, TopologyKey
from scheduler.services import inventory_import, inventory_parse, pool_export
from tests.scheduler.conftest import EXAMPLES, GIB, KEYS, alias_bomb_inventory, node_entry

pytestmark = pytest.mark.django_db


def _write(tmp_path, document, name="pool.yaml") -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return str(path)


def _snapshot(pool_name: str) -> dict:
    pool = Pool.objects.get(name=pool_name)
    return {
        "pool": (pool.keys_version, pool.updated_at, pool.description),
        "keys": list(TopologyKey.objects.filter(pool=pool).order_by("position").values_list("pk", "key", "label")),
        "nodes": list(Node.objects.filter(pool=pool).order_by("name").values()),
    }


def test_import_of_the_example_pools_then_again_changes_nothing():
    # given
    out = io.StringIO()
    call_command("import_pool", str(EXAMPLES / "demo.yaml"), str(EXAMPLES / "nvl72.yaml"), stdout=out)
    before = {name: _snapshot(name) for name in ("demo", "nvl72")}

    # when
    again = io.StringIO()
    call_command("import_pool", str(EXAMPLES / "demo.yaml"), str(EXAMPLES / "nvl72.yaml"), stdout=again)

    # then
    assert "nodes 32 created" in out.getvalue() and "nodes 144 created" in out.getvalue()
    assert "pool demo: settings unchanged; keys unchanged; nodes 0 created, 0 updated, 32 unchanged" in again.getvalue()
    assert {name: _snapshot(name) for name in ("demo", "nvl72")} == before


def test_nvl72_example_has_the_seed_003_keys_and_gb200_nodes():
    call_command("import_pool", str(EXAMPLES / "nvl72.yaml"), verbosity=0)
    pool = Pool.objects.get(name="nvl72")

    assert [key.key for key in pool.topology_keys.order_by("position")] == ["zone", "spine", "rack", "gpu-clique"]
    assert pool.nodes.count() == 144
    node = pool.nodes.order_by("name").first()
    assert (node.gpu, node.cpu_millis, node.memory_bytes, node.storage_bytes) == (4, 144_000, 960 * GIB, 4 * 1024 * GIB)
    racks = {n.labels["topology.kubernetes.io/rack"] for n in pool.nodes.all()}
    assert len(racks) == 8
    for rack in racks:
        members = pool.nodes.filter(labels__contains={"topology.kubernetes.io/rack": rack})
        assert members.count() == 18
        assert len({n.labels["nvidia.com/gpu-clique"] for n in members}) == 1  # rack == gpu-clique


def test_export_then_import_round_trips(tmp_path, small_pool):
    # given
    exported = tmp_path / "small.yaml"
    call_command("export_pool", "small", "-o", str(exported), verbosity=0)
    before = _snapshot("small")

    # when: import the export into the same database, and into a fresh pool name
    call_command("import_pool", str(exported), verbosity=0)
    document = yaml.safe_load(exported.read_text())
    document["pool"]["name"] = "copy"
    call_command("import_pool", _write(tmp_path, document, "copy.yaml"), verbosity=0)

    # then
    assert _snapshot("small") == before
    copy = pool_export(Pool.objects.get(name="copy"))
    original = pool_export(small_pool)
    copy["pool"]["name"] = "small"
    assert copy == original
    assert original["nodes"][0] == {
        "name": "a1",
        "labels": {"topology.kubernetes.io/rack": "r1", "topology.kubernetes.io/zone": "a"},
        "capacity": {"gpu": 8, "cpu": 32, "memory": "256Gi", "storage": "1Ti"},
        "allocated": {"gpu": 2},
        "schedulable": True,
    }


def test_json_export_round_trips(tmp_path, small_pool):
    out = io.StringIO()
    call_command("export_pool", "small", "--format", "json", stdout=out)
    document = json.loads(out.getvalue())

    report = inventory_import(inventory_parse(document))

    assert (report.created, report.updated, report.unchanged, report.keys_changed) == (0, 0, 5, False)


def test_file_with_three_mistakes_reports_all_three_and_stores_nothing(tmp_path):
    # given: a valid pool with three mistakes in different places
    document = {
        "pool": {"name": "broken"},
        "topology_keys": [*KEYS, {"key": "Rack_2", "label": "x/rack2"}],
        "nodes": [
            node_entry("n0", "a", "r1"),
            node_entry("n1", "a", "r1"),
            node_entry("n2", "a", "r1", used_gpu=9),
            node_entry("n3", "a", "r1"),
        ],
    }
    document["nodes"][3]["capacity"]["gpu"] = "lots"
    path = _write(tmp_path, document)

    # when
    with pytest.raises(CommandError) as excinfo:
        call_command("import_pool", path, verbosity=0)

    # then
    message = str(excinfo.value)
    assert "3 problem(s), nothing imported" in message
    assert "topology_keys[2].key: key 'Rack_2' is not valid" in message
    assert "nodes[2].allocated.gpu: allocated gpu (9) exceeds the node's capacity (8)" in message
    assert "nodes[3].capacity.gpu: invalid gpu quantity 'lots'" in message
    assert not Pool.objects.filter(name="broken").exists()
    assert Node.objects.count() == 0


@pytest.mark.parametrize(
    ("_case", "mutate", "path", "fragment"),
    [
        ("_case_unknown_top_level", lambda d: d.update(extra=1), "extra", "unknown field"),
        ("_case_missing_pool", lambda d: d.pop("pool"), "pool", "required"),
        ("_case_bad_pool_name", lambda d: d["pool"].update(name="-x-"), "pool.name", "not valid"),
        ("_case_reserved_pool_name", lambda d: d["pool"].update(name="import"), "pool.name", "reserved"),
        (
            "_case_duplicate_key",
            lambda d: d["topology_keys"].append(dict(KEYS[0], label="x/y")),
            "topology_keys[2].key",
            "already used by topology_keys[0]",
        ),
        (
            "_case_duplicate_label",
            lambda d: d["topology_keys"].append({"key": "z2", "label": KEYS[0]["label"]}),
            "topology_keys[2].label",
            "already used",
        ),
        (
            "_case_bad_label_key",
            lambda d: d["topology_keys"].append({"key": "z2", "label": "a b"}),
            "topology_keys[2].label",
            "not valid",
        ),
        (
            "_case_duplicate_node",
            lambda d: d["nodes"].append(node_entry("n0", "a", "r1")),
            "nodes[1].name",
            "already listed at nodes[0]",
        ),
        (
            "_case_label_value_number",
            lambda d: d["nodes"][0]["labels"].update({"topology.kubernetes.io/rack": 1}),
            'nodes[0].labels["topology.kubernetes.io/rack"]',
            "quote it",
        ),
        (
            "_case_unknown_resource",
            lambda d: d["nodes"][0]["capacity"].update(tpu=1),
            "nodes[0].capacity.tpu",
            "unknown field",
        ),
        (
            "_case_fractional_gpu",
            lambda d: d["nodes"][0]["capacity"].update(gpu=0.5),
            "nodes[0].capacity.gpu",
            "whole number",
        ),
        (
            "_case_negative_memory",
            lambda d: d["nodes"][0]["capacity"].update(memory="-1Gi"),
            "nodes[0].capacity.memory",
            "negative",
        ),
        ("_case_missing_capacity", lambda d: d["nodes"][0].pop("capacity"), "nodes[0].capacity", "required"),
        (
            "_case_schedulable_string",
            lambda d: d["nodes"][0].update(schedulable="yes"),
            "nodes[0].schedulable",
            "true or false",
        ),
        ("_case_nodes_not_list", lambda d: d.update(nodes={"n0": {}}), "nodes", "must be a list"),
        ("_case_huge_gpu", lambda d: d["nodes"][0]["capacity"].update(gpu=2**40), "nodes[0].capacity.gpu", "at most"),
    ],
)
def test_inventory_errors_name_their_place(_case, mutate, path, fragment):
    document = {"pool": {"name": "p"}, "topology_keys": [dict(k) for k in KEYS], "nodes": [node_entry("n0", "a", "r1")]}
    mutate(document)

    with pytest.raises(ValidationFailedError) as excinfo:
        inventory_parse(document)

    errors = excinfo.value.details["errors"]
    assert [e["path"] for e in errors] == [path], errors
    assert fragment in errors[0]["message"]


def test_unreadable_yaml_is_a_validation_error(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("pool: {name: [unclosed\n")

    with pytest.raises(CommandError, match="nothing imported"):
        call_command("import_pool", str(path), verbosity=0)


def test_import_pool_of_a_yaml_alias_bomb_is_refused_and_stores_nothing(tmp_path):
    """Replays ``import_pool`` of a YAML alias bomb (90 aliases expanding to 10**10 values), which burned
    30-40 s of CPU before it was refused; it is now refused while the YAML is composed."""
    # given
    path = tmp_path / "bomb.yaml"
    path.write_text(alias_bomb_inventory())

    # when
    with pytest.raises(CommandError) as excinfo:
        call_command("import_pool", str(path), verbosity=0)

    # then
    assert str(excinfo.value) == (
        f"{path}: 1 problem(s), nothing imported:\n"
        "  (document): YAML aliases expand to more than 12800 values at line 7, column 8"
    )
    assert not Pool.objects.filter(name="bomb").exists()
    assert Node.objects.count() == 0


def test_yaml_11_booleans_and_octals_stay_strings_or_are_reported(tmp_path):
    # YAML 1.2 core schema: `on` is a string; `010` is the integer 10 and must be quoted as a label value.
    document_text = (
        "pool: {name: p}\n"
        "nodes:\n"
        "- {name: n1, labels: {example.com/switch: on}, capacity: {gpu: 1}}\n"
        "- {name: n2, labels: {example.com/rack: 010}, capacity: {gpu: 1}}\n"
    )
    path = tmp_path / "p.yaml"
    path.write_text(document_text)

    with pytest.raises(CommandError) as excinfo:
        call_command("import_pool", str(path), verbosity=0)

    assert 'nodes[1].labels["example.com/rack"]: label values must be strings, got int 10' in str(excinfo.value)
    assert "nodes[0]" not in str(excinfo.value)


def test_reimport_updates_only_changed_nodes_and_keeps_unlisted_ones(tmp_path, small_pool):
    # given
    document = pool_export(small_pool)
    document["nodes"] = [n for n in document["nodes"] if n["name"] in ("a1", "a2")]
    document["nodes"][1]["capacity"]["gpu"] = 4
    untouched = Node.objects.get(pool=small_pool, name="a1").updated_at

    # when
    report = inventory_import(inventory_parse(document))

    # then
    assert (report.created, report.updated, report.unchanged, report.deleted) == (0, 1, 1, 0)
    assert Node.objects.get(pool=small_pool, name="a2").gpu == 4
    assert Node.objects.get(pool=small_pool, name="a1").updated_at == untouched
    assert Node.objects.filter(pool=small_pool).count() == 5


def test_prune_deletes_unlisted_nodes_but_keeps_reserved_ones_cordoned(small_pool, reserve):
    # given
    reserve(Node.objects.get(pool=small_pool, name="b1"), gpu=1)
    document = pool_export(small_pool)
    document["nodes"] = [n for n in document["nodes"] if n["name"] == "a1"]

    # when
    report = inventory_import(inventory_parse(document), prune=True)

    # then
    assert report.deleted == 3
    assert report.kept_with_reservations == ["b1"]
    assert sorted(Node.objects.filter(pool=small_pool).values_list("name", "schedulable")) == [
        ("a1", True),
        ("b1", False),
    ]


def test_dry_run_reports_and_writes_nothing(tmp_path):
    out = io.StringIO()
    call_command("import_pool", str(EXAMPLES / "demo.yaml"), "--dry-run", stdout=out)

    assert "[dry run] pool demo: created" in out.getvalue()
    assert not Pool.objects.filter(name="demo").exists()
