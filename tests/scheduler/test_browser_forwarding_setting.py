"""The pool setting ``browser_forwarding`` (docs/pages.md, "Task"): whether the task page's "Open port" may
reach the pool's tasks from the browser. On by default; in the inventory document as a boolean, exported and
read back; an administrator turns it off on the pool's admin page."""

from __future__ import annotations

import pytest
from django.test import Client

from scheduler.inventory import InventoryInvalidError, parse_inventory
from scheduler.models import Pool
from scheduler.services.inventory import inventory_import, pool_export
from tests.factories import make_pool
from tests.scheduler.test_admin import _inline_post


def test_the_document_takes_a_boolean():
    # when
    off = parse_inventory({"pool": {"name": "p", "browser_forwarding": False}})
    unset = parse_inventory({"pool": {"name": "p"}})

    # then
    assert off.pool_fields == {"browser_forwarding": False}
    assert "browser_forwarding" not in unset.pool_fields


@pytest.mark.parametrize("value", ["no", "off", 0, None, "false"])
def test_the_document_refuses_anything_else_naming_the_field(value):
    with pytest.raises(InventoryInvalidError) as caught:
        parse_inventory({"pool": {"name": "p", "browser_forwarding": value}})
    assert [(e.path, e.message) for e in caught.value.errors] == [("pool.browser_forwarding", "must be true or false")]


@pytest.mark.django_db
def test_it_is_on_by_default_and_an_import_turns_it_off_and_the_export_says_so():
    # given
    pool = make_pool("gpus", keys=[])
    assert pool.browser_forwarding is True

    # when
    inventory_import(parse_inventory({"pool": {"name": "gpus", "browser_forwarding": False}}))

    # then
    pool.refresh_from_db()
    assert pool.browser_forwarding is False
    assert pool_export(pool)["pool"]["browser_forwarding"] is False


@pytest.mark.django_db
def test_an_administrator_turns_it_off_on_the_pools_admin_page(staff_user, small_pool):
    # given the pool's change form as it is (its keys unchanged), less the checkbox
    admin = Client()
    admin.force_login(staff_user)
    keys = [(key.position, key.key, key.label, False) for key in small_pool.topology_keys.order_by("position")]
    data = _inline_post(small_pool, keys)
    assert data.pop("browser_forwarding") == "on"
    form = admin.get(f"/admin/scheduler/pool/{small_pool.pk}/change/").content.decode()

    # when
    answer = admin.post(f"/admin/scheduler/pool/{small_pool.pk}/change/", data)

    # then
    assert 'name="browser_forwarding"' in form and "Browser forwarding" in form
    assert answer.status_code == 302
    assert Pool.objects.get(pk=small_pool.pk).browser_forwarding is False


@pytest.mark.django_db
def test_the_api_shows_it_and_staff_set_it_with_true_or_false_only(staff_client):
    # when
    created = staff_client.post("/api/pools/", {"name": "p"}, format="json")
    changed = staff_client.patch("/api/pools/p/", {"browser_forwarding": False}, format="json")
    refused = staff_client.patch("/api/pools/p/", {"browser_forwarding": "yes"}, format="json")

    # then
    assert (created.status_code, created.json()["browser_forwarding"]) == (201, True)
    assert (changed.status_code, changed.json()["browser_forwarding"]) == (200, False)
    assert refused.status_code == 400
    assert [error["path"] for error in refused.json()["details"]["errors"]] == ["browser_forwarding"]
    assert Pool.objects.get(name="p").browser_forwarding is False
