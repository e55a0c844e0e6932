"""generate_pool: synthetic NVL72-shaped pools, seeded occupancy, files that import cleanly."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command

from scheduler.models import Node, Pool
from scheduler.services import inventory_import, inventory_parse, pool_export

pytestmark = pytest.mark.django_db


def test_generates_the_requested_shape_with_progress():
    out = io.StringIO()
    call_command("generate_pool", "gen", "--zones", "2", "--spines", "3", "--racks", "2", stdout=out)

    pool = Pool.objects.get(name="gen")
    assert pool.nodes.count() == 2 * 3 * 2 * 18
    assert [key.key for key in pool.topology_keys.order_by("position")] == ["zone", "spine", "rack", "gpu-clique"]
    assert set(pool.nodes.values_list("gpu", flat=True)) == {4}
    racks = {}
    for node in pool.nodes.all():
        racks.setdefault(node.labels["topology.kubernetes.io/rack"], set()).add(node.labels["nvidia.com/gpu-clique"])
    assert len(racks) == 12 and all(len(cliques) == 1 for cliques in racks.values())
    assert "generating 216 nodes" in out.getvalue()
    assert "nodes written: 216/216" in out.getvalue()


def test_occupancy_is_seeded():
    call_command("generate_pool", "one", "--occupancy", "0.5", "--seed", "11", stdout=io.StringIO())
    call_command("generate_pool", "two", "--occupancy", "0.5", "--seed", "11", stdout=io.StringIO())
    call_command("generate_pool", "three", "--occupancy", "0.5", "--seed", "12", stdout=io.StringIO())

    def used(name):
        return list(Node.objects.filter(pool__name=name).order_by("name").values_list("used_gpu", flat=True))

    assert used("one") == used("two") != used("three")
    assert 0 < sum(used("one")) < 4 * 144


def test_replace_and_refusal(reserve):
    call_command("generate_pool", "again", "--racks", "1", stdout=io.StringIO())
    with pytest.raises(CommandError, match="use --replace"):
        call_command("generate_pool", "again", stdout=io.StringIO())
    call_command("generate_pool", "again", "--racks", "3", "--replace", stdout=io.StringIO())
    assert Pool.objects.get(name="again").nodes.count() == 2 * 2 * 3 * 18
    reserve(Node.objects.filter(pool__name="again").first(), gpu=1)
    with pytest.raises(CommandError, match="has workflows"):
        call_command("generate_pool", "again", "--replace", stdout=io.StringIO())


def test_output_file_imports_to_the_same_pool(tmp_path):
    path = tmp_path / "hgx.yaml"
    call_command("generate_pool", "hgx", "--preset", "hgx", "--zones", "1", "-o", str(path), stdout=io.StringIO())
    assert not Pool.objects.filter(name="hgx").exists()

    call_command("import_pool", str(path), verbosity=0)

    pool = Pool.objects.get(name="hgx")
    assert pool.nodes.count() == 1 * 2 * 2 * 4
    assert set(pool.nodes.values_list("gpu", flat=True)) == {8}
    report = inventory_import(inventory_parse(pool_export(pool)))
    assert report.unchanged == 16 and not report.changed


def test_bad_quantities_are_command_errors():
    with pytest.raises(CommandError, match="memory"):
        call_command("generate_pool", "bad", "--memory", "lots", stdout=io.StringIO())
    with pytest.raises(CommandError, match="occupancy"):
        call_command("generate_pool", "bad", "--occupancy", "2", stdout=io.StringIO())
    assert not Pool.objects.filter(name="bad").exists()
