"""Status pages through the Django test client: login, visibility, content, query counts, cancel, submit."""

from __future__ import annotations

import re

import pytest
from django.db.models import Sum
from django.urls import reverse

from pages.viewmodels.common import heat_level
from scheduler.models import Reservation
from tests.factories import example_spec
from tests.pages.conftest import big_clique_spec
from workflows.choices import TaskStatus, WorkflowStatus
from workflows.models import Task, Workflow

pytestmark = pytest.mark.django_db


def _text(response) -> str:
    return re.sub(r"\s+", " ", response.content.decode())


# ------------------------------------------------------------------------------------------------
# Login and visibility
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "url",
    ["/", "/workflows/", "/workflows/multiple-nvl72-same-zone-1/", "/pools/", "/pools/nvl72/", "/submit/",
     "/workflows/?partial=1"],
    ids=["_case_dashboard", "_case_list", "_case_detail", "_case_pools", "_case_pool", "_case_submit",
         "_case_fragment"],
)
def test_pages_redirect_anonymous_users_to_login(client, scene, url):
    # when
    response = client.get(url)

    # then
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/?next=")


def test_login_form_logs_in_and_lands_on_the_dashboard(client, scene):
    # when
    response = client.post("/accounts/login/", {"username": "alice", "password": "alice-password"}, follow=True)

    # then
    assert response.status_code == 200
    assert response.redirect_chain[-1][0] == "/"
    assert 'id="status-counts"' in response.content.decode()


def test_users_see_their_own_workflows_and_staff_see_all(client, scene):
    # given
    client.force_login(scene["bob"])

    # when
    own = client.get("/workflows/")
    foreign = client.get(f"/workflows/{scene['placed'].workflow_id}/")
    client.force_login(scene["staff"])
    staff = client.get("/workflows/")
    staff_detail = client.get(f"/workflows/{scene['placed'].workflow_id}/")

    # then
    assert "single-nvl72-rack-1" in own.content.decode()
    assert "multiple-nvl72-same-zone-1" not in own.content.decode()
    assert foreign.status_code == 404
    assert all(wf in staff.content.decode() for wf in ("single-nvl72-rack-1", "multiple-nvl72-same-zone-1",
                                                       "big-clique-job-1"))
    assert staff_detail.status_code == 200


# ------------------------------------------------------------------------------------------------
# Dashboard
# ------------------------------------------------------------------------------------------------
def test_dashboard_shows_counts_pools_and_recent_workflows(alice_client, django_assert_max_num_queries):
    # when
    with django_assert_max_num_queries(10):
        response = alice_client.get("/")

    # then
    assert response.status_code == 200
    text = _text(response)
    counts = dict(re.findall(r'data-status="(\w+)"> <div class="n">(\d+)</div>', text))
    assert counts == {"PENDING": "1", "RUNNING": "1", "COMPLETED": "0", "FAILED": "0"}
    # nvl72: 144 nodes x 4 GPUs = 576; 9 nodes with external usage (36) + bob 16 + alice 32 reserved
    assert re.search(r'data-pool="nvl72">.*?<td class="num">576</td> <td class="num gpu-in-use">84</td> '
                     r'<td class="num gpu-free">488</td>', text)
    assert "multiple-nvl72-same-zone-1" in text and "big-clique-job-1" in text
    assert "single-nvl72-rack-1" not in text  # bob's


def test_dashboard_fragment_is_the_live_region_only(alice_client):
    # when
    response = alice_client.get("/?partial=1")

    # then
    assert response.status_code == 200
    assert 'id="status-counts"' in response.content.decode()
    assert "<html" not in response.content.decode()


