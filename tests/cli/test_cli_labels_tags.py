"""``--label`` on submit, validate and restart, ``workflow list --label/--tags`` and ``workflow tag``,
through the installed ``osmo`` console script against a live server."""

from __future__ import annotations

import json

import pytest

db = pytest.mark.django_db(transaction=True)

SPEC = """workflow:
  name: {name}
  labels: {{project: sim_alpha, team: robotics}}
  tasks:
  - {{name: train, image: busybox, command: ["true"]}}
resources:
  default: {{gpu: 1}}
"""


@pytest.fixture
def spec_file(tmp_path):
    def write(name: str) -> str:
        path = tmp_path / f"{name}.yaml"
        path.write_text(SPEC.format(name=name))
        return str(path)

    return write


def listed(osmo_process, *args: str) -> list[str]:
    result = osmo_process("workflow", "list", "-t", "json", *args)
    assert result.returncode == 0, result.stderr
    return sorted(item["id"] for item in json.loads(result.stdout)["results"])


@db
def test_labels_are_set_at_submission_and_selected_by_the_list(osmo_process, nvl72, spec_file):
    # when
    for name, team in (("a", "robotics_a"), ("b", "robotics_b"), ("c", "vision")):
        result = osmo_process("workflow", "submit", spec_file(name), "--pool", "nvl72", "--label", f"team={team}",
                              "--label", "run=r1")
        assert result.returncode == 0, result.stderr
    # then
    query = osmo_process("workflow", "query", "a-1")
    assert "  labels: project=sim_alpha run=r1 team=robotics_a" in query.stdout.splitlines()
    assert listed(osmo_process, "--label", "team=robotics_*") == ["a-1", "b-1"]
    assert listed(osmo_process, "--label", "team=(robotics_a|vision)") == ["a-1", "c-1"]
    assert listed(osmo_process, "--label", "team=robotics_*", "--label", "project=hil_*") == []
    assert osmo_process("workflow", "restart", "c-1", "--label", "team=robotics_c").returncode == 0
    assert listed(osmo_process, "--no-label", "run") == []
    assert listed(osmo_process, "--label", "team=robotics_*", "--no-label", "nope") == ["a-1", "b-1", "c-2"]
    wide = osmo_process("workflow", "list", "-o", "wide", "--label", "team=vision")
    assert "project=sim_alpha, run=r1, team=vision" in wide.stdout


@db
def test_the_list_filters_by_priority_submission_day_and_app(osmo_process, nvl72, spec_file):
    # given
    from django.utils import timezone

    from tests.factories import make_nvl72_pool

    assert osmo_process("workflow", "submit", spec_file("a"), "--pool", "nvl72", "--priority", "HIGH").returncode == 0
    assert osmo_process("workflow", "submit", spec_file("b"), "--pool", "nvl72", "--priority", "LOW").returncode == 0
    assert osmo_process("workflow", "submit", spec_file("c"), "--pool", "nvl72").returncode == 0
    make_nvl72_pool("second", zones=1, spines=1, racks=1, nodes=2)
    assert osmo_process("workflow", "submit", spec_file("d"), "--pool", "second").returncode == 0
    today = timezone.localdate().isoformat()
    # then
    assert listed(osmo_process, "--pool", "second") == ["d-1"]
    assert listed(osmo_process, "--pool", "nvl72", "second", "--priority", "NORMAL") == ["c-1", "d-1"]
    assert listed(osmo_process, "-u", "alice", "bob", "-p", "second") == ["d-1"]
    assert listed(osmo_process, "--user", "bob") == []
    nowhere = osmo_process("workflow", "list", "--pool", "nowhere", "elsewhere")
    assert nowhere.returncode == 1 and nowhere.stderr == "error: pool nowhere not found (osmo pool list shows them)\n"
    assert listed(osmo_process, "--priority", "high") == ["a-1"]
    assert listed(osmo_process, "--priority", "HIGH", "LOW") == ["a-1", "b-1"]
    assert listed(osmo_process, "--submitted-after", today) == ["a-1", "b-1", "c-1", "d-1"]
    assert listed(osmo_process, "--submitted-before", today) == []
    assert listed(osmo_process, "--submitted-after", "2000-01-01", "--submitted-before", "2000-01-02") == []
    assert listed(osmo_process, "--app", "hello") == []
    bad_day = osmo_process("workflow", "list", "--submitted-after", "2026-13-01")
    bad_priority = osmo_process("workflow", "list", "--priority", "URGENT")
    assert bad_day.returncode == 2 and bad_day.stderr.startswith("error: submitted_after: ")
    assert bad_priority.returncode == 2 and bad_priority.stderr.startswith("error: priority: ")
    assert "URGENT" in bad_priority.stderr


