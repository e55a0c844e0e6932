"""Admin pages for pools and nodes, through the Django test client."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from scheduler.models import Node, Pool, TopologyKey

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client_(staff_user) -> Client:
    client = Client()
    client.force_login(staff_user)
    return client


def _names(response) -> list[str]:
    return re.findall(
        r'<th class="field-name"><a href="/admin/scheduler/node/\d+/change/[^"]*">([^<]+)</a>',
        response.content.decode(),
    )


def test_pool_changelist_shows_keys_nodes_and_gpu(admin_client_, small_pool):
    response = admin_client_.get("/admin/scheduler/pool/")

    content = response.content.decode()
    assert response.status_code == 200
    assert "zone &gt; rack" in content
    assert "5 (4 schedulable)" in content
    assert "26 / 36" in content  # GPU free / capacity: a1 8-2 + a2 8 + b1 4 + loose 8; a3 is cordoned


def test_pool_change_page_has_keys_inline_in_order_and_hierarchy_link(admin_client_, small_pool):
    response = admin_client_.get(f"/admin/scheduler/pool/{small_pool.pk}/change/")

    content = response.content.decode()
    assert response.status_code == 200
    assert content.index('value="topology.kubernetes.io/zone"') < content.index('value="topology.kubernetes.io/rack"')
    assert f'href="/admin/scheduler/pool/{small_pool.pk}/hierarchy/"' in content


def _inline_post(pool: Pool, rows: list[tuple[int, str, str, bool]], **fields) -> dict:
    keys = list(TopologyKey.objects.filter(pool=pool).order_by("position"))
    data = {
        "name": pool.name,
        "description": pool.description,
        "backend": pool.backend,
        "sim_task_seconds": pool.sim_task_seconds,
        "min_runtime": pool.min_runtime,
        "fairshare_half_life": pool.fairshare_half_life,
        "max_retries": pool.max_retries,
        "k8s_namespace": pool.k8s_namespace,
        "k8s_node_selector": pool.k8s_node_selector,
        "status": pool.status,
        **({"browser_forwarding": "on"} if pool.browser_forwarding else {}),
        "grants-TOTAL_FORMS": "0", "grants-INITIAL_FORMS": "0", "grants-MIN_NUM_FORMS": "0",
        "grants-MAX_NUM_FORMS": "1000", "quotas-TOTAL_FORMS": "0", "quotas-INITIAL_FORMS": "0",
        "quotas-MIN_NUM_FORMS": "0", "quotas-MAX_NUM_FORMS": "1000",
        "platforms-TOTAL_FORMS": "0", "platforms-INITIAL_FORMS": "0", "platforms-MIN_NUM_FORMS": "0",
        "platforms-MAX_NUM_FORMS": "1000",
        "topology_keys-TOTAL_FORMS": str(len(rows)),
        "topology_keys-INITIAL_FORMS": str(len(keys)),
        "topology_keys-MIN_NUM_FORMS": "0",
        "topology_keys-MAX_NUM_FORMS": "1000",
        **fields,
    }
    for index, (position, key, label, delete) in enumerate(rows):
        prefix = f"topology_keys-{index}"
        data[f"{prefix}-position"] = str(position)
        data[f"{prefix}-key"] = key
        data[f"{prefix}-label"] = label
        data[f"{prefix}-pool"] = str(pool.pk)
        if index < len(keys):
            data[f"{prefix}-id"] = str(keys[index].pk)
        if delete:
            data[f"{prefix}-DELETE"] = "on"
    return data


def test_swapping_key_positions_in_the_inline_reorders_and_bumps_keys_version(admin_client_, small_pool):
    data = _inline_post(
        small_pool,
        [(1, "zone", "topology.kubernetes.io/zone", False), (0, "rack", "topology.kubernetes.io/rack", False)],
    )

    response = admin_client_.post(f"/admin/scheduler/pool/{small_pool.pk}/change/", data, follow=True)

    assert response.status_code == 200
    assert "keys_version is now 2" in response.content.decode()
    pool = Pool.objects.get(pk=small_pool.pk)
    assert pool.keys_version == 2
    assert list(pool.topology_keys.order_by("position").values_list("key", flat=True)) == ["rack", "zone"]


def test_saving_the_pool_without_key_changes_keeps_keys_version(admin_client_, small_pool):
    data = _inline_post(
        small_pool,
        [(0, "zone", "topology.kubernetes.io/zone", False), (1, "rack", "topology.kubernetes.io/rack", False)],
        description="edited",
    )

    response = admin_client_.post(f"/admin/scheduler/pool/{small_pool.pk}/change/", data)

    assert response.status_code == 302
    pool = Pool.objects.get(pk=small_pool.pk)
    assert (pool.description, pool.keys_version) == ("edited", 1)


def test_deleting_a_key_in_the_inline_bumps_and_duplicates_are_refused(admin_client_, small_pool):
    duplicate = _inline_post(
        small_pool, [(0, "zone", "topology.kubernetes.io/zone", False), (1, "zone", "example.com/other", False)]
    )
    removed = _inline_post(
        small_pool,
        [(0, "zone", "topology.kubernetes.io/zone", False), (1, "rack", "topology.kubernetes.io/rack", True)],
    )

    refused = admin_client_.post(f"/admin/scheduler/pool/{small_pool.pk}/change/", duplicate)
    assert refused.status_code == 200  # form redisplayed with the error
    assert Pool.objects.get(pk=small_pool.pk).keys_version == 1
    accepted = admin_client_.post(f"/admin/scheduler/pool/{small_pool.pk}/change/", removed)

    assert accepted.status_code == 302
    pool = Pool.objects.get(pk=small_pool.pk)
    assert (pool.keys_version, list(pool.topology_keys.values_list("key", flat=True))) == (2, ["zone"])


def test_adding_a_pool_with_keys_in_the_admin_starts_at_version_1(admin_client_):
    data = {
        "name": "added",
        "description": "",
        "backend": "simulated",
        "sim_task_seconds": "10",
        "min_runtime": "0",
        "fairshare_half_life": "0",
        "max_retries": "3",
        "k8s_namespace": "default",
        "k8s_node_selector": "",
        "status": "ONLINE",
        "grants-TOTAL_FORMS": "0", "grants-INITIAL_FORMS": "0", "grants-MIN_NUM_FORMS": "0",
        "grants-MAX_NUM_FORMS": "1000", "quotas-TOTAL_FORMS": "0", "quotas-INITIAL_FORMS": "0",
        "quotas-MIN_NUM_FORMS": "0", "quotas-MAX_NUM_FORMS": "1000",
        "platforms-TOTAL_FORMS": "0", "platforms-INITIAL_FORMS": "0",
        "topology_keys-TOTAL_FORMS": "2",
        "topology_keys-INITIAL_FORMS": "0",
        "topology_keys-MIN_NUM_FORMS": "0",
        "topology_keys-MAX_NUM_FORMS": "1000",
        "topology_keys-0-position": "0",
        "topology_keys-0-key": "zone",
        "topology_keys-0-label": "topology.kubernetes.io/zone",
        "topology_keys-1-position": "1",
        "topology_keys-1-key": "rack",
        "topology_keys-1-label": "topology.kubernetes.io/rack",
    }

    response = admin_client_.post("/admin/scheduler/pool/add/", data)

    assert response.status_code == 302
    pool = Pool.objects.get(name="added")
    assert pool.keys_version == 1
    assert list(pool.topology_keys.order_by("position").values_list("key", flat=True)) == ["zone", "rack"]


def test_node_changelist_has_usage_columns(admin_client_, small_pool, reserve):
    reserve(Node.objects.get(pool=small_pool, name="a1"), gpu=3)

    response = admin_client_.get(f"/admin/scheduler/node/?pool__id__exact={small_pool.pk}")

    content = response.content.decode()
    assert response.status_code == 200
    assert _names(response) == ["a1", "a2", "a3", "b1", "loose"]
    assert "GPU free" in content and "GPU reserved" in content and "CPU free (cores)" in content
    row = content[content.index(">a1<") : content.index(">a2<")]
    assert '<td class="field-reserved_gpu_display">3</td>' in row
    assert '<td class="field-free_gpu_display">3</td>' in row
    assert '<td class="field-domains_display">a / r1</td>' in row


def test_node_changelist_runs_a_constant_number_of_queries(admin_client_, generated_pool, django_assert_num_queries):
    small = generated_pool("adm-small", racks=1)
    big = generated_pool("adm-big", racks=3)
    counts = []
    for pool in (small, big):
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        with CaptureQueriesContext(connection) as context:
            response = admin_client_.get(f"/admin/scheduler/node/?pool__id__exact={pool.pk}")
        assert response.status_code == 200
        counts.append(len(context.captured_queries))
    assert counts[0] == counts[1]
    assert counts[0] <= 16


def test_topology_key_filters_appear_for_the_selected_pool(admin_client_, small_pool):
    unfiltered = admin_client_.get("/admin/scheduler/node/")
    response = admin_client_.get(
        f"/admin/scheduler/node/?pool__id__exact={small_pool.pk}&topology_zone=a&topology_rack=r1"
    )

    assert "By zone (topology.kubernetes.io/zone)" not in unfiltered.content.decode()
    content = response.content.decode()
    assert "By zone (topology.kubernetes.io/zone)" in content
    assert "By rack (topology.kubernetes.io/rack)" in content
    assert _names(response) == ["a1", "a2"]


@pytest.mark.parametrize(
    ("query", "names"),
    [
        ("a1", ["a1"]),
        ("r2", ["a3"]),  # a label value
        ("rack=r1", ["a1", "a2", "b1"]),  # a topology key name
        ("topology.kubernetes.io/zone=b", ["b1"]),  # a raw label key
        ("zone=a rack=r1", ["a1", "a2"]),
        ("nothing-like-this", []),
    ],
)
def test_node_search_by_name_label_value_or_key_value(admin_client_, small_pool, query, names):
    response = admin_client_.get("/admin/scheduler/node/", {"q": query})

    assert response.status_code == 200
    assert _names(response) == names


def test_cordon_and_uncordon_actions(admin_client_, small_pool):
    ids = [str(pk) for pk in Node.objects.filter(name__in=["a1", "a2"]).values_list("pk", flat=True)]

    cordoned = admin_client_.post(
        "/admin/scheduler/node/", {"action": "cordon_nodes", "_selected_action": ids}, follow=True
    )
    assert "Cordoned 2 node(s)." in cordoned.content.decode()
    assert list(Node.objects.filter(name__in=["a1", "a2"]).values_list("schedulable", flat=True)) == [False, False]
    uncordoned = admin_client_.post(
        "/admin/scheduler/node/",
        {"action": "uncordon_nodes", "_selected_action": [*ids, str(Node.objects.get(name="a3").pk)]},
        follow=True,
    )

    assert "Uncordoned 3 node(s)." in uncordoned.content.decode()
    assert Node.objects.filter(pool=small_pool, schedulable=False).count() == 0


def test_hierarchy_view_shows_domains_with_gpu_totals_and_machines(admin_client_, small_pool, reserve):
    reserve(Node.objects.get(pool=small_pool, name="a2"), gpu=5)

    response = admin_client_.get(f"/admin/scheduler/pool/{small_pool.pk}/hierarchy/")

    content = response.content.decode()
    assert response.status_code == 200
    assert "Hierarchy of pool small" in content
    assert re.search(r"<strong>5</strong> nodes \(4 schedulable\).*GPU capacity <strong>36</strong>", content, re.S)
    assert "reserved 5" in content and "free <strong>21</strong>" in content
    zone_a = content[content.index('data-key="zone" data-value="a"') :]
    assert re.search(r"3 nodes \(2 schedulable\) &middot; GPU 24 capacity &middot; 2 used &middot; 5 reserved", zone_a)
    assert 'data-key="rack" data-value="r1"' in content
    assert ">a2</a>" in content and "cordoned" in content
    assert 'data-value="(no zone)"' in content


def test_hierarchy_view_needs_staff(client, small_pool, user):
    client.force_login(user)

    response = client.get(f"/admin/scheduler/pool/{small_pool.pk}/hierarchy/")

    assert response.status_code == 302
    assert "/admin/login/" in response["Location"]


def _quota_rows(data: dict, rows: list[tuple[int, int]]) -> dict:
    data = {**data, "quotas-TOTAL_FORMS": str(len(rows))}
    for index, (team, gpu) in enumerate(rows):
        data[f"quotas-{index}-team"] = str(team)
        data[f"quotas-{index}-gpu"] = str(gpu)
    return data


def test_quotas_in_the_admin_follow_the_services_sum_rule(admin_client_, small_pool):
    from django.contrib.auth.models import Group

    from scheduler.models import TeamQuota

    llm, vision = Group.objects.create(name="llm"), Group.objects.create(name="vision")
    keys = [(0, "zone", "topology.kubernetes.io/zone", False), (1, "rack", "topology.kubernetes.io/rack", False)]
    over = _quota_rows(_inline_post(small_pool, keys), [(llm.pk, 20), (vision.pk, 20)])
    within = _quota_rows(_inline_post(small_pool, keys), [(llm.pk, 20), (vision.pk, 16)])

    refused = admin_client_.post(f"/admin/scheduler/pool/{small_pool.pk}/change/", over)

    assert refused.status_code == 200  # redisplayed with the error, nothing stored
    assert f"Quotas in pool {small_pool.name} would add up to 40 GPUs; the pool has 36. Lower one of them." in (
        refused.content.decode())
    assert not TeamQuota.objects.exists()
    accepted = admin_client_.post(f"/admin/scheduler/pool/{small_pool.pk}/change/", within)
    assert accepted.status_code == 302
    assert sorted(TeamQuota.objects.values_list("team__name", "gpu")) == [("llm", 20), ("vision", 16)]


def test_a_new_pool_has_no_gpus_to_give_as_quota_yet(admin_client_):
    from django.contrib.auth.models import Group

    llm = Group.objects.create(name="llm")
    data = _quota_rows({
        "name": "added", "description": "", "backend": "simulated", "sim_task_seconds": "10", "min_runtime": "0",
        "fairshare_half_life": "0",
        "max_retries": "3",
        "k8s_namespace": "default", "k8s_node_selector": "", "status": "ONLINE",
        "grants-TOTAL_FORMS": "0", "grants-INITIAL_FORMS": "0", "grants-MIN_NUM_FORMS": "0",
        "grants-MAX_NUM_FORMS": "1000", "quotas-TOTAL_FORMS": "0", "quotas-INITIAL_FORMS": "0",
        "quotas-MIN_NUM_FORMS": "0", "quotas-MAX_NUM_FORMS": "1000",
        "topology_keys-TOTAL_FORMS": "0", "topology_keys-INITIAL_FORMS": "0",
        "topology_keys-MIN_NUM_FORMS": "0", "topology_keys-MAX_NUM_FORMS": "1000",
    }, [(llm.pk, 8)])

    response = admin_client_.post("/admin/scheduler/pool/add/", data)

    assert response.status_code == 200
    assert "Quotas in pool added would add up to 8 GPUs; the pool has 0. Lower one of them." in (
        response.content.decode())
    assert not Pool.objects.filter(name="added").exists()


def test_a_grant_naming_both_a_team_and_a_user_is_refused_in_words(admin_client_, small_pool, user):
    from django.contrib.auth.models import Group

    from scheduler.models import PoolGrant

    llm = Group.objects.create(name="llm")
    keys = [(0, "zone", "topology.kubernetes.io/zone", False), (1, "rack", "topology.kubernetes.io/rack", False)]
    data = {**_inline_post(small_pool, keys), "grants-TOTAL_FORMS": "1", "grants-0-team": str(llm.pk),
            "grants-0-user": str(user.pk)}

    refused = admin_client_.post(f"/admin/scheduler/pool/{small_pool.pk}/change/", data)

    assert refused.status_code == 200  # redisplayed with the error, nothing stored
    assert "A grant names either a team or a user: one of them, not both." in refused.content.decode()
    assert not PoolGrant.objects.exists()