# ------------------------------------------------------------------------------------------------
# Workflow list
# ------------------------------------------------------------------------------------------------
def test_workflow_list_filters_sorts_and_paginates(client, scene, django_user_model, django_assert_max_num_queries):
    # given: 30 more of bob's workflows
    from workflows.services import workflow_submit

    for _ in range(30):
        workflow_submit(user=scene["bob"], pool_name="nvl72", spec=example_spec("single-nvl72-rack"))
    client.force_login(scene["staff"])

    # when
    with django_assert_max_num_queries(10):  # with the tags one may filter by and the page's tags
        first = client.get("/workflows/")
    second = client.get("/workflows/?page=2")
    pending_alice = client.get("/workflows/?status=PENDING&user=alice")
    running = client.get("/workflows/?status=RUNNING&pool=nvl72&sort=name")
    by_name = client.get("/workflows/?name=clique")
    sorted_asc = client.get("/workflows/?sort=id")

    # then
    rows = lambda response: re.findall(r'<tr data-workflow="([^"]+)">', response.content.decode())  # noqa: E731
    assert len(rows(first)) == 25
    assert "Page 1 of 2 · 33 workflows" in _text(first)
    assert len(rows(second)) == 8
    assert rows(pending_alice) == ["big-clique-job-1"]
    assert rows(running) == ["multiple-nvl72-same-zone-1", "single-nvl72-rack-1"]
    assert rows(by_name) == ["big-clique-job-1"]
    assert rows(sorted_asc)[:3] == ["big-clique-job-1", "multiple-nvl72-same-zone-1", "single-nvl72-rack-1"]
    assert 'href="?sort=-id"' in sorted_asc.content.decode()  # clicking again sorts descending


# ------------------------------------------------------------------------------------------------
# Workflow detail
# ------------------------------------------------------------------------------------------------
def test_workflow_detail_shows_groups_tasks_tree_and_placement(alice_client, scene, django_assert_max_num_queries):
    # given
    workflow = scene["placed"]

    # when
    with django_assert_max_num_queries(14):
        response = alice_client.get(f"/workflows/{workflow.workflow_id}/")

    # then
    assert response.status_code == 200
    text = _text(response)
    assert workflow.status == WorkflowStatus.RUNNING
    tasks = list(workflow.tasks.select_related("node").order_by("position"))
    zones = {task.node.labels["topology.kubernetes.io/zone"] for task in tasks}
    cliques = {task.node.labels["nvidia.com/gpu-clique"] for task in tasks}
    assert len(zones) == 1 and len(cliques) == 2
    for task in tasks:
        assert f'<tr data-task="{task.name}">' in text
        assert task.node.name in text
    assert 'data-status="INITIALIZING"' in text
    # the tree: root, (key, group) nodes marked required, tasks as leaves
    svg = re.search(r'<svg[^>]*class="tree-svg".*?</svg>', text).group(0)
    assert "zone = workflow-group" in svg and "gpu-clique = model-1-group" in svg
    assert "gpu-clique = model-2-group" in svg and svg.count('data-kind="task"') == 8
    assert svg.count('data-kind="node"') == 3 and svg.count('data-kind="root"') == 1
    assert "required · met" in svg
    # the placement map: the zone used is opened, the other zone is shown small
    zone = zones.pop()
    assert f'class="dom touched" data-domain="{zone}" data-key="zone"' in text
    assert text.count('class="cell ours') == 8
    assert 'data-key="zone"' in text and "compact" in text
    # status history and cancel button
    assert "submitted" in text and "placed" in text
    assert 'id="cancel-button"' in text


def test_workflow_detail_explains_a_waiting_group_in_plain_words(alice_client, scene):
    # when
    response = alice_client.get(f"/workflows/{scene['waiting'].workflow_id}/")

    # then
    text = _text(response)
    assert 'id="waiting-trainer"' in text
    assert "It needs all 20 tasks under the required gpu-clique constraint “all-shards” in one gpu-clique" in text
    assert "the best one" in text and "fits 18 of 20" in text
    assert "placed automatically as soon as enough capacity frees up" in text
    assert "No task has been placed yet" in text


def test_workflow_detail_reports_preferred_constraints_met_or_not(client, scene):
    # given: best-effort (preferred rack and spine) placed on the pool
    from workflows.scheduling.cycle import placement_cycle_run
    from workflows.services import workflow_submit

    workflow, _ = workflow_submit(user=scene["alice"], pool_name="nvl72", spec=example_spec("best-effort-topology"))
    placement_cycle_run(pool_id=scene["pool"].pk)
    client.force_login(scene["alice"])

    # when
    response = client.get(f"/workflows/{workflow.workflow_id}/")

    # then
    text = _text(response)
    assert "spine = workflow-group" in text and "rack = model-1-group" in text
    assert text.count('<span class="tag preferred">preferred</span>') >= 3
    assert "met: all its tasks share one rack" in text
    assert "preferred · met" in text
    assert 'stroke-dasharray="6 4"' in text  # preferred boxes are dashed