@db
def test_bad_labels_and_selectors_are_one_line_errors(osmo_process, nvl72, spec_file):
    # when
    bad_label = osmo_process("workflow", "submit", spec_file("a"), "--pool", "nvl72", "--label", "team=not ok")
    two_bad = osmo_process("workflow", "validate", spec_file("a"), "--pool", "nvl72", "--label", "team=-x",
                           "--label", "run=r_")
    no_equals = osmo_process("workflow", "submit", spec_file("a"), "--pool", "nvl72", "--label", "team")
    bad_selector = osmo_process("workflow", "list", "--label", "team=(a")
    bad_key = osmo_process("workflow", "list", "--no-label", "not ok")
    # then
    assert bad_label.returncode == 2, bad_label.stderr
    assert bad_label.stderr == ("error: labels.team: invalid label value 'not ok': not empty, at most 63 letters, "
                                "digits, '-', '_', '.', starting and ending alphanumeric\n")
    assert two_bad.returncode == 2
    assert len(two_bad.stderr.splitlines()) == 1, two_bad.stderr
    said = two_bad.stderr.removeprefix("error: ").split("; labels.")
    assert sorted(part.removeprefix("labels.").split(":")[0] for part in said) == ["run", "team"]
    assert "invalid label value '-x'" in two_bad.stderr and "invalid label value 'r_'" in two_bad.stderr
    assert bad_key.returncode == 2 and bad_key.stderr.startswith("error: no_label: invalid label key 'not ok'")
    assert len(bad_key.stderr.splitlines()) == 1
    assert no_equals.returncode == 2
    assert no_equals.stderr.strip() == "error: --label expects NAME=VALUE, got 'team'"
    assert bad_selector.returncode != 0
    assert bad_selector.stderr == "error: label: 'team=(a': an alternative '(' has no ')'; write (a|b)\n"
    assert listed(osmo_process) == []


@db
def test_validate_and_restart_take_labels(osmo_process, nvl72, spec_file):
    # given
    from workflows.models import LabelPolicySetting

    LabelPolicySetting.objects.create(required_keys=["run"])
    # when
    refused = osmo_process("workflow", "validate", spec_file("a"), "--pool", "nvl72")
    valid = osmo_process("workflow", "validate", spec_file("a"), "--pool", "nvl72", "--label", "run=r1")
    submitted = osmo_process("workflow", "submit", spec_file("a"), "--pool", "nvl72", "--label", "run=r1")
    restarted = osmo_process("workflow", "restart", "a-1", "--label", "run=r2", "-t", "json")
    bad_restart = osmo_process("workflow", "restart", "a-1", "--label", "run=r 3")
    # then
    assert refused.returncode == 2
    assert refused.stderr == ("error: labels.run: label 'run' is required (set it in the spec's workflow.labels "
                              "or with --label run=VALUE)\n")
    assert valid.returncode == 0, valid.stderr
    assert submitted.returncode == 0, submitted.stderr
    assert restarted.returncode == 0, restarted.stderr
    assert json.loads(restarted.stdout)["labels"] == {"project": "sim_alpha", "run": "r2", "team": "robotics"}
    assert bad_restart.returncode == 2
    assert bad_restart.stderr.startswith("error: labels.run: invalid label value 'r 3'")
    assert len(bad_restart.stderr.splitlines()) == 1


@db
def test_workflow_tag_lists_adds_removes_and_the_list_filters(osmo_process, nvl72, spec_file):
    # given
    from workflows.models import Tag

    empty = osmo_process("workflow", "tag")
    Tag.objects.create(name="baseline", description="the reference run")
    Tag.objects.create(name="keep")
    for name in ("a", "b"):
        assert osmo_process("workflow", "submit", spec_file(name), "--pool", "nvl72").returncode == 0
    # when
    tags = osmo_process("workflow", "tag")
    added = osmo_process("workflow", "tag", "--workflow", "a-1", "b-1", "--add", "baseline", "keep")
    removed = osmo_process("workflow", "tag", "-w", "b-1", "-r", "baseline")
    unknown = osmo_process("workflow", "tag", "-w", "a-1", "-a", "nope")
    no_workflow = osmo_process("workflow", "tag", "--add", "keep")
    # then
    assert empty.stdout.strip() == "No tags have been set by admins."
    assert tags.stdout.splitlines() == ["Tags:", "- baseline: the reference run", "- keep"]
    assert added.returncode == 0, added.stderr
    assert added.stdout.splitlines() == ["Workflow a-1 updated: tags baseline, keep.",
                                         "Workflow b-1 updated: tags baseline, keep."]
    assert removed.stdout.strip() == "Workflow b-1 updated: tags keep."
    assert unknown.returncode == 2
    assert unknown.stderr == "error: add: Unknown tag nope: tags an admin defined: baseline, keep.\n"
    assert no_workflow.returncode == 2
    assert no_workflow.stderr.strip() == "error: no workflow given to add or remove tags on: pass --workflow ID"
    assert listed(osmo_process, "--tags", "baseline") == ["a-1"]
    assert listed(osmo_process, "--tags", "keep") == ["a-1", "b-1"]
    assert listed(osmo_process, "--tags", "baseline", "keep") == ["a-1"]
    assert "  tags: baseline, keep" in osmo_process("workflow", "query", "a-1").stdout.splitlines()
