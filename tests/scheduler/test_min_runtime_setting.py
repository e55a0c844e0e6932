"""The pool setting ``min_runtime`` (docs/design.md §9) in the inventory document and the pools API:
whole seconds from 0 to a week, stored as given; anything else is refused naming the field."""

from __future__ import annotations

import pytest

from scheduler import models
from scheduler.inventory import InventoryInvalidError, parse_inventory
from scheduler.inventory import document as inventory_document
from scheduler.models import Pool

KEYS = [{"key": "zone", "label": "topology.kubernetes.io/zone"}]


def test_the_model_and_the_document_share_the_bound():
    assert models.MAX_MIN_RUNTIME == inventory_document.MAX_MIN_RUNTIME == 7 * 24 * 3600


def test_the_document_takes_whole_seconds():
    # given a pool section with a ten-minute minimum runtime
    document = {"pool": {"name": "p", "min_runtime": 600}, "topology_keys": KEYS, "nodes": []}
    # when it is parsed
    inventory = parse_inventory(document)
    # then the setting is among the pool's fields
    assert inventory.pool_fields == {"min_runtime": 600}


@pytest.mark.parametrize("value", [-1, 1.5, "10 minutes", True, 7 * 24 * 3600 + 1, "8d", None])
def test_the_document_refuses_anything_else_naming_the_field(value):
    document = {"pool": {"name": "p", "min_runtime": value}, "topology_keys": KEYS, "nodes": []}
    with pytest.raises(InventoryInvalidError) as caught:
        parse_inventory(document)
    assert [(e.path, e.message) for e in caught.value.errors] == [
        ("pool.min_runtime", "must be a whole number of seconds from 0 to 604800 or a duration (45s, 10m, 2h, 1d "
                             "or 1h30m, as a spec's timeouts)")]


@pytest.mark.django_db
def test_the_api_stores_and_shows_it(staff_client):
    # when a pool is created with a minimum runtime and then changed
    created = staff_client.post("/api/pools/", {"name": "p", "min_runtime": 600}, format="json")
    changed = staff_client.patch("/api/pools/p/", {"min_runtime": 900}, format="json")
    # then each answer shows it and the row holds the last
    assert (created.status_code, created.json()["min_runtime"]) == (201, 600)
    assert (changed.status_code, changed.json()["min_runtime"]) == (200, 900)
    assert Pool.objects.get(name="p").min_runtime == 900


@pytest.mark.django_db
def test_a_pool_without_it_keeps_todays_behaviour(staff_client):
    created = staff_client.post("/api/pools/", {"name": "p"}, format="json")
    assert created.json()["min_runtime"] == 0
    assert Pool.objects.get(name="p").min_runtime == 0


@pytest.mark.django_db
@pytest.mark.parametrize("value", [-1, "600", 1.5, True, 7 * 24 * 3600 + 1])
def test_the_api_refuses_anything_else_naming_the_field_and_stores_nothing(staff_client, value):
    response = staff_client.post("/api/pools/", {"name": "p", "min_runtime": value}, format="json")
    assert response.status_code == 400, response.content
    assert [e["path"] for e in response.json()["details"]["errors"]] == ["min_runtime"]
    assert not Pool.objects.filter(name="p").exists()
