"""The waiting and never-fits paths in real Chromium: a gang queued behind busy capacity shows, on its
workflow page, its place in the queue and the workflows holding the capacity it needs; a gang that can
never fit is refused (API 400 ``never_fits``; the submit page shows the same words). Also a visual
detail of the placement map: task names are shown in full."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from tests.factories import make_nvl72_pool
from tests.pages.conftest import big_clique_spec
from workflows.models import Workflow

pytestmark = pytest.mark.django_db(transaction=True)


def _rack_job(name: str) -> str:
    """Four 4-GPU tasks in one gpu-clique: a whole rack of the ``busy`` pool below."""
    return big_clique_spec(tasks=4).replace("big-clique-job", name)


def test_a_gang_behind_busy_capacity_says_who_holds_it_and_its_place(scene, page_factory, live_server):
    from workflows.scheduling.cycle import placement_cycle_run
    from workflows.services import workflow_submit

    # given: a one-rack pool that bob's gang fills, then two of alice's gangs that need the same rack
    pool = make_nvl72_pool("busy", zones=1, spines=1, racks=1, nodes=4)
    holder, _ = workflow_submit(user=scene["bob"], pool_name="busy", spec=_rack_job("rack-job"))
    placement_cycle_run(pool_id=pool.pk)
    first, _ = workflow_submit(user=scene["alice"], pool_name="busy", spec=_rack_job("second"))
    second, _ = workflow_submit(user=scene["alice"], pool_name="busy", spec=_rack_job("third"))
    placement_cycle_run(pool_id=pool.pk)
    page, console = page_factory("alice", "alice-password")

    # when: the later of alice's gangs
    page.goto(f"{live_server.url}/workflows/{second.workflow_id}/")
    page.wait_for_selector("#waiting-trainer")

    # then: its place in the queue, and what holds the rack it needs: bob's workflow, which alice may not
    # see (the API hides it from her), summed without its name
    lines = page.locator('[data-waiting="trainer"] li').all_inner_texts()
    assert lines[0] == "Queue: 2nd in the pool's queue; ahead of it: 1 NORMAL."
    held = next(line for line in lines if "held by" in line)
    assert "1 workflow of other users (16 GPUs, 4 tasks)" in held
    assert holder.workflow_id not in held
    assert held.startswith("No gpu-clique has room for any of these tasks now; the gpu-cliques are held by: ")
    assert "It can start when enough of these finish" in page.inner_text("#waiting-trainer")

    # when: the earlier one
    page.goto(f"{live_server.url}/workflows/{first.workflow_id}/")
    page.wait_for_selector("#waiting-trainer")

    # then
    lines = page.locator('[data-waiting="trainer"] li').all_inner_texts()
    assert lines[0] == "Queue: first in the pool's queue; nothing is ahead of it."
    assert console.errors == []


def test_a_gang_that_never_fits_is_refused_by_the_api_and_the_submit_page(scene, page_factory, live_server):
    # given: 20 whole nodes in one gpu-clique, where a clique has 18
    spec = big_clique_spec(tasks=20).replace("big-clique-job", "too-big")
    api = APIClient()
    api.force_authenticate(scene["alice"])

    # when: through the API
    response = api.post("/api/workflows/", {"pool": "nvl72", "spec": spec}, format="json")

    # then
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "never_fits"
    assert body["message"].startswith("Group(s) trainer can never be placed in pool nvl72, even when nothing else")

    # when: through the submit page
    page, console = page_factory("alice", "alice-password")
    page.goto(f"{live_server.url}/submit/")
    page.wait_for_selector("#submit-form")
    page.select_option("#id_pool", "nvl72")
    page.fill("#id_spec", spec)
    page.click("#submit-button")
    page.wait_for_selector("#spec-errors")

    # then: the API's words, and nothing stored
    errors = page.inner_text("#spec-errors")
    assert "can never be placed in pool nvl72, even when nothing else runs" in errors
    assert page.url == f"{live_server.url}/submit/"
    assert not Workflow.objects.filter(name="too-big").exists()
    assert [error for error in console.errors if "400" not in error] == []  # the refusal itself


def test_placement_map_shows_task_names_in_full(scene, page_factory, live_server):
    # given
    page, console = page_factory("alice", "alice-password")

    # when
    page.goto(f"{live_server.url}/workflows/{scene['placed'].workflow_id}/")
    page.wait_for_selector("#placement-map .cell.ours .tk")

    # then: every task name is drawn whole (wrapped, not cut) and kept in its tooltip
    names = page.locator("#placement-map .cell.ours .tk").evaluate_all(
        "els => els.map(e => [e.innerText, e.title, e.scrollWidth <= e.clientWidth + 1])"
    )
    assert len(names) == 8
    assert all(text == title and fits for text, title, fits in names), names
    assert sorted(text for text, _title, _fits in names)[0] == "model1-shard1"
    # and the favicon is served
    icon = page.evaluate(
        """async () => { const r = await fetch(document.querySelector("link[rel=icon]").href);
                        return [r.status, r.headers.get("content-type")]; }"""
    )
    assert icon[0] == 200 and icon[1].startswith("image/svg+xml")
    assert console.errors == []
