"""The pool setting ``fairshare_half_life`` (docs/design.md §9) in the inventory document and the pools
API, and each team's recent usage as one SQL aggregate equal to the pure computation."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import Group

from scheduler import models
from scheduler.fairshare import usage_by_team
from scheduler.fairshare.usage import pool_team_usage
from scheduler.inventory import InventoryInvalidError, parse_inventory
from scheduler.inventory import document as inventory_document
from scheduler.models import Pool, Reservation
from tests.factories import make_node, make_pool

KEYS = [{"key": "zone", "label": "topology.kubernetes.io/zone"}]
HOUR = 3600


def test_the_model_and_the_document_share_the_bound():
    assert models.MAX_FAIRSHARE_HALF_LIFE == inventory_document.MAX_FAIRSHARE_HALF_LIFE == 30 * 24 * 3600


def test_the_document_takes_whole_seconds():
    # given a pool section with a one-hour half-life
    document = {"pool": {"name": "p", "fairshare_half_life": 3600}, "topology_keys": KEYS, "nodes": []}
    # when it is parsed
    inventory = parse_inventory(document)
    # then the setting is among the pool's fields
    assert inventory.pool_fields == {"fairshare_half_life": 3600}


@pytest.mark.parametrize("value", [-1, 1.5, "an hour", True, 30 * 24 * 3600 + 1, "31d", None])
def test_the_document_refuses_anything_else_naming_the_field(value):
    document = {"pool": {"name": "p", "fairshare_half_life": value}, "topology_keys": KEYS, "nodes": []}
    with pytest.raises(InventoryInvalidError) as caught:
        parse_inventory(document)
    assert [(e.path, e.message) for e in caught.value.errors] == [
        ("pool.fairshare_half_life", "must be a whole number of seconds from 0 (off) to 2592000 or a duration "
                                     "(45s, 10m, 2h, 1d or 1h30m, as a spec's timeouts)")]


@pytest.mark.django_db
def test_the_api_stores_and_shows_it(staff_client):
    # when a pool is created with a half-life and then changed
    created = staff_client.post("/api/pools/", {"name": "p", "fairshare_half_life": 3600}, format="json")
    changed = staff_client.patch("/api/pools/p/", {"fairshare_half_life": 7200}, format="json")
    # then each answer shows it and the row holds the last
    assert (created.status_code, created.json()["fairshare_half_life"]) == (201, 3600)
    assert (changed.status_code, changed.json()["fairshare_half_life"]) == (200, 7200)
    assert Pool.objects.get(name="p").fairshare_half_life == 7200


@pytest.mark.django_db
def test_a_pool_without_it_keeps_todays_behaviour(staff_client):
    created = staff_client.post("/api/pools/", {"name": "p"}, format="json")
    assert (created.json()["fairshare_half_life"], created.json()["fairshare_usage"]) == (0, [])
    assert Pool.objects.get(name="p").fairshare_half_life == 0


@pytest.mark.django_db
@pytest.mark.parametrize("value", [-1, "3600", 1.5, True, 30 * 24 * 3600 + 1])
def test_the_api_refuses_anything_else_naming_the_field_and_stores_nothing(staff_client, value):
    response = staff_client.post("/api/pools/", {"name": "p", "fairshare_half_life": value}, format="json")
    assert response.status_code == 400, response.content
    assert [e["path"] for e in response.json()["details"]["errors"]] == ["fairshare_half_life"]
    assert not Pool.objects.filter(name="p").exists()


@pytest.mark.django_db
def test_a_negative_half_life_is_refused_on_change_and_the_pool_keeps_its_own(staff_client):
    # given a pool with a one-hour half-life
    staff_client.post("/api/pools/", {"name": "p", "fairshare_half_life": 3600}, format="json")
    # when it is changed to a negative one
    response = staff_client.patch("/api/pools/p/", {"fairshare_half_life": -60}, format="json")
    # then the answer names the field and nothing changed
    assert response.status_code == 400, response.content
    assert [e["path"] for e in response.json()["details"]["errors"]] == ["fairshare_half_life"]
    assert Pool.objects.get(name="p").fairshare_half_life == 3600


def _held(pool: Pool, node, task_id: int, team: Group | None, gpu: int, start: datetime,
          end: datetime | None) -> None:
    row = Reservation.objects.create(task_id=task_id, pool=pool, node=node, node_name=node.name, team=team, gpu=gpu,
                                     released_at=end)
    Reservation.objects.filter(pk=row.pk).update(created_at=start)


@pytest.mark.django_db
def test_the_usage_query_equals_the_pure_computation_and_skips_what_is_too_old():
    # given a pool with a one-hour half-life and, seen at a fixed instant, reservations of two teams
    # and of no team: running, released a while ago, released within a second, and one released
    # more than ten half-lives ago (not read: it weighs less than 2**-10 of its GPU-seconds)
    pool = make_pool("p", fairshare_half_life=HOUR)
    other = make_pool("q", fairshare_half_life=HOUR)
    node, elsewhere = make_node(pool, "n1", {}, gpu=8), make_node(other, "m1", {}, gpu=8)
    llm, vision = Group.objects.create(name="llm"), Group.objects.create(name="vision")
    now = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
    rows = [
        (llm, 4, now - timedelta(hours=3), None),
        (llm, 2, now - timedelta(hours=5), now - timedelta(hours=2)),
        (vision, 8, now - timedelta(minutes=30), now - timedelta(seconds=1)),
        (None, 1, now - timedelta(hours=1), now - timedelta(minutes=10)),
        (vision, 8, now - timedelta(hours=30), now - timedelta(hours=11)),
    ]
    for task_id, (team, gpu, start, end) in enumerate(rows, start=1):
        _held(pool, node, task_id, team, gpu, start, end)
    _held(other, elsewhere, 99, llm, 8, now - timedelta(hours=1), None)  # another pool's: not counted
    # when the usage is read
    usage = pool_team_usage(pool, now=now)
    # then it is the pure function's over the rows within the horizon, least first
    expected = usage_by_team([(team and team.pk, gpu, start.timestamp(), end and end.timestamp())
                              for team, gpu, start, end in rows[:4]], now.timestamp(), HOUR)
    assert [(u.team_id, u.team) for u in usage] == [(None, None), (vision.pk, "vision"), (llm.pk, "llm")]
    assert [u.gpu_seconds for u in usage] == pytest.approx([expected[None], expected[vision.pk], expected[llm.pk]],
                                                            rel=1e-9)


@pytest.mark.django_db
def test_no_usage_is_read_when_fair_share_is_off(django_assert_num_queries):
    pool = make_pool("p")
    with django_assert_num_queries(0):
        assert pool_team_usage(pool, now=datetime(2026, 11, 27, tzinfo=UTC)) == []


def _admin_post(staff_user, pool: Pool, value: str):
    from django.test import Client

    from tests.workflows.test_api_osmo_spec import admin_pool_form

    admin = Client()
    admin.force_login(staff_user)
    form = admin_pool_form(pool) | {"fairshare_half_life": value}
    return admin.post(f"/admin/scheduler/pool/{pool.pk}/change/", form)


@pytest.mark.django_db
def test_the_admin_stores_a_half_life(staff_user):
    # given a pool without fair share, when its admin form is posted with two hours
    pool = make_pool("p")
    response = _admin_post(staff_user, pool, "7200")
    # then it is stored
    pool.refresh_from_db()
    assert (response.status_code, pool.fairshare_half_life) == (302, 7200)


@pytest.mark.django_db
def test_the_admin_refuses_a_negative_half_life_on_the_field_and_stores_nothing(staff_user):
    # given a pool with a one-hour half-life, when its admin form is posted with -1
    pool = make_pool("p", fairshare_half_life=HOUR)
    response = _admin_post(staff_user, pool, "-1")
    # then the form comes back with the field's error and the pool keeps its own
    pool.refresh_from_db()
    assert response.status_code == 200
    assert list(response.context["adminform"].form.errors) == ["fairshare_half_life"]
    assert pool.fairshare_half_life == HOUR
