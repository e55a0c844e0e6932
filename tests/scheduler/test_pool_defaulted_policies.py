"""The pool policies a pool may leave unset, the deployment's setting of the same meaning applying then
(docs/pools.md; docs/operations.md, "Where a knob lives"): ``starvation_wait`` (``OSMO_STARVATION_SECONDS``),
``preemption_grace`` (``OSMO_PREEMPTION_GRACE_SECONDS``) and ``refuse_never_fits``
(``OSMO_REFUSE_NEVER_FITS``). In the inventory document (durations as seconds or the spec's syntax; null:
unset), the pools API and the admin; exported and read back. Their effect on the cycle, the submission
check and pod deletion: tests/pipeline/test_pool_policies.py and tests/dispatch/test_reconcile.py."""

from __future__ import annotations

import pytest
from django.test import Client

from scheduler.inventory import InventoryInvalidError, parse_inventory
from scheduler.models import Pool
from scheduler.services.inventory import inventory_import, pool_export
from tests.factories import make_pool
from tests.scheduler.test_admin import _inline_post

DURATIONS = "(45s, 10m, 2h, 1d or 1h30m, as a spec's timeouts)"


@pytest.mark.parametrize(("_case", "fields", "expected"), [
    ("_case_seconds", {"starvation_wait": 120, "preemption_grace": 5, "refuse_never_fits": False},
     {"starvation_wait": 120, "preemption_grace": 5, "refuse_never_fits": False}),
    ("_case_spec_durations", {"starvation_wait": "10m", "preemption_grace": "1m30s", "refuse_never_fits": True},
     {"starvation_wait": 600, "preemption_grace": 90, "refuse_never_fits": True}),
    ("_case_zero_spelt", {"starvation_wait": "0s", "preemption_grace": "0"},
     {"starvation_wait": 0, "preemption_grace": 0}),
    ("_case_null_is_the_deployments", {"starvation_wait": None, "preemption_grace": None, "refuse_never_fits": None},
     {"starvation_wait": None, "preemption_grace": None, "refuse_never_fits": None}),
    ("_case_absent", {}, {}),
])
def test_the_document_takes_seconds_durations_or_null(_case, fields, expected):
    # when
    inventory = parse_inventory({"pool": {"name": "p", **fields}})
    # then
    assert inventory.pool_fields == expected


@pytest.mark.parametrize(("field", "value", "message"), [
    ("starvation_wait", -1, f"must be null (the deployment's setting), a whole number of seconds from 0 to 2592000 "
                            f"or a duration {DURATIONS}"),
    ("starvation_wait", "31d", f"must be null (the deployment's setting), a whole number of seconds from 0 to "
                               f"2592000 or a duration {DURATIONS}"),
    ("starvation_wait", 1.5, f"must be null (the deployment's setting), a whole number of seconds from 0 to "
                             f"2592000 or a duration {DURATIONS}"),
    ("preemption_grace", "a minute", f"must be null (the deployment's setting), a whole number of seconds from 0 "
                                     f"to 86400 or a duration {DURATIONS}"),
    ("preemption_grace", True, f"must be null (the deployment's setting), a whole number of seconds from 0 to "
                               f"86400 or a duration {DURATIONS}"),
    ("refuse_never_fits", "no", "must be true, false or null (the deployment's setting)"),
    ("refuse_never_fits", 0, "must be true, false or null (the deployment's setting)"),
])
def test_the_document_refuses_anything_else_naming_the_field(field, value, message):
    with pytest.raises(InventoryInvalidError) as caught:
        parse_inventory({"pool": {"name": "p", field: value}})
    assert [(e.path, e.message) for e in caught.value.errors] == [(f"pool.{field}", message)]


@pytest.mark.django_db
def test_a_pool_sets_none_by_default_and_follows_the_deployment(settings):
    # given
    pool = make_pool("p", keys=[])
    settings.OSMO_STARVATION_SECONDS, settings.OSMO_PREEMPTION_GRACE_SECONDS = 45, 12
    settings.OSMO_REFUSE_NEVER_FITS = False
    # then
    assert (pool.starvation_wait, pool.preemption_grace, pool.refuse_never_fits) == (None, None, None)
    assert (pool.starvation_wait_seconds(), pool.preemption_grace_seconds(), pool.refuses_never_fits()) == (
        45, 12, False)


