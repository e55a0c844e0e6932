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
    wide = osmo_process("workflow", "list", "-o", "wide", "--label", "team=vision")
    assert "project=sim_alpha, run=r1, team=vision" in wide.stdout


@db
def test_bad_labels_and_selectors_are_one_line_errors(osmo_process, nvl72, spec_file):
    # when
    bad_label = osmo_process("workflow", "submit", spec_file("a"), "--pool", "nvl72", "--label", "team=not ok")
    no_equals = osmo_process("workflow", "submit", spec_file("a"), "--pool", "nvl72", "--label", "team")
    bad_selector = osmo_process("workflow", "list", "--label", "team=(a")
    # then
    assert bad_label.returncode == 2, bad_label.stderr
    assert "labels.team" in bad_label.stderr and "invalid label value 'not ok'" in bad_label.stderr
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
    # then
    assert refused.returncode == 2
    assert "labels.run" in refused.stderr and "label 'run' is required" in refused.stderr
    assert valid.returncode == 0, valid.stderr
    assert submitted.returncode == 0, submitted.stderr
    assert restarted.returncode == 0, restarted.stderr
    assert json.loads(restarted.stdout)["labels"] == {"project": "sim_alpha", "run": "r2", "team": "robotics"}


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
