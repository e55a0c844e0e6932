"""Every status page in real Chromium (Playwright sync API) against the live test server: log in
through the form, check the content, no console errors, live refresh without a reload, screenshots."""

from __future__ import annotations

from pathlib import Path

import pytest

from workflows.choices import TaskStatus
from workflows.models import Workflow

pytestmark = pytest.mark.django_db(transaction=True)


def _shot(page, folder: Path, name: str) -> None:
    path = folder / name
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 10_000


def _start_running(workflow: Workflow) -> None:
    """What the dispatch backend reports once pods run: every task and group RUNNING."""
    from workflows.lifecycle.transitions import group_status_set, task_status_set, workflow_status_refresh

    for group in workflow.groups.order_by("position"):
        for task in group.tasks.order_by("position"):
            task_status_set(task, TaskStatus.RUNNING)
        group_status_set(group, TaskStatus.RUNNING)
    workflow_status_refresh(workflow)


def test_dashboard_list_and_workflow_detail_live(scene, page_factory, live_server, screenshots):
    # given
    page, console = page_factory("alice", "alice-password")
    placed = scene["placed"]

    # then: the dashboard
    assert page.inner_text('#status-counts [data-status="RUNNING"] .n') == "1"
    assert page.inner_text('#status-counts [data-status="PENDING"] .n') == "1"
    assert page.inner_text('tr[data-pool="nvl72"] .gpu-free') == "488"
    _shot(page, screenshots, "dashboard.png")

    # when: the list, sorted by id, filtered by status
    page.click("nav >> text=Workflows")
    page.wait_for_selector("#workflow-table")
    page.click('th a[data-sort="id"]')
    page.wait_for_url("**/workflows/?sort=id")
    rows = page.locator("#workflow-table tbody tr").evaluate_all("rows => rows.map(r => r.dataset.workflow)")
    assert rows == ["big-clique-job-1", "multiple-nvl72-same-zone-1"]
    page.select_option("#id_status", "PENDING")
    page.click("#workflow-filters button[type=submit]")
    page.wait_for_url("**status=PENDING**")
    rows = page.locator("#workflow-table tbody tr").evaluate_all("rows => rows.map(r => r.dataset.workflow)")
    assert rows == ["big-clique-job-1"]

    # when: the detail page of the placed workflow
    page.goto(f"{live_server.url}/workflows/{placed.workflow_id}/")
    page.wait_for_selector("svg.tree-svg")
    page.evaluate("window.__noReload = true")

    # then
    assert page.inner_text("#workflow-status") == "RUNNING"
    assert page.locator('svg.tree-svg g[data-kind="task"]').count() == 8
    assert page.locator('svg.tree-svg g[data-kind="node"]').count() == 3
    assert "zone = workflow-group" in page.text_content("svg.tree-svg")
    assert page.locator("#placement-map .cell.ours").count() == 8
    assert page.locator("#placement-map .dom.touched[data-key='zone']").count() == 1
    assert page.inner_text('tr[data-task="model1-shard1"] .task-status') == "INITIALIZING"

    # when: the pods start (another process records it); the page refreshes itself
    _start_running(placed)
    page.wait_for_function(
        "() => document.querySelector('tr[data-task=\"model2-shard4\"] .task-status').innerText === 'RUNNING'",
        timeout=10_000,
    )

    # then: no reload happened, every task shows RUNNING, the history grew
    assert page.evaluate("window.__noReload") is True
    assert page.locator('.task-status[data-status="RUNNING"]').count() == 8
    assert page.locator("#history tbody tr").count() >= 20
    page.evaluate("window.scrollTo(0, 0)")
    _shot(page, screenshots, "workflow-detail.png")
    assert console.errors == []


