"""The lead decides a group's outcome and exit actions settle a task's exit (docs/design.md §6,
"Lead and exit actions"): pure rules, as tables."""

from __future__ import annotations

import pytest

from workflows.lifecycle import rules
from workflows.lifecycle.rules import (
    COMPLETED,
    FAILED,
    FAILED_BACKEND_ERROR,
    FAILED_START_TIMEOUT,
    FAILED_UPSTREAM,
    INITIALIZING,
    RESCHEDULED,
    RUNNING,
    SCHEDULING,
    ExitVerdict,
    GangVerdict,
)


@pytest.mark.parametrize(
    ("tasks", "lead", "expected"),
    [
        pytest.param([COMPLETED, RUNNING, INITIALIZING], 0, GangVerdict(COMPLETED, stop=(1, 2)),
                     id="_case_lead_completed_stops_the_rest"),
        pytest.param([RUNNING, FAILED, RUNNING], 0, GangVerdict(RUNNING), id="_case_nonlead_failure_ignored"),
        pytest.param([RUNNING, FAILED], 1, GangVerdict(FAILED, 1, (0,)), id="_case_lead_failed_fails_the_gang"),
        pytest.param([FAILED_BACKEND_ERROR, RUNNING], 0, GangVerdict(FAILED_BACKEND_ERROR, 0, (1,)),
                     id="_case_lead_failure_status_is_the_gangs"),
        pytest.param([FAILED_UPSTREAM, RUNNING], 0, GangVerdict(FAILED, 0, (1,)), id="_case_lead_upstream_is_failed"),
        pytest.param([COMPLETED, FAILED], 0, GangVerdict(COMPLETED), id="_case_lead_completed_nonlead_failed"),
        pytest.param([INITIALIZING, FAILED], 0, GangVerdict(None), id="_case_lead_not_started_no_change"),
        pytest.param([RUNNING, COMPLETED], 0, GangVerdict(RUNNING), id="_case_nonlead_completed_first"),
    ],
)
def test_the_lead_decides_the_gang(tasks, lead, expected):
    assert rules.gang_verdict(tasks, lead=lead) == expected


@pytest.mark.parametrize(
    ("tasks", "lead", "expected"),
    [
        pytest.param([RUNNING, FAILED, RUNNING], 0, GangVerdict(FAILED, 1, (0, 2)), id="_case_any_failure_fails"),
        pytest.param([COMPLETED, RUNNING], 0, GangVerdict(RUNNING), id="_case_lead_completed_waits_for_the_rest"),
        pytest.param([COMPLETED, COMPLETED], 0, GangVerdict(COMPLETED), id="_case_all_completed"),
    ],
)
def test_ignore_nonlead_status_false_makes_every_task_count(tasks, lead, expected):
    assert rules.gang_verdict(tasks, lead=lead, ignore_nonlead=False) == expected


@pytest.mark.parametrize(
    ("code", "actions", "expected"),
    [
        pytest.param(0, (), "COMPLETE", id="_case_default_zero_completes"),
        pytest.param(1, (), "FAIL", id="_case_default_nonzero_fails"),
        pytest.param(3005, (), "FAIL", id="_case_default_infrastructure_fails"),
        pytest.param(42, (("COMPLETE", ((0, 0), (40, 50))),), "COMPLETE", id="_case_complete_range"),
        pytest.param(0, (("FAIL", ((0, 0),)),), "FAIL", id="_case_fail_on_zero"),
        pytest.param(7, (("RESCHEDULE", ((5, 9),)), ("FAIL", ((1, 4),))), "RESCHEDULE", id="_case_reschedule_range"),
        pytest.param(10, (("RESCHEDULE", ((5, 9),)),), "FAIL", id="_case_outside_every_range_default"),
    ],
)
def test_exit_action(code, actions, expected):
    assert rules.exit_action(code, actions) == expected


@pytest.mark.parametrize(
    ("code", "retries", "expected"),
    [
        pytest.param(0, 0, ExitVerdict(COMPLETED, ""), id="_case_complete"),
        pytest.param(1, 0, ExitVerdict(FAILED, "exit code 1"), id="_case_fail"),
        pytest.param(3005, 0, ExitVerdict(FAILED_START_TIMEOUT, "exit code 3005"), id="_case_start_timeout"),
        pytest.param(9, 0, ExitVerdict(None, "exit code 9: rescheduled (retry 1 of 2)"), id="_case_reschedule_first"),
        pytest.param(9, 1, ExitVerdict(None, "exit code 9: rescheduled (retry 2 of 2)"), id="_case_reschedule_last"),
        pytest.param(9, 2, ExitVerdict(FAILED, "exit code 9: RESCHEDULE refused, the pool's limit of 2 retries is "
                                               "reached"), id="_case_retry_limit"),
    ],
)
def test_exit_verdict(code, retries, expected):
    # given: RESCHEDULE on 5-9, a pool allowing two retries
    actions = (("RESCHEDULE", ((5, 9),)),)
    # when / then
    assert rules.exit_verdict(code, actions, retries=retries, max_retries=2) == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param({"COMPLETE": 3}, (("COMPLETE", ((3, 3),)),), id="_case_one_code"),
        pytest.param({"RESCHEDULE": "1,2,10-20"}, (("RESCHEDULE", ((1, 1), (2, 2), (10, 20))),), id="_case_string"),
        pytest.param({"FAIL": [1, "5-6"]}, (("FAIL", ((1, 1), (5, 6))),), id="_case_list"),
        pytest.param("COMPLETE", (), id="_case_not_a_mapping"),
    ],
)
def test_exit_actions_parse(raw, expected):
    assert rules.exit_actions_parse(raw) == expected


def test_rescheduled_is_a_way_back_to_the_queue_not_an_end():
    # then: RESCHEDULED is recorded on the way from a running status back to SCHEDULING
    assert RESCHEDULED not in rules.TERMINAL
    assert rules.transition_needed("gang", RUNNING, RESCHEDULED) is True
    assert rules.transition_needed("gang", RESCHEDULED, SCHEDULING) is True
    assert rules.is_transition_allowed(RESCHEDULED, RUNNING) is False
