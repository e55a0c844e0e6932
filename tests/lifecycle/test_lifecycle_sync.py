"""The lifecycle's rules through the real pod sync on the simulated backend (docs/design.md §6,
"Lead and exit actions"): the lead decides a group, ``ignoreNonleadStatus: false`` makes every task
count, exit actions settle a task's exit code, RESCHEDULE requeues the gang up to the pool's retry
limit, infrastructure exit codes name their status, and a preempted gang is RESCHEDULED."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from scheduler.models import Reservation
from tests.factories import make_node, make_pool
from workflows.lifecycle.placing import gangs_preempt
from workflows.models import StatusTransition, Task, TaskGroup
from workflows.scheduling.cycle import placement_cycle_run
from workflows.scheduling.gang_dispatch import gang_dispatch
from workflows.scheduling.pods import pods_sync
from workflows.services import workflow_submit

pytestmark = pytest.mark.django_db

LONG = "{OSMO_SIM_SECONDS: '1000'}"


def spec(a: str = "", b: str = "", group: str = "") -> str:
    """One group g of a lead ``a`` and ``b`` (each a 1 s simulated run unless its extra fields say)."""
    return f"""
workflow:
  name: life
  groups:
  - name: g{group}
    tasks:
    - {{name: a, lead: true, image: busybox, command: [true]{a}}}
    - {{name: b, image: busybox, command: [true]{b}}}
resources:
  default: {{gpu: 1}}
