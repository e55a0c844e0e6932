"""The apps pages in real Chromium against the live server: the list from the navigation, an app's
page, and its form launching a workflow with a changed parameter (and a dry run first)."""

from __future__ import annotations

import pytest

from catalog.services import app_create, app_update
from tests.factories import make_nvl72_pool
from workflows.models import Workflow

pytestmark = pytest.mark.django_db(transaction=True)

SPEC = """\
workflow:
  name: {{ workflow_name }}
  tasks:
  - name: main
    image: {{ image }}
    command: [sh, -c, "echo {{ message }} {{ repeat }}"]
default-values:
  workflow_name: hello   # Name of the workflow
  # The image the task runs
  image: busybox
  message: hi
  repeat: 3
  sizes: [1, 2]
"""


@pytest.fixture
def app_scene(django_user_model):
    alice = django_user_model.objects.create_user(username="alice", password="alice-password")
    make_nvl72_pool("nvl72", zones=1, spines=1, racks=1, nodes=2)
    app_create(owner=alice, name="hello-app", description="Says hello", spec=SPEC.replace("message: hi", "message: v1"))
    app_update(user=alice, name="hello-app", spec=SPEC)
    return alice


def test_launch_an_app_from_its_page_with_a_changed_parameter(app_scene, page_factory, live_server, screenshots):
    # given
    page, console = page_factory("alice", "alice-password")
    # when: the apps list, from the navigation
    page.click("nav >> text=Apps")
    page.wait_for_selector("#app-table")
    rows = page.locator("#app-table tbody tr").evaluate_all("rows => rows.map(r => r.dataset.app)")
    assert rows == ["hello-app"]
    assert page.inner_text('tr[data-app="hello-app"] td.num') == "2"
    # when: the app's page
    page.click("#app-table >> text=hello-app")
    page.wait_for_selector("#app-launch-form")
    # then: the parameters with their defaults prefilled and their comments; a list default kept as it is
    assert page.input_value("#id_param_message") == "hi"
    assert page.input_value("#id_param_repeat") == "3"
    assert page.inner_text('tr[data-parameter="image"] td.muted') == "The image the task runs"
    assert page.locator("#id_param_sizes").count() == 0
    assert "[1, 2]" in page.inner_text('tr[data-parameter="sizes"]')
    assert page.locator("#app-versions tbody tr").count() == 2
    _shot = screenshots / "app.png"
    page.screenshot(path=str(_shot), full_page=True)
    # when: a dry run with a changed message
    page.fill("#id_param_message", "bonjour")
    page.click("#app-dry-run-button")
    page.wait_for_selector("#app-dry-run")
    assert "the spec is valid" in page.inner_text("#app-dry-run")
    assert page.input_value("#id_param_message") == "bonjour"
    assert Workflow.objects.count() == 0
    # when: launched
    page.click("#app-launch-button")
    page.wait_for_url("**/workflows/hello-1/")
    # then: the workflow page names the app version; the workflow was rendered with the value
    assert page.inner_text("#workflow-app") == "hello-app version 2"
    workflow = Workflow.objects.get()
    assert (workflow.app_name, workflow.app_version) == ("hello-app", 2)
    assert workflow.template_values == {"workflow_name": "hello", "image": "busybox", "message": "bonjour",
                                        "repeat": 3, "sizes": [1, 2]}
    # and the link back opens that version's page
    page.click("#workflow-app a")
    page.wait_for_selector("#app-launch-form")
    assert page.inner_text("#app-version") == "version 2"
    assert console.errors == []


def test_an_older_version_and_a_refusal_on_the_page(app_scene, page_factory, live_server):
    page, console = page_factory("alice", "alice-password")
    page.goto(f"{live_server.url}/apps/hello-app/?version=1")
    page.wait_for_selector("#app-launch-form")
    assert page.input_value("#id_param_message") == "v1"
    # when: a value that makes the spec invalid (a workflow name with a space)
    page.fill("#id_param_workflow_name", "bad name")
    page.click("#app-launch-button")
    page.wait_for_selector("#launch-errors")
    # then: the error names the field, nothing is stored, the values stay in the form
    assert "workflow.name" in page.inner_text("#launch-errors")
    assert page.input_value("#id_param_workflow_name") == "bad name"
    assert Workflow.objects.count() == 0
    assert [error for error in console.errors if "400" not in error] == []  # the refusal is a 400 answer
