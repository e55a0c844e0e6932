"""The pool setting ``max_retries`` (docs/design.md §6: how often a gang may be rescheduled) in the
inventory document, as the pools API and the admin take it: a whole number from 0 to 100. Without it,
``import_pool`` refused an exported pool's ``max_retries`` as an unknown field, and ``export_pool``
left it out, so a pool copied through its inventory file came back with the default."""

from __future__ import annotations

import pytest
import yaml
from django.core.management import call_command

from scheduler.inventory import InventoryInvalidError, parse_inventory
from scheduler.models import Pool
from scheduler.services import pool_export

KEYS = [{"key": "zone", "label": "topology.kubernetes.io/zone"}]


def test_the_document_takes_a_whole_number():
    # given a pool section that allows one reschedule
    document = {"pool": {"name": "p", "max_retries": 1}, "topology_keys": KEYS, "nodes": []}
    # when it is parsed
    inventory = parse_inventory(document)
    # then the setting is among the pool's fields
    assert inventory.pool_fields == {"max_retries": 1}


@pytest.mark.parametrize("value", [-1, 1.5, "3", True, 101, None])
def test_the_document_refuses_anything_else_naming_the_field(value):
    document = {"pool": {"name": "p", "max_retries": value}, "topology_keys": KEYS, "nodes": []}
    with pytest.raises(InventoryInvalidError) as caught:
        parse_inventory(document)
    assert [(e.path, e.message) for e in caught.value.errors] == [
        ("pool.max_retries", "must be a whole number from 0 to 100")]


@pytest.mark.django_db
def test_export_then_import_keeps_it(tmp_path, small_pool):
    # given a pool that allows no reschedule (the default is 3)
    small_pool.max_retries = 0
    small_pool.save(update_fields=["max_retries"])
    exported = tmp_path / "small.yaml"
    call_command("export_pool", "small", "-o", str(exported), verbosity=0)
    # when its file is imported as another pool
    document = yaml.safe_load(exported.read_text())
    document["pool"]["name"] = "copy"
    copy_file = tmp_path / "copy.yaml"
    copy_file.write_text(yaml.safe_dump(document, sort_keys=False))
    call_command("import_pool", str(copy_file), verbosity=0)
    # then the file says it and the copy has it
    assert document["pool"]["max_retries"] == 0
    assert Pool.objects.get(name="copy").max_retries == 0
    assert pool_export(Pool.objects.get(name="copy"))["pool"]["max_retries"] == 0


@pytest.mark.django_db
@pytest.mark.parametrize("value", [-1, "3", 1.0, True, 101])
def test_the_api_refuses_what_the_document_refuses_naming_the_field(staff_client, small_pool, value):
    # PATCH took "3" and 1.0 (DRF's IntegerField casts them) while min_runtime and the document refuse them
    response = staff_client.patch("/api/pools/small/", {"max_retries": value}, format="json")
    assert response.status_code == 400, response.content
    assert [e["path"] for e in response.json()["details"]["errors"]] == ["max_retries"]
    assert Pool.objects.get(name="small").max_retries == 3


@pytest.mark.django_db
def test_the_admins_form_keeps_the_same_bound(small_pool):
    # the model (and so the admin's form) took any positive number: a pool set to 150 there exported a
    # file that import_pool then refused
    from django.core.exceptions import ValidationError

    small_pool.max_retries = 101
    with pytest.raises(ValidationError) as caught:
        small_pool.full_clean()
    assert list(caught.value.message_dict) == ["max_retries"]
    small_pool.max_retries = 100
    small_pool.full_clean()