def test_owner_cancels_with_a_post(alice_client, scene):
    # given
    workflow = scene["placed"]

    # when
    response = alice_client.post(f"/workflows/{workflow.workflow_id}/cancel/", follow=True)

    # then
    workflow.refresh_from_db()
    assert workflow.status == WorkflowStatus.FAILED_CANCELED
    assert set(workflow.tasks.values_list("status", flat=True)) == {TaskStatus.FAILED_CANCELED}
    assert "was cancelled" in response.content.decode()
    assert 'id="cancel-button"' not in response.content.decode()


def test_cancel_needs_post_csrf_and_ownership(client, scene):
    # given
    from django.test import Client

    workflow = scene["placed"]
    url = f"/workflows/{workflow.workflow_id}/cancel/"
    client.force_login(scene["alice"])
    csrf_client = Client(enforce_csrf_checks=True)
    csrf_client.force_login(scene["alice"])
    bob = Client()
    bob.force_login(scene["bob"])

    # when
    get = client.get(url)
    no_token = csrf_client.post(url)
    foreign = bob.post(url)

    # then
    assert get.status_code == 405
    assert no_token.status_code == 403
    assert foreign.status_code == 404
    workflow.refresh_from_db()
    assert workflow.status == WorkflowStatus.RUNNING


# ------------------------------------------------------------------------------------------------
# Pools
# ------------------------------------------------------------------------------------------------
def test_pool_list_shows_capacity(alice_client, django_assert_max_num_queries):
    # when
    with django_assert_max_num_queries(8):
        response = alice_client.get("/pools/")

    # then
    text = _text(response)
    assert 'data-pool="nvl72"' in text and "GB200 NVL72 racks" in text
    assert "zone</span> › <span class=\"tag\">spine" in text


def test_pool_detail_shows_heat_map_occupancy_and_nodes(alice_client, scene, django_assert_max_num_queries):
    # when
    # (the occupancy's holders are one query beside their reservations)
    with django_assert_max_num_queries(20):  # a first read: the natural node order's names fingerprint too
        response = alice_client.get("/pools/nvl72/")
    with django_assert_max_num_queries(15):  # unchanged pool: tree and occupancy kept, two version queries
        again = alice_client.get("/pools/nvl72/")
    second = alice_client.get("/pools/nvl72/?page=6")

    # then
    text = _text(response)
    assert response.status_code == 200
    assert text.count('data-key="zone"') == 2 and text.count('data-key="spine"') == 4
    assert text.count('data-key="rack"') == 8  # rack and its one gpu-clique drawn as one box
    assert "gpu-clique</span> <span class=\"v\">z1-s1-r1" in text
    assert text.count('class="cell heat-') == 144
    # 9 of the 18 nodes of z2/s2/r2 are used outside the service (36 GPUs), plus what was placed there
    rack = re.search(r'data-domain="z2/s2/r2" data-key="rack"> <div class="dom-head heat-(\d)" '
                     r'title="18 nodes · 72 GPUs · (\d+) in use · (\d+) free"', text)
    assert int(rack.group(2)) >= 36
    assert int(rack.group(1)) == heat_level(72 - int(rack.group(3)), 72) >= 3
    assert '<tr data-workflow="multiple-nvl72-same-zone-1">' in text
    assert '<tr data-others="1">' in text  # bob's, not named for alice (test_pool_page_names_only_...)
    assert "Page 1 of 6 · 144 nodes" in text
    assert len(re.findall(r'<tr data-node="', text)) == 25
    assert len(re.findall(r'<tr data-node="', second.content.decode())) == 19
    csrf = re.compile(r'name="csrfmiddlewaretoken" value="[^"]+"')
    assert csrf.sub("", _text(again)) == csrf.sub("", text)


