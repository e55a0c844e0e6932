"""``osmo app``: the installed console script against a live server (real HTTP, token auth, the API)."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import Group

from scheduler.models import PoolGrant
from tests.factories import HELLO_APP_SPEC, make_nvl72_pool
from workflows.models import Workflow

pytestmark = pytest.mark.django_db(transaction=True)

SPEC = HELLO_APP_SPEC


@pytest.fixture
def spec_files(tmp_path):
    first = tmp_path / "app.yaml"
    first.write_text(SPEC)
    second = tmp_path / "app-v2.yaml"
    second.write_text(SPEC.replace("message: hi", "message: hey  # What it says"))
    return str(first), str(second)


def test_create_update_show_spec_info_list_and_submit_with_set(osmo_process, nvl72, spec_files):
    first, second = spec_files
    # when
    created = osmo_process("app", "create", "hello-app", "-d", "Says hello", "-f", first)
    same = osmo_process("app", "update", "hello-app", "-f", first)
    updated = osmo_process("app", "update", "hello-app", "-f", second)
    shown = osmo_process("app", "show", "hello-app")
    shown_first = osmo_process("app", "show", "hello-app:1")
    spec = osmo_process("app", "spec", "hello-app", "--version", "1")
    info = osmo_process("app", "info", "hello-app")
    listed = osmo_process("app", "list")
    submitted = osmo_process("app", "submit", "hello-app", "--pool", "nvl72", "--set", "message=bonjour",
                             "workflow_name=greeting", "--label", "team=vision")
    # then
    assert (created.returncode, created.stdout) == (0, "App hello-app created successfully\n"), created.stderr
    assert same.stdout == "No version was created because no changes were made to the app.\n"
    assert (updated.returncode, updated.stdout) == (0, "App hello-app updated successfully\nVersion: 2\n")
    assert shown.stdout.splitlines() == [
        "DESCRIPTION", "  Says hello", "", "PARAMETERS",
        "  workflow_name: hello  # Name of the workflow",
        "  image: busybox  # The image the task runs",
        "  message: hey  # What it says"]
    assert shown_first.stdout.splitlines()[-1] == "  message: hi"
    assert spec.stdout == SPEC
    lines = info.stdout.splitlines()
    assert lines[0] == "Name: hello-app" and lines[2] == "Owner: alice" and lines[4] == "Description: Says hello"
    assert lines[6].split() == ["VERSION", "CREATED", "BY", "CREATED", "DATE", "STATUS"]
    assert [line.split()[:2] + line.split()[-1:] for line in lines[7:]] == [["1", "alice", "READY"],
                                                                            ["2", "alice", "READY"]]
    header, row = listed.stdout.splitlines()
    assert header.split() == ["OWNER", "NAME", "DESCRIPTION", "CREATED", "DATE", "LATEST", "VERSION"]
    assert row.split()[:4] == ["alice", "hello-app", "Says", "hello"] and row.split()[-1] == "2"
    assert submitted.returncode == 0, submitted.stderr
    assert submitted.stdout.splitlines()[0].startswith(
        "Submitted workflow greeting-1 from app hello-app version 2 to pool nvl72 (priority NORMAL): ")
    workflow = Workflow.objects.get()
    assert (workflow.workflow_id, workflow.app_name, workflow.app_version) == ("greeting-1", "hello-app", 2)
    assert workflow.template_values["message"] == "bonjour"
    assert workflow.labels == {"team": "vision"}  # --label, as on workflow submit
    query = osmo_process("workflow", "query", "greeting-1")
    assert "  app hello-app version 2" in query.stdout.splitlines()
    by_app = [json.loads(osmo_process("workflow", "list", "--app", ref, "-t", "json").stdout)["count"]
              for ref in ("hello-app", "hello-app:2", "hello-app:1", "other-app")]
    assert by_app == [1, 1, 0, 0]
    bad_app = osmo_process("workflow", "list", "-P", "hello-app:latest")
    assert bad_app.returncode == 2
    assert bad_app.stderr == "error: app: 'hello-app:latest': write NAME or NAME:VERSION (a version number)\n"


def test_submit_an_older_version_dry_run_and_json(osmo_process, nvl72, spec_files):
    first, second = spec_files
    osmo_process("app", "create", "hello-app", "-d", "Says hello", "-f", first)
    osmo_process("app", "update", "hello-app", "-f", second)
    # when
    dry = osmo_process("app", "submit", "hello-app:1", "--pool", "nvl72", "--dry-run")
    old = osmo_process("app", "submit", "hello-app", "--version", "1", "--pool", "nvl72", "--json")
    listed = json.loads(osmo_process("app", "list", "--all-users", "-t", "json").stdout)
    by_users = osmo_process("app", "list", "--user", "bob", "alice", "--name", "HELLO")
    nobody = osmo_process("app", "list", "--user", "bob")
    # then
    assert dry.returncode == 0, dry.stderr
    assert Workflow.objects.filter(workflow_id="hello-1", app_version=1).exists()
    assert json.loads(old.stdout)["app"]["version"] == 1
    assert [(item["name"], item["latest_version"]) for item in listed["apps"]] == [("hello-app", 2)]
    assert by_users.stdout.splitlines()[1].split()[:2] == ["alice", "hello-app"]
    assert nobody.stdout == "There are no apps to view.\n"


def test_bad_input_is_one_line_and_a_non_zero_exit(osmo_process, nvl72, spec_files, tmp_path):
    first, _second = spec_files
    osmo_process("app", "create", "hello-app", "-d", "Says hello", "-f", first)
    broken = tmp_path / "broken.yaml"
    broken.write_text(SPEC.replace("{{ image }}", "{{ missing }}"))
    # when
    unknown = osmo_process("app", "submit", "hello-app", "--pool", "nvl72", "--set", "unknown=1")
    twice = osmo_process("app", "create", "hello-app", "-d", "again", "-f", first)
    invalid = osmo_process("app", "create", "other", "-d", "x", "-f", str(broken))
    missing = osmo_process("app", "show", "nope")
    private = make_nvl72_pool("private", zones=1, spines=1, racks=1, nodes=2)
    PoolGrant.objects.create(pool=private, team=Group.objects.create(name="llm"))
    forbidden = osmo_process("app", "submit", "hello-app", "--pool", "private")
    no_version = osmo_process("app", "delete", "hello-app")
    bad_label = osmo_process("app", "submit", "hello-app", "--pool", "nvl72", "--label", "team=not ok")
    # then
    assert unknown.returncode == 2 and unknown.stdout == ""
    assert "set.unknown: 'unknown' is not a parameter of this app" in unknown.stderr
    assert twice.returncode == 1 and twice.stderr.startswith(
        "error: An app named 'hello-app' exists already (app names are global).\n")
    assert "osmo app update hello-app" in twice.stderr
    assert invalid.returncode == 2 and "template: line 5: 'missing' is undefined" in invalid.stderr
    assert (missing.returncode, missing.stderr) == (1, "error: app nope not found\n")
    assert no_version.returncode == 2
    assert no_version.stderr == "error: must specify a version (NAME:VERSION or --version) or --all\n"
    assert forbidden.returncode == 1 and forbidden.stdout == ""
    assert forbidden.stderr.startswith("error: ") and "'private'" in forbidden.stderr
    assert bad_label.returncode == 2
    assert bad_label.stderr.startswith("error: labels.team: invalid label value 'not ok'")
    assert len(bad_label.stderr.splitlines()) == 1
    for result in (unknown, twice, invalid, missing, no_version, forbidden, bad_label):
        assert "Traceback" not in result.stderr
    assert Workflow.objects.count() == 0


def test_rename_and_delete(osmo_process, nvl72, spec_files):
    first, second = spec_files
    osmo_process("app", "create", "hello-app", "-d", "Says hello", "-f", first)
    osmo_process("app", "update", "hello-app", "-f", second)
    # when
    renamed = osmo_process("app", "rename", "hello-app", "greeter", "--force")
    one = osmo_process("app", "delete", "greeter:2", "--force")
    declined = osmo_process("app", "delete", "greeter", "--all", input="n\n")
    rest = osmo_process("app", "delete", "greeter", "--all", "-f")
    info = osmo_process("app", "info", "greeter", "--order", "desc")
    gone = osmo_process("app", "spec", "greeter")
    # then
    assert renamed.stdout == "App hello-app renamed to greeter successfully.\n"
    assert one.stdout == "App greeter version 2 deleted.\n"
    assert declined.stdout.endswith("Nothing deleted.\n")
    assert rest.stdout == "App greeter version 1 deleted.\n"
    statuses = [line.split()[-1] for line in info.stdout.splitlines()[7:]]
    assert statuses == ["DELETED", "DELETED"]
    assert gone.returncode == 1 and "was deleted" in gone.stderr