def test_waiting_workflow_pool_pages_and_cancel(scene, page_factory, live_server, screenshots):
    # given
    page, console = page_factory("alice", "alice-password")
    waiting = scene["waiting"]

    # when: the waiting workflow
    page.goto(f"{live_server.url}/workflows/{waiting.workflow_id}/")
    page.wait_for_selector("#waiting-trainer")

    # then: the reason in plain words at the top
    reason = page.inner_text("#waiting-trainer")
    assert "Group trainer is waiting" in reason
    assert "fits 18 of 20" in reason
    # the same lines as the API's groups[].waiting.lines and osmo workflow query
    lines = page.locator('[data-waiting="trainer"] li').all_inner_texts()
    assert lines[0] == "Queue: first in the pool's queue; nothing is ahead of it."
    assert lines[1].startswith("Why: ") and "(of the " in lines[1]
    _shot(page, screenshots, "workflow-waiting.png")

    # when: its owner cancels it with the button (POST + CSRF)
    page.click("#cancel-button")
    page.wait_for_selector("text=was cancelled")

    # then
    assert page.inner_text("#workflow-status") == "FAILED_CANCELED"
    assert page.locator("#cancel-button").count() == 0

    # when: the pools, then the pool
    page.click("nav >> text=Pools")
    page.wait_for_selector('tr[data-pool="nvl72"]')
    page.click('tr[data-pool="nvl72"] a')
    page.wait_for_selector("#pool-map")
    page.evaluate("window.__noReload = true")

    # then
    assert page.locator('#pool-map .dom[data-key="zone"]').count() == 2
    assert page.locator("#pool-map .cell").count() == 144
    assert page.locator('#occupancy tr[data-workflow="multiple-nvl72-same-zone-1"]').count() == 1
    assert page.locator("#nodes tbody tr").count() == 25
    _shot(page, screenshots, "pool.png")

    # when: capacity frees elsewhere (external usage drops); the heat map follows without a reload
    from scheduler.models import Node

    before = page.inner_text("#pool-totals .gpu-free")
    Node.objects.filter(pool=scene["pool"], name__startswith="z2-s2-r2-n0").update(used_gpu=0)
    page.wait_for_function(f"() => document.querySelector('#pool-totals .gpu-free').innerText !== '{before}'",
                           timeout=10_000)

    # then
    assert int(page.inner_text("#pool-totals .gpu-free")) == int(before) + 36
    assert page.evaluate("window.__noReload") is True
    assert console.errors == []


def test_submit_page_dry_run_then_submit(scene, page_factory, live_server, screenshots):
    # given
    page, console = page_factory("alice", "alice-password")

    # when: load seed example 3, dry-run it
    page.click("nav >> text=Submit")
    page.wait_for_selector("#submit-form")
    page.click("text=multiple-nvl72-same-zone")
    # (the link loads the page again: until the new one is parsed there may be no #id_spec)
    page.wait_for_function("() => document.querySelector('#id_spec')?.value.includes('workflow-group')")
    page.click("#dry-run-button")
    page.wait_for_selector("#dry-run")

    # then: the tree and the placement preview
    assert "the spec is valid" in page.inner_text("#dry-run h2")
    assert page.locator("#dry-run svg.tree-svg g[data-kind='task']").count() == 8
    assert page.locator("#dry-run .preview-tasks tbody tr").count() == 8
    _shot(page, screenshots, "submit.png")

    # when: submit it
    page.click("#submit-button")
    page.wait_for_selector("#workflow-status")

    # then
    assert page.url == f"{live_server.url}/workflows/multiple-nvl72-same-zone-2/"
    assert "Submitted multiple-nvl72-same-zone-2" in page.inner_text("ul.messages")
    assert Workflow.objects.filter(workflow_id="multiple-nvl72-same-zone-2", submitted_by=scene["alice"]).exists()
    assert console.errors == []


def test_staff_sees_every_workflow(scene, page_factory, live_server):
    # given
    page, console = page_factory("root", "root-password")

    # when
    page.goto(f"{live_server.url}/workflows/")
    page.wait_for_selector("#workflow-table")

    # then
    rows = page.locator("#workflow-table tbody tr").count()
    assert rows == 3
    assert page.locator("#id_user").count() == 1  # the user filter is for staff
    assert console.errors == []