def test_pool_page_names_only_the_workflows_the_api_shows_the_user(client, scene, django_assert_max_num_queries):
    """docs/pages.md "Pool": the pool page named other users' workflows and their owners to a non-staff
    user, whom the API (GET /api/workflows/) shows their own only; staff see everyone's."""
    bobs = Workflow.objects.get(submitted_by=scene["bob"])
    bob_gpu = Reservation.objects.filter(pool=scene["pool"], released_at__isnull=True,
                                         task_id__in=Task.objects.filter(workflow=bobs).values("pk"),
                                         ).aggregate(total=Sum("gpu"))["total"]
    assert bob_gpu > 0
    # given alice, whom the API shows her workflows only
    client.force_login(scene["alice"])
    assert {row["id"] for row in client.get("/api/workflows/").json()["results"]} == {
        "multiple-nvl72-same-zone-1", "big-clique-job-1"}

    # when she opens the pool page (no more queries than before: the rule reads the rows already read)
    with django_assert_max_num_queries(20):
        text = _text(client.get("/pools/nvl72/"))

    # then bob's workflow is one row "of other users" with its GPUs, nowhere its id or its owner
    assert bobs.workflow_id not in text
    assert ">bob<" not in text and "of bob" not in text
    row = re.search(r'<tr data-others="1">\s*<td class="muted">1 workflow of other users</td>\s*'
                    r'<td class="muted">—</td>\s*<td class="num">(\d+)</td>\s*<td class="num">(\d+)</td>', text)
    assert row is not None and int(row.group(2)) == bob_gpu
    assert re.search(r'<span class="occ others" data-others="1" title="\d+ tasks?">1 workflow of other users · '
                     r'\d+ GPU</span>', text)
    # and staff see it named and linked, with its owner
    client.force_login(scene["staff"])
    staff_text = _text(client.get("/pools/nvl72/"))
    assert f'<tr data-workflow="{bobs.workflow_id}">' in staff_text
    assert f'of bob"><a href="/workflows/{bobs.workflow_id}/?user=bob">' in staff_text
    assert "of other users" not in staff_text


def test_pool_page_lists_the_largest_holders_and_follows_releases(alice_client, scene, monkeypatch):
    """Thousands of small gangs can hold a big pool: the page names the largest holders and counts the
    rest; a release shows on the next request although the tree is kept between requests."""
    from pages.viewmodels import pools as viewmodel
    from workflows.lifecycle.reservations import reservations_release

    # given a page that lists one holder and names one per domain
    monkeypatch.setattr(viewmodel, "OCCUPANCY_ROWS", 1)
    holding = Reservation.objects.filter(pool=scene["pool"], released_at__isnull=True).values("task_id")
    held = set(Task.objects.filter(pk__in=holding).values_list("workflow__workflow_id", flat=True))
    assert len(held) >= 2
    # when
    first = _text(alice_client.get("/pools/nvl72/"))
    released = Task.objects.filter(workflow__workflow_id="single-nvl72-rack-1").values_list("pk", flat=True)
    reservations_release(task_ids=list(released))
    after = _text(alice_client.get("/pools/nvl72/"))
    # then
    assert len(re.findall(r"<tr data-workflow=", first)) == 1
    assert re.search(rf"… and {len(held) - 1} more workflows? holding \d+ GPUs?", first)
    assert 'data-others="1"' in first  # bob's, not named for alice
    assert 'data-others="1"' not in after


def test_unknown_pool_and_workflow_are_404(alice_client):
    assert alice_client.get("/pools/nope/").status_code == 404
    assert alice_client.get("/workflows/nope-1/").status_code == 404


# ------------------------------------------------------------------------------------------------
# Submit
# ------------------------------------------------------------------------------------------------
def test_dry_run_shows_tree_and_placement_preview_and_stores_nothing(alice_client, scene):
    # given
    before = Workflow.objects.count()

    # when
    response = alice_client.post("/submit/", {"spec": example_spec("multiple-nvl72-same-zone"), "pool": "nvl72",
                                             "priority": "NORMAL", "action": "dry_run"})

    # then
    text = _text(response)
    assert response.status_code == 200
    assert "the spec is valid" in text
    assert "zone = workflow-group" in text and "would be placed now" in text
    assert len(re.findall(r'<tr data-task="model\d-shard\d"><td>', text)) == 8
    assert Workflow.objects.count() == before


def test_dry_run_lists_errors_with_paths_and_lines(alice_client, scene):
    # given: an unknown key and a bad quantity
    spec = example_spec("multiple-nvl72-same-zone").replace("- key: zone", "- key: zoen", 1)
    spec = spec.replace("memory: 64Gi", "memory: lots", 1)

    # when
    response = alice_client.post("/submit/", {"spec": spec, "pool": "nvl72", "action": "dry_run"})

    # then
    text = _text(response)
    assert response.status_code == 400
    lines = spec.splitlines()
    key_line = next(i for i, line in enumerate(lines, 1) if "zoen" in line)
    memory_line = next(i for i, line in enumerate(lines, 1) if "memory: lots" in line)
    assert f'<span class="path">resources.model-1.topology[1].key</span> <span class="muted">(line {key_line})</span>' \
        in text or f"(line {key_line})" in text
    assert f"(line {memory_line})" in text
    assert "zoen" in text


