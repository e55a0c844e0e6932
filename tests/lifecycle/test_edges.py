"""The lifecycle's edge table (docs/design.md §6, "The edges"): every allowed edge is a change to
write, a terminal status is final, and anything else raises."""

from __future__ import annotations

import pytest

from workflows.lifecycle import rules
from workflows.lifecycle.rules import (
    COMPLETED,
    FAILED,
    FAILED_CANCELED,
    FAILED_QUEUE_TIMEOUT,
    FAILED_SERVER_ERROR,
    FAILED_UPSTREAM,
    INITIALIZING,
    PENDING,
    RUNNING,
    SCHEDULING,
    WAITING,
    TransitionNotAllowedError,
)

ALL_EDGES = [(kind, current, new) for kind, edges in rules.EDGES.items() for current, new in sorted(edges)]


def test_the_table_is_what_the_service_does():
    # then: the task and gang edges, spelled out (a change here is a change to docs/design.md §6)
    assert sorted(rules.TASK_EDGES) == sorted([
        (WAITING, SCHEDULING), (WAITING, FAILED_UPSTREAM), (WAITING, FAILED_CANCELED),
        (SCHEDULING, INITIALIZING), (SCHEDULING, FAILED_QUEUE_TIMEOUT), (SCHEDULING, FAILED_SERVER_ERROR),
        (SCHEDULING, FAILED_CANCELED),
        *[(source, to) for source in (INITIALIZING, RUNNING)
          for to in (COMPLETED, FAILED, rules.FAILED_BACKEND_ERROR, FAILED_CANCELED, rules.RESCHEDULED,
                     rules.FAILED_EVICTED, rules.FAILED_IMAGE_PULL, rules.FAILED_START_ERROR,
                     rules.FAILED_START_TIMEOUT, rules.FAILED_EXEC_TIMEOUT, rules.FAILED_PREEMPTED)],
        (INITIALIZING, RUNNING),
        (rules.RESCHEDULED, SCHEDULING),
    ])
    assert rules.GANG_EDGES == rules.TASK_EDGES
    assert len(rules.WORKFLOW_EDGES) == 2 * len(rules.WORKFLOW_TERMINAL) + 2


@pytest.mark.parametrize(("kind", "current", "new"), ALL_EDGES)
def test_every_edge_of_the_table_is_a_change_to_write(kind, current, new):
    assert rules.transition_needed(kind, current, new) is True


@pytest.mark.parametrize(
    ("kind", "current", "new"),
    [
        pytest.param("task", WAITING, RUNNING, id="_case_task_runs_unplaced"),
        pytest.param("task", SCHEDULING, RUNNING, id="_case_task_skips_initializing"),
        pytest.param("task", SCHEDULING, WAITING, id="_case_task_back_to_waiting"),
        pytest.param("task", RUNNING, INITIALIZING, id="_case_task_backwards"),
        pytest.param("gang", WAITING, INITIALIZING, id="_case_gang_placed_while_waiting"),
        pytest.param("gang", SCHEDULING, COMPLETED, id="_case_gang_completes_unplaced"),
        pytest.param("gang", RUNNING, FAILED_UPSTREAM, id="_case_running_gang_upstream"),
        pytest.param("workflow", PENDING, WAITING, id="_case_workflow_waiting"),
        pytest.param("workflow", RUNNING, SCHEDULING, id="_case_workflow_scheduling"),
    ],
)
def test_a_change_off_the_table_raises_a_named_error(kind, current, new):
    # when / then
    with pytest.raises(TransitionNotAllowedError) as raised:
        rules.transition_needed(kind, current, new)
    assert (raised.value.kind, raised.value.current, raised.value.new) == (kind, current, new)
    assert str(raised.value) == f"{kind} status {current} -> {new} is not an edge of the lifecycle"


@pytest.mark.parametrize("kind", ["task", "gang", "workflow"])
@pytest.mark.parametrize("terminal", sorted(rules.TERMINAL))
def test_a_terminal_status_is_final_and_no_error(kind, terminal):
    # then: a late report against a terminal row is dropped (never an edge, never raised)
    assert all(rules.transition_needed(kind, terminal, new) is False for new in rules.TASK_STATUSES)
    assert not any(current == terminal for current, _new in rules.EDGES[kind])


