"""Table tests of the run-state machine's pure rules (docs/design.md §6). No database."""

from __future__ import annotations

import subprocess
import sys

import pytest

from workflows.lifecycle import rules
from workflows.lifecycle.rules import (
    COMPLETED,
    FAILED,
    FAILED_BACKEND_ERROR,
    FAILED_CANCELED,
    FAILED_QUEUE_TIMEOUT,
    FAILED_UPSTREAM,
    INITIALIZING,
    PENDING,
    RUNNING,
    SCHEDULING,
    WAITING,
    GangVerdict,
)


@pytest.mark.parametrize(
    ("groups", "expected"),
    [
        pytest.param([], PENDING, id="_case_no_groups"),
        pytest.param([SCHEDULING, WAITING], PENDING, id="_case_queued"),
        pytest.param([INITIALIZING, WAITING], RUNNING, id="_case_capacity_reserved"),
        pytest.param([COMPLETED, SCHEDULING], RUNNING, id="_case_first_group_done"),
        pytest.param([COMPLETED, COMPLETED], COMPLETED, id="_case_all_completed"),
        pytest.param([FAILED_QUEUE_TIMEOUT, FAILED_UPSTREAM], FAILED_QUEUE_TIMEOUT, id="_case_primary_failure_first"),
        pytest.param([FAILED_UPSTREAM, FAILED_CANCELED], FAILED_CANCELED, id="_case_consequence_is_not_primary"),
        pytest.param([FAILED_UPSTREAM], FAILED_UPSTREAM, id="_case_only_consequences"),
        pytest.param([COMPLETED, FAILED_BACKEND_ERROR], FAILED_BACKEND_ERROR, id="_case_completed_then_failed"),
        pytest.param([FAILED, RUNNING], RUNNING, id="_case_not_all_terminal_yet"),
        pytest.param([FAILED_QUEUE_TIMEOUT, SCHEDULING], PENDING, id="_case_failed_without_running"),
    ],
)
def test_workflow_status_from_groups(groups, expected):
    assert rules.workflow_status(groups) == expected


@pytest.mark.parametrize(
    ("tasks", "expected"),
    [
        pytest.param([INITIALIZING, INITIALIZING], GangVerdict(None), id="_case_all_initializing"),
        pytest.param([RUNNING, INITIALIZING], GangVerdict(RUNNING), id="_case_one_running"),
        pytest.param([COMPLETED, INITIALIZING], GangVerdict(RUNNING), id="_case_one_completed"),
        pytest.param([COMPLETED, COMPLETED], GangVerdict(COMPLETED), id="_case_all_completed"),
        pytest.param([RUNNING, FAILED, RUNNING], GangVerdict(FAILED, 1, (0, 2)), id="_case_member_failed"),
        pytest.param(
            [FAILED_BACKEND_ERROR, COMPLETED, FAILED, INITIALIZING],
            GangVerdict(FAILED_BACKEND_ERROR, 0, (3,)),
            id="_case_first_failure_names_the_gang",
        ),
        pytest.param([FAILED_UPSTREAM, RUNNING], GangVerdict(FAILED, 0, (1,)), id="_case_upstream_becomes_failed"),
        pytest.param([], GangVerdict(None), id="_case_empty"),
    ],
)
def test_gang_verdict(tasks, expected):
    assert rules.gang_verdict(tasks) == expected


@pytest.mark.parametrize(
    ("failed", "waiting", "expected"),
    [
        pytest.param("a", {}, {}, id="_case_nothing_waits"),
        pytest.param("a", {"b": ["a"]}, {"b": "a"}, id="_case_direct"),
        pytest.param("a", {"b": ["a"], "c": ["b"], "d": ["x"]}, {"b": "a", "c": "b"}, id="_case_transitive"),
        pytest.param("a", {"c": ["b"], "b": ["a"]}, {"b": "a", "c": "b"}, id="_case_any_order"),
        pytest.param("b", {"c": ["b", "a"]}, {"c": "b"}, id="_case_names_the_failed_one"),
        pytest.param("z", {"c": ["b"], "b": ["z"], "d": ["c", "z"]}, {"b": "z", "c": "b", "d": "z"},
                     id="_case_first_failed_name_alphabetically"),
    ],
)
def test_downstream_failures(failed, waiting, expected):
    assert rules.downstream_failures(failed, waiting) == expected


@pytest.mark.parametrize(
    ("upstream", "statuses", "expected"),
    [
        pytest.param(["a"], {"a": COMPLETED}, SCHEDULING, id="_case_ready"),
        pytest.param(["a", "b"], {"a": COMPLETED, "b": RUNNING}, None, id="_case_still_running"),
        pytest.param(["a", "b"], {"a": COMPLETED, "b": FAILED_CANCELED}, FAILED_UPSTREAM, id="_case_upstream_failed"),
        pytest.param([], {}, SCHEDULING, id="_case_no_upstream"),
    ],
)
def test_waiting_group_verdict(upstream, statuses, expected):
    assert rules.waiting_group_verdict(upstream, statuses) == expected


@pytest.mark.parametrize(
    ("current", "new", "allowed"),
    [
        pytest.param(SCHEDULING, INITIALIZING, True, id="_case_forward"),
        pytest.param(RUNNING, RUNNING, False, id="_case_same"),
        pytest.param(COMPLETED, FAILED, False, id="_case_terminal_is_final"),
        pytest.param(FAILED_CANCELED, RUNNING, False, id="_case_cancel_is_final"),
    ],
)
def test_transition_allowed(current, new, allowed):
    assert rules.is_transition_allowed(current, new) is allowed


def test_rules_module_imports_no_framework():
    # given a fresh interpreter
    code = "import sys, workflows.lifecycle.rules; print(sorted(m for m in sys.modules if m.split('.')[0] in " \
           "('django', 'rest_framework', 'celery', 'scheduler')))"
    # when the rules module is imported
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    # then nothing but the standard library was loaded
    assert result.stdout.strip() == "[]"