def test_the_same_error_at_thirty_tasks_is_said_once_with_its_count(alice_client, scene):
    # given 30 tasks without a command
    rows = "\n".join(f"    - {{name: shard{i}, {'lead: true, ' if i == 1 else ''}image: busybox}}"
                     for i in range(1, 31))
    spec = f"workflow:\n  name: thirty\n  groups:\n  - name: g\n    tasks:\n{rows}\nresources:\n  default: {{gpu: 1}}\n"
    # when it is dry-run on the submit page
    response = alice_client.post("/submit/", {"spec": spec, "pool": "nvl72", "action": "dry_run"})
    # then one row says it, with the count, under a heading that counts every problem
    text = _text(response)
    assert response.status_code == 400
    assert "The spec has 30 problems" in text
    assert text.count("this field is required") == 1
    assert 'workflow.groups[0].tasks[*].command' in text and 'data-count="30"' in text and "(30 times)" in text


def test_submit_creates_the_workflow_and_redirects(alice_client, scene):
    # when
    response = alice_client.post("/submit/", {"spec": big_clique_spec(4), "pool": "nvl72", "priority": "LOW",
                                             "action": "submit"})

    # then
    assert response.status_code == 302
    assert response["Location"] == reverse("workflow-detail", args=["big-clique-job-2"])
    workflow = Workflow.objects.get(workflow_id="big-clique-job-2")
    assert workflow.submitted_by == scene["alice"] and workflow.priority == "LOW"


def test_submit_accepts_an_uploaded_file(alice_client, scene):
    # given
    from django.core.files.uploadedfile import SimpleUploadedFile

    upload = SimpleUploadedFile("wf.yaml", example_spec("single-nvl72-rack").encode(), "application/yaml")

    # when
    response = alice_client.post("/submit/", {"spec_file": upload, "pool": "nvl72", "action": "dry_run"})

    # then
    assert response.status_code == 200
    assert "Dry run: single-nvl72-rack on pool nvl72" in _text(response)


def test_submit_takes_an_uploaded_file_as_large_as_a_spec_may_be(alice_client, scene):
    # given: a file within the spec's 1 MiB (over 1,000,000 bytes), and one over it
    from django.core.files.uploadedfile import SimpleUploadedFile

    from workflows.spec.loader import SpecLimits

    spec = example_spec("single-nvl72-rack")
    limit = SpecLimits().max_bytes
    within = SimpleUploadedFile("wf.yaml", (spec + "#" * (limit - len(spec.encode()) - 1) + "\n").encode())
    over = SimpleUploadedFile("big.yaml", (spec + "#" * (limit - len(spec.encode())) + "\n").encode())

    # when
    accepted = alice_client.post("/submit/", {"spec_file": within, "pool": "nvl72", "action": "dry_run"})
    refused = alice_client.post("/submit/", {"spec_file": over, "pool": "nvl72", "action": "dry_run"})

    # then
    assert accepted.status_code == 200
    assert "Dry run: single-nvl72-rack on pool nvl72" in _text(accepted)
    assert refused.status_code == 400
    assert "The file is larger than 1048576 bytes, the limit of a spec." in _text(refused)


def test_submit_refuses_an_upload_past_the_request_limit_before_writing_it(alice_client, scene, settings, tmp_path):
    # given a body limit, a temporary folder to watch, and a file past the limit
    from django.core.files.uploadedfile import SimpleUploadedFile

    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 64 * 1024
    settings.FILE_UPLOAD_TEMP_DIR = str(tmp_path)
    settings.FILE_UPLOAD_MAX_MEMORY_SIZE = 1024
    big = SimpleUploadedFile("big.yaml", b"#" * (64 * 1024 + 1))

    # when
    refused = alice_client.post("/submit/", {"spec_file": big, "pool": "nvl72", "action": "dry_run"})

    # then
    assert refused.status_code == 400
    assert list(tmp_path.iterdir()) == []


def test_submit_page_loads_an_example(alice_client):
    # when
    response = alice_client.get("/submit/?example=scoped-group-example&pool=nvl72")

    # then
    assert response.status_code == 200
    assert "name: scoped-group-example" in response.content.decode()


