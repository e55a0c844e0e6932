"""The workflow list's label and tag filters, and the labels and tags a workflow page shows, in real
Chromium against the live test server."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db(transaction=True)

SPEC = """workflow:
  name: {name}
  labels: {{team: {team}, project: {project}}}
  tasks:
  - {{name: train, image: busybox, command: ["true"]}}
resources:
  default: {{gpu: 1}}
"""


@pytest.fixture
def labelled(django_user_model):
    from tests.factories import make_nvl72_pool
    from workflows.models import Tag
    from workflows.services import workflow_submit

    alice = django_user_model.objects.create_user(username="alice", password="alice-password")
    make_nvl72_pool("nvl72", zones=1, spines=1, racks=1, nodes=4)
    for name, team, project in (("a", "robotics_a", "sim_1"), ("b", "robotics_b", "hil_1"), ("c", "vision", "sim_2")):
        workflow_submit(user=alice, pool_name="nvl72", spec=SPEC.format(name=name, team=team, project=project))
    keep = Tag.objects.create(name="keep")
    Tag.objects.create(name="other")
    workflow = alice.workflows.get(workflow_id="c-1")
    workflow.tags.add(keep)
    return alice


def _rows(page) -> list[str]:
    return sorted(page.locator("#workflow-table tbody tr").evaluate_all("rows => rows.map(r => r.dataset.workflow)"))


def test_the_list_filters_by_label_selectors_and_tags(labelled, page_factory, live_server, screenshots):
    # given
    page, console = page_factory("alice", "alice-password")
    page.goto(f"{live_server.url}/workflows/")
    page.wait_for_selector("#workflow-table")
    assert _rows(page) == ["a-1", "b-1", "c-1"]
    # when: a wildcard selector
    page.fill("#id_label", "team=robotics_*")
    page.click("#workflow-filters button[type=submit]")
    page.wait_for_url("**label=team%3Drobotics_*")
    # then
    assert _rows(page) == ["a-1", "b-1"]
    # when: two selectors, one with alternatives (all must match)
    page.fill("#id_label", "team=robotics_* project=(hil_*|real_*)")
    page.click("#workflow-filters button[type=submit]")
    page.wait_for_url("**project**")
    assert _rows(page) == ["b-1"]
    page.screenshot(path=str(screenshots / "workflow-list-labels.png"), full_page=True)
    # when: a tag
    page.fill("#id_label", "")
    page.select_option("#id_tag", "keep")
    page.click("#workflow-filters button[type=submit]")
    page.wait_for_url("**tag=keep**")
    assert _rows(page) == ["c-1"]
    assert "#keep" in page.inner_text('tr[data-workflow="c-1"] td.labels')
    assert "team=vision" in page.inner_text('tr[data-workflow="c-1"] td.labels')
    # when: a selector that does not parse
    page.select_option("#id_tag", "")
    page.fill("#id_label", "team=(a")
    page.click("#workflow-filters button[type=submit]")
    page.wait_for_selector("#filter-errors")
    # then: it says why, and lists nothing
    assert "label: team=(a: an alternative '(' has no ')'" in page.inner_text("#filter-errors")
    assert page.locator("#workflow-table").count() == 0
    # and the workflow page shows its labels and tags
    page.goto(f"{live_server.url}/workflows/c-1/")
    page.wait_for_selector("#workflow-labels")
    assert page.inner_text("#workflow-labels").split() == ["project=sim_2", "team=vision"]
    assert page.inner_text("#workflow-tags").strip() == "#keep"
    assert console.errors == []