@pytest.mark.parametrize(("kind", "status"), [("task", RUNNING), ("gang", SCHEDULING), ("workflow", PENDING)])
def test_staying_put_is_no_change(kind, status):
    assert rules.transition_needed(kind, status, status) is False


# -- when the cluster is the cause (docs/design.md §6): every move its rules make is an edge -----------
CLUSTER_MOVES = [
    # (the rule, what a task holding capacity moves to)
    *[(f"lost:{cause}:failed", status) for cause, status in sorted(rules.LOST_STATUSES.items())],
    *[(f"start:{cause}", status) for cause, status in sorted(rules.START_FAILURE_STATUSES.items())],
    ("refused:failed", rules.REFUSED_STATUS),
    ("lost:rescheduled", rules.RESCHEDULED),
    ("refused:requeued", rules.RESCHEDULED),
]


@pytest.mark.parametrize("kind", ["task", "gang"])
@pytest.mark.parametrize("source", [INITIALIZING, RUNNING])
@pytest.mark.parametrize(("rule", "target"), CLUSTER_MOVES, ids=[rule for rule, _target in CLUSTER_MOVES])
def test_every_move_of_the_cluster_rules_is_an_edge(kind, source, rule, target):
    assert rules.transition_needed(kind, source, target) is True


def test_the_cluster_rules_statuses_are_these():
    # then: a change here is a change to docs/kubernetes.md §10 and docs/design.md §6
    assert dict(rules.LOST_STATUSES) == {"disrupted": rules.FAILED_EVICTED, "evicted": rules.FAILED_EVICTED,
                                         "node_lost": rules.FAILED_BACKEND_ERROR}
    assert dict(rules.START_FAILURE_STATUSES) == {"image_pull": rules.FAILED_IMAGE_PULL,
                                                  "start_error": rules.FAILED_START_ERROR}
    assert rules.REFUSED_STATUS == rules.FAILED_BACKEND_ERROR
    # and a requeued or rescheduled gang is queued again through the one RESCHEDULED -> SCHEDULING edge
    assert rules.transition_needed("gang", rules.RESCHEDULED, SCHEDULING) is True


def test_the_cluster_causes_are_the_backends_words():
    # given the causes the dispatch backends name (the pure rules spell them again, importing no app code)
    from scheduler.dispatch import base

    # then
    assert {rules.CAUSE_UNSCHEDULABLE, rules.CAUSE_DISRUPTED, rules.CAUSE_EVICTED, rules.CAUSE_NODE_LOST,
            rules.CAUSE_IMAGE_PULL, rules.CAUSE_START_ERROR} == set(base.POD_CAUSES)


@pytest.mark.parametrize(("retries", "expected"), [
    (0, rules.ExitVerdict(None, "pod p: evicted: rescheduled (retry 1 of 2)")),
    (1, rules.ExitVerdict(None, "pod p: evicted: rescheduled (retry 2 of 2)")),
    (2, rules.ExitVerdict(rules.FAILED_EVICTED,
                          "pod p: evicted: not rescheduled, the pool's limit of 2 retries is reached")),
])
def test_a_lost_task_is_rescheduled_up_to_the_pools_limit(retries, expected):
    assert rules.lost_verdict("evicted", retries=retries, max_retries=2, message="pod p: evicted") == expected


def test_a_task_lost_with_its_node_past_the_limit_is_a_backend_error():
    verdict = rules.lost_verdict("node_lost", retries=3, max_retries=3, message="node n1 was deleted")
    assert verdict.status == rules.FAILED_BACKEND_ERROR


@pytest.mark.parametrize(("requeues", "expected"), [
    (0, rules.ExitVerdict(None, "the cluster refused to schedule it: 0/2 nodes (queued again, 1 of 1)")),
    (1, rules.ExitVerdict(rules.FAILED_BACKEND_ERROR, "the cluster refused to schedule it 2 times: 0/2 nodes")),
])
def test_a_refused_gang_is_requeued_a_bounded_number_of_times(requeues, expected):
    assert rules.refused_verdict(requeues=requeues, max_requeues=1, message="0/2 nodes") == expected