def test_placement_map_folds_untouched_domains_of_big_pools(alice_client, scene, monkeypatch):
    # given: fold every untouched sibling (as for a pool with many racks)
    from pages.viewmodels import workflows as workflow_pages

    monkeypatch.setattr(workflow_pages, "COMPACT_SIBLING_LIMIT", 0)

    # when
    response = alice_client.get(f"/workflows/{scene['placed'].workflow_id}/")

    # then: one zone opened, the other counted with its free GPUs
    text = _text(response)
    assert text.count('data-key="zone"') == 1
    assert '<div class="more" data-hidden="1">+1 other zone · 288/288 GPU free</div>' in text
    assert text.count('class="cell ours') == 8


# ------------------------------------------------------------------------------------------------
# Natural order of names (shard2 before shard10)
# ------------------------------------------------------------------------------------------------
def test_pages_list_tasks_pools_and_nodes_in_natural_order(alice_client, scene):
    from tests.factories import make_node, make_pool

    # given: a gang whose spec lists shard10 first, and pools and nodes named with numbers
    spec = big_clique_spec(tasks=3).replace("name: shard1\n", "name: shard10\n").replace("big-clique-job", "nat")
    from workflows.services import workflow_submit

    workflow, _ = workflow_submit(user=scene["alice"], pool_name="nvl72", spec=spec)
    for name in ("p10", "p9"):
        pool = make_pool(name, keys=[("rack", "example.com/rack")])
        for node in ("n10", "n9", "n1"):
            make_node(pool, f"{name}-{node}", {"example.com/rack": "r1"})

    # when
    detail = alice_client.get(f"/workflows/{workflow.workflow_id}/").content.decode()
    pools = alice_client.get("/pools/").content.decode()
    nodes = alice_client.get("/pools/p9/").content.decode()

    # then
    assert re.findall(r'<tr data-task="([^"]+)"', detail) == ["shard2", "shard3", "shard10"]
    assert re.findall(r'<tr data-pool="([^"]+)"', pools) == ["nvl72", "p9", "p10"]
    assert re.findall(r'<tr data-node="([^"]+)"', nodes) == ["p9-n1", "p9-n9", "p9-n10"]
    assert re.findall(r'class="cell heat-\d" data-node="([^"]+)"', nodes) == ["p9-n1", "p9-n9", "p9-n10"]


def test_node_lists_keep_natural_order_whatever_the_pools_size(alice_client, scene, monkeypatch):
    from pages.viewmodels import pools as viewmodel
    from scheduler.models import Node
    from tests.factories import make_node, make_pool

    # given: a pool past the old natural-order limit (once database order there)
    monkeypatch.setattr(viewmodel, "NATURAL_NODE_ORDER_LIMIT", 5)
    pool = make_pool("big", keys=[("rack", "example.com/rack")])
    for number in (10, 9, 2, 1, 11, 3, 20):
        make_node(pool, f"n{number}", {"example.com/rack": "r1"})

    # when
    first = alice_client.get("/pools/big/").content.decode()
    from scheduler.reads.domains import pool_state_fingerprint

    state = pool_state_fingerprint(pool)
    kept, again = viewmodel._node_order(pool, state), viewmodel._node_order(pool, state)
    Node.objects.filter(pool=pool, name="n3").update(used_gpu=1)
    used = viewmodel._node_order(pool, pool_state_fingerprint(pool))
    Node.objects.filter(pool=pool, name="n20").update(name="n0")
    renamed = alice_client.get("/pools/big/").content.decode()

    # then: natural order, sorted once while the nodes stay the same (and after a write that renamed
    # nothing), sorted again after a rename
    assert re.findall(r'<tr data-node="([^"]+)"', first) == ["n1", "n2", "n3", "n9", "n10", "n11", "n20"]
    assert again is kept and used is kept
    assert re.findall(r'<tr data-node="([^"]+)"', renamed) == ["n0", "n1", "n2", "n3", "n9", "n10", "n11"]


def test_a_pool_page_without_access_says_which_pool_and_what_to_do(alice_client, scene):
    from django.contrib.auth.models import Group

    from scheduler.models import PoolGrant
    from tests.factories import make_nvl72_pool

    private = make_nvl72_pool("private", zones=1, spines=1, racks=1, nodes=2)
    PoolGrant.objects.create(pool=private, team=Group.objects.create(name="llm"))

    response = alice_client.get("/pools/private/")

    assert response.status_code == 403
    assert ("You have no access to pool private: ask an administrator to grant it to you or your team."
            in _text(response))
    assert 'href="/pools/"' in response.content.decode()