@pytest.mark.django_db
def test_a_pools_own_values_win_over_the_deployments_zero_and_false_included(settings):
    # given
    pool = make_pool("p", keys=[], starvation_wait=0, preemption_grace=0, refuse_never_fits=True)
    settings.OSMO_STARVATION_SECONDS, settings.OSMO_PREEMPTION_GRACE_SECONDS = 45, 12
    settings.OSMO_REFUSE_NEVER_FITS = False
    # then
    assert (pool.starvation_wait_seconds(), pool.preemption_grace_seconds(), pool.refuses_never_fits()) == (
        0, 0, True)


@pytest.mark.django_db
def test_an_import_sets_them_the_export_says_so_and_null_goes_back_to_the_deployments():
    # given
    pool = make_pool("gpus", keys=[])
    # when
    inventory_import(parse_inventory({"pool": {"name": "gpus", "starvation_wait": "5m", "preemption_grace": 10,
                                               "refuse_never_fits": False}}))
    pool.refresh_from_db()
    exported = pool_export(pool)["pool"]
    inventory_import(parse_inventory({"pool": {"name": "gpus", "starvation_wait": None}}))
    # then the export carries what the import set, and reading it back changes nothing
    assert (exported["starvation_wait"], exported["preemption_grace"], exported["refuse_never_fits"]) == (
        300, 10, False)
    assert parse_inventory({"pool": exported}).pool_fields["starvation_wait"] == 300
    # and a null unsets only its own field
    pool.refresh_from_db()
    assert (pool.starvation_wait, pool.preemption_grace, pool.refuse_never_fits) == (None, 10, False)
    assert pool_export(pool)["pool"]["starvation_wait"] is None


@pytest.mark.django_db
def test_the_api_stores_shows_and_unsets_them(staff_client):
    # when
    created = staff_client.post("/api/pools/", {"name": "p", "starvation_wait": 120, "preemption_grace": 5,
                                                "refuse_never_fits": False}, format="json")
    changed = staff_client.patch("/api/pools/p/", {"starvation_wait": None, "refuse_never_fits": True},
                                 format="json")
    plain = staff_client.post("/api/pools/", {"name": "q"}, format="json")
    # then
    assert created.status_code == 201, created.content
    assert {key: created.json()[key] for key in ("starvation_wait", "preemption_grace", "refuse_never_fits")} == {
        "starvation_wait": 120, "preemption_grace": 5, "refuse_never_fits": False}
    assert changed.status_code == 200, changed.content
    assert {key: changed.json()[key] for key in ("starvation_wait", "preemption_grace", "refuse_never_fits")} == {
        "starvation_wait": None, "preemption_grace": 5, "refuse_never_fits": True}
    assert {key: plain.json()[key] for key in ("starvation_wait", "preemption_grace", "refuse_never_fits")} == {
        "starvation_wait": None, "preemption_grace": None, "refuse_never_fits": None}
    pool = Pool.objects.get(name="p")
    assert (pool.starvation_wait, pool.preemption_grace, pool.refuse_never_fits) == (None, 5, True)


@pytest.mark.django_db
@pytest.mark.parametrize(("field", "value"), [
    ("starvation_wait", -1), ("starvation_wait", "600"), ("starvation_wait", 30 * 24 * 3600 + 1),
    ("preemption_grace", 1.5), ("preemption_grace", 24 * 3600 + 1), ("refuse_never_fits", "no"),
    ("refuse_never_fits", 0),
])
def test_the_api_refuses_anything_else_naming_the_field_and_stores_nothing(staff_client, field, value):
    response = staff_client.post("/api/pools/", {"name": "p", field: value}, format="json")
    assert response.status_code == 400, response.content
    assert [e["path"] for e in response.json()["details"]["errors"]] == [field]
    assert not Pool.objects.filter(name="p").exists()


@pytest.mark.django_db
def test_an_administrator_sets_and_unsets_them_on_the_pools_admin_page(staff_user, small_pool):
    # given the pool's change form as it is (its keys unchanged)
    admin = Client()
    admin.force_login(staff_user)
    keys = [(key.position, key.key, key.label, False) for key in small_pool.topology_keys.order_by("position")]
    form = admin.get(f"/admin/scheduler/pool/{small_pool.pk}/change/").content.decode()
    # when one value is set, one left empty and the boolean chosen
    answer = admin.post(f"/admin/scheduler/pool/{small_pool.pk}/change/", _inline_post(
        small_pool, keys, starvation_wait="120", preemption_grace="", refuse_never_fits="false"))
    # then
    assert all(f'name="{name}"' in form for name in ("starvation_wait", "preemption_grace", "refuse_never_fits"))
    assert answer.status_code == 302, answer.content.decode()[-2000:]
    pool = Pool.objects.get(pk=small_pool.pk)
    assert (pool.starvation_wait, pool.preemption_grace, pool.refuse_never_fits) == (120, None, False)