"""


def run_to_exit(user, text: str, *, max_retries: int = 3):
    """Submit, place and dispatch the gang, let its 1 s pods finish, and sync: the group after it."""
    pool = make_pool("life", keys=[("rack", "rack")], sim_task_seconds=1)
    pool.max_retries = max_retries
    pool.save(update_fields=["max_retries"])
    make_node(pool, "n0", {"rack": "r1"}, gpu=2)
    workflow = workflow_submit(user=user, pool_name=pool.name, spec=text)[0]
    group = TaskGroup.objects.get(workflow=workflow)
    placed_and_finished(pool, group)
    group.refresh_from_db()
    return pool, group


def placed_and_finished(pool, group) -> None:
    assert placement_cycle_run(pool_id=pool.pk).placed
    gang_dispatch(group_id=group.pk)
    Task.objects.filter(group=group).update(dispatched_at=timezone.now() - timedelta(seconds=5))
    pods_sync(pool_id=pool.pk)


def task_ids(group) -> list[int]:
    return list(Task.objects.filter(group=group).values_list("pk", flat=True))


def statuses(group) -> dict[str, str]:
    return dict(Task.objects.filter(group=group).values_list("name", "status"))


def test_the_lead_completing_completes_the_group_and_stops_the_rest(user):
    # given a lead that finishes at once and a member that runs long
    # when the pods are synced after the lead finished
    _pool, group = run_to_exit(user, spec(b=f", environment: {LONG}"))
    # then the group is the lead's: COMPLETED; the member was stopped and its capacity released
    assert group.status == "COMPLETED"
    assert statuses(group) == {"a": "COMPLETED", "b": "FAILED_CANCELED"}
    b = Task.objects.get(group=group, name="b")
    assert b.failure_message == "stopped: lead task a completed"
    assert not Reservation.objects.filter(task_id__in=task_ids(group), released_at__isnull=True).exists()


def test_the_lead_failing_fails_the_group(user):
    # given a lead exiting 1 and a member that runs long
    _pool, group = run_to_exit(user, spec(a=", environment: {OSMO_SIM_EXIT_CODE: '1'}", b=f", environment: {LONG}"))
    # then the group fails with the lead; the member is stopped
    assert group.status == "FAILED"
    assert statuses(group) == {"a": "FAILED", "b": "FAILED"}
    assert group.failure_message == "task a failed: simulated exit code 1"


def test_a_nonlead_failure_does_not_end_the_group_by_default(user):
    # given a member exiting 1 while the lead runs long
    _pool, group = run_to_exit(user, spec(a=f", environment: {LONG}", b=", environment: {OSMO_SIM_EXIT_CODE: '1'}"))
    # then the group keeps running with its lead
    assert group.status == "RUNNING"
    assert statuses(group) == {"a": "RUNNING", "b": "FAILED"}


def test_ignore_nonlead_status_false_fails_the_group_on_any_failure(user):
    # given the same, in a group with ignoreNonleadStatus: false
    text = spec(a=f", environment: {LONG}", b=", environment: {OSMO_SIM_EXIT_CODE: '1'}").replace(
        "  - name: g\n", "  - name: g\n    ignoreNonleadStatus: false\n")
    _pool, group = run_to_exit(user, text)
    # then the member's failure fails the group and stops the lead
    assert group.status == "FAILED"
    assert statuses(group) == {"a": "FAILED", "b": "FAILED"}
    assert group.failure_message == "task b failed: simulated exit code 1"


def test_exit_action_complete_turns_a_nonzero_code_into_success(user):
    # given a lead exiting 3 whose exitActions complete on 3
    text = spec(a=", environment: {OSMO_SIM_EXIT_CODE: '3'}, exitActions: {COMPLETE: '0,3'}")
    _pool, group = run_to_exit(user, text)
    # then it completed, with its code kept
    assert group.status == "COMPLETED"
    assert Task.objects.get(group=group, name="a").exit_code == 3


def test_exit_action_fail_turns_zero_into_failure(user):
    # given a lead exiting 0 whose exitActions fail on 0
    _pool, group = run_to_exit(user, spec(a=", exitActions: {FAIL: 0}"))
    # then it failed
    assert group.status == "FAILED"
    assert Task.objects.get(group=group, name="a").status == "FAILED"
    assert Task.objects.get(group=group, name="a").failure_message == "exit code 0"


def test_exit_action_reschedule_requeues_the_gang_with_a_retry_id(user):
    # given a lead exiting 9 whose exitActions reschedule on 5-10
    _pool, group = run_to_exit(user, spec(a=", environment: {OSMO_SIM_EXIT_CODE: '9'}, "
                                            "exitActions: {RESCHEDULE: 5-10}"))
    # then the gang is queued again, its retry counted, its capacity given back and its history says why
    assert group.status == "SCHEDULING"
    assert group.retries == 1 and group.preemptions == 0
    assert statuses(group) == {"a": "SCHEDULING", "b": "SCHEDULING"}
    assert not Reservation.objects.filter(task_id__in=task_ids(group)).exists()
    moves = list(StatusTransition.objects.filter(group=group, task__isnull=True).values_list(
        "from_status", "to_status", "message"))
    assert moves[-2:] == [("INITIALIZING", "RESCHEDULED", "task a: simulated exit code 9: rescheduled (retry 1 of 3)"),
                          ("RESCHEDULED", "SCHEDULING", "queued again")]
    assert Task.objects.get(group=group, name="a").exit_code is None


def test_reschedule_past_the_pools_retry_limit_fails_the_task(user):
    # given a pool allowing one retry and a lead that always exits 9 (RESCHEDULE)
    pool, group = run_to_exit(user, spec(a=", environment: {OSMO_SIM_EXIT_CODE: '9'}, "
                                           "exitActions: {RESCHEDULE: 9}"), max_retries=1)
    assert group.status == "SCHEDULING"
    # when it is placed again (new pod names: a new attempt) and exits 9 again
    assert placement_cycle_run(pool_id=pool.pk).placed
    second_pod = Task.objects.get(group=group, name="a").pod_name
    gang_dispatch(group_id=group.pk)
    Task.objects.filter(group=group).update(dispatched_at=timezone.now() - timedelta(seconds=5))
    pods_sync(pool_id=pool.pk)
    # then the task fails and says the limit
    group.refresh_from_db()
    a = Task.objects.get(group=group, name="a")
    assert "-a-r1-" in second_pod
    assert group.status == "FAILED" and group.retries == 1
    assert a.status == "FAILED" and a.exit_code == 9
    assert a.failure_message == "simulated exit code 9: RESCHEDULE refused, the pool's limit of 1 retries is reached"


def test_the_runtimes_start_timeout_code_is_failed_start_timeout(user):
    # given a lead whose runtime exits with OSMO's start timeout (3005)
    _pool, group = run_to_exit(user, spec(a=", environment: {OSMO_SIM_EXIT_CODE: '3005'}"))
    # then the task and its group are FAILED_START_TIMEOUT
    assert Task.objects.get(group=group, name="a").status == "FAILED_START_TIMEOUT"
    assert group.status == "FAILED_START_TIMEOUT"


def test_a_preempted_gang_is_rescheduled_and_requeued_without_counting_a_retry(user):
    # given a placed, running gang
    pool = make_pool("life", keys=[("rack", "rack")], sim_task_seconds=1)
    make_node(pool, "n0", {"rack": "r1"}, gpu=2)
    workflow = workflow_submit(user=user, pool_name=pool.name, spec=spec(a=f", environment: {LONG}",
                                                                           b=f", environment: {LONG}"))[0]
    group = TaskGroup.objects.get(workflow=workflow)
    placed_and_finished(pool, group)
    group.refresh_from_db()
    assert group.status == "RUNNING"
    # when it is preempted
    pods = gangs_preempt([group], by={group.pk: "wf-high"})
    # then it is queued again through RESCHEDULED, its pods to delete, no retry counted
    group.refresh_from_db()
    assert len(pods) == 2 and all(name.startswith(workflow.workflow_id) for name in pods)
    assert group.status == "SCHEDULING" and group.preemptions == 1 and group.retries == 0
    moves = list(StatusTransition.objects.filter(group=group, task__isnull=True).values_list(
        "from_status", "to_status", "message"))
    assert moves[-2:] == [("RUNNING", "RESCHEDULED", "preempted by wf-high"),
                          ("RESCHEDULED", "SCHEDULING", "preempted by wf-high")]
    assert not Reservation.objects.filter(task_id__in=task_ids(group)).exists()
