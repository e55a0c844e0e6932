"""A gang whose pods cannot be created for a reason that may pass (the local backend's pod folder on a
full or broken volume, an unreachable Kubernetes API) says why while it is retried, and fails with that
reason at the dispatch deadline (docs/design.md §6, docs/operations.md "Recovery")."""

from __future__ import annotations

import os
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

from scheduler.dispatch import DispatchTransientError
from tests.factories import make_node, make_pool
from workflows.models import Task, TaskGroup, Workflow
from workflows.scheduling import pods
from workflows.scheduling.cycle import placement_cycle_run
from workflows.scheduling.gang_dispatch import dispatch_retry_countdown, gang_dispatch
from workflows.services import workflow_submit
from workflows.tasks import group_dispatch_task

pytestmark = pytest.mark.django_db

SPEC = """
workflow:
  name: broken-volume
  tasks:
  - {name: t, image: ubuntu, command: [sh, -c, "echo hi"]}
resources:
  default: {cpu: 1, gpu: 0}
"""


@pytest.fixture
def unwritable_local_pool(tmp_path, monkeypatch, inline_jobs):
    """A local pool whose pod folder cannot be made: its path runs through a regular file."""
    (tmp_path / "volume").write_text("not a folder")
    monkeypatch.setenv("OSMO_LOCAL_DIR", str(tmp_path / "volume" / "pods"))
    pool = make_pool("local", keys=[], backend="local")
    make_node(pool, "slot-1", {}, gpu=0, cpu=2)
    return pool


def test_a_gang_retried_for_a_transient_backend_error_says_why_and_fails_with_it(user, unwritable_local_pool,
                                                                                settings, tmp_path):
    """Replays the fault run with the pod folder's volume full: the gang stayed INITIALIZING with no word
    of why for the dispatch deadline, then failed "pods could not be created within 600s of placement"
    (the ENOSPC was only in the worker's log)."""
    # given a placed gang of the local pool
    settings.OSMO_DISPATCH_DEADLINE_SECONDS = 300
    workflow, _ = workflow_submit(user=user, pool_name="local", spec=SPEC)
    placement_cycle_run(pool_id=unwritable_local_pool.pk)
    group = TaskGroup.objects.get(workflow=workflow)
    pod_name = Task.objects.get(workflow=workflow).pod_name

    # when its dispatch meets the backend's error (Celery retries it)
    with pytest.raises(DispatchTransientError):
        gang_dispatch(group_id=group.pk)

    # then the group is still INITIALIZING, and the API says why its pods are not there yet
    client = APIClient()
    client.force_authenticate(user)
    detail = client.get(f"/api/workflows/{workflow.workflow_id}/").json()
    [shown] = detail["groups"]
    assert shown["status"] == "INITIALIZING"
    assert shown["dispatch_error"] == (f"pod {pod_name}: local pod {pod_name}: NotADirectoryError: [Errno 20] "
                                       f"Not a directory: '{tmp_path}/volume/pods/default/.{pod_name}.creating-"
                                       f"{os.getpid()}/run'")
    assert shown["failure_message"] == ""

    # when the dispatch deadline passes without the pods
    long_ago = timezone.now() - timedelta(seconds=301)
    TaskGroup.objects.filter(pk=group.pk).update(placed_at=long_ago, dispatch_requested_at=long_ago)
    result = pods.tick()

    # then the gang fails with the backend's last error in its message, and its capacity is released
    group.refresh_from_db()
    workflow.refresh_from_db()
    assert result["dispatch_expired"] == [group.pk]
    assert (group.status, workflow.status) == ("FAILED_BACKEND_ERROR", "FAILED_BACKEND_ERROR")
    assert group.failure_message == (f"pods could not be created within 300s of placement; the backend's last "
                                     f"error: {shown['dispatch_error']}")
    assert not Task.objects.filter(workflow=workflow, node__isnull=False, status="INITIALIZING").exists()


def test_a_gang_whose_pods_were_created_after_a_retry_keeps_no_dispatch_error(user, unwritable_local_pool,
                                                                              tmp_path, monkeypatch):
    # given a gang whose first dispatch failed
    workflow, _ = workflow_submit(user=user, pool_name="local", spec=SPEC)
    placement_cycle_run(pool_id=unwritable_local_pool.pk)
    group = TaskGroup.objects.get(workflow=workflow)
    with pytest.raises(DispatchTransientError):
        gang_dispatch(group_id=group.pk)
    assert TaskGroup.objects.get(pk=group.pk).dispatch_error != ""

    # when the volume is back (another pod folder) and the retry creates the pod
    monkeypatch.setenv("OSMO_LOCAL_DIR", str(tmp_path / "pods"))
    gang_dispatch(group_id=group.pk)

    # then the error is gone with the problem
    assert Task.objects.get(workflow=workflow).dispatched_at is not None
    assert TaskGroup.objects.get(pk=group.pk).dispatch_error == ""
    assert Workflow.objects.get(pk=workflow.pk).failure_message == ""


def test_groups_inserted_by_the_previous_release_get_an_empty_dispatch_error(db):
    """During a rollout, after the migration, processes of the previous release insert groups without
    the column: its default is the database's too, or every submission they took answered 500."""
    # given the migrated database
    # when its default for the column is read
    with connection.cursor() as cursor:
        cursor.execute("SELECT column_default, is_nullable FROM information_schema.columns "
                       "WHERE table_name = 'workflows_taskgroup' AND column_name = 'dispatch_error'")
        found = cursor.fetchall()

    # then
    assert found == [("''::text", "NO")]


def test_a_gang_whose_dispatch_is_retried_is_not_dispatched_again_by_the_tick_meanwhile(user,
                                                                                      unwritable_local_pool):
    """The fault run saw the tick start a new dispatch every OSMO_REDISPATCH_AFTER_SECONDS beside the
    retries Celery already had queued for the gang: several chains of retries for one gang."""
    # given a gang placed a minute ago, whose dispatch meets the backend's error and is retried in 64 s
    workflow, _ = workflow_submit(user=user, pool_name="local", spec=SPEC)
    placement_cycle_run(pool_id=unwritable_local_pool.pk)
    group = TaskGroup.objects.get(workflow=workflow)
    a_minute_ago = timezone.now() - timedelta(seconds=60)
    TaskGroup.objects.filter(pk=group.pk).update(placed_at=a_minute_ago, dispatch_requested_at=a_minute_ago)
    before = timezone.now()
    with pytest.raises(DispatchTransientError):
        gang_dispatch(group_id=group.pk, retry_in=dispatch_retry_countdown(5))
    after = timezone.now()

    # when the tick runs
    result = pods.tick()

    # then it leaves the gang to its retry: the request counts from the retry's time
    requested = TaskGroup.objects.get(pk=group.pk).dispatch_requested_at
    assert result["redispatch"] == []
    assert before + timedelta(seconds=64) <= requested <= after + timedelta(seconds=64)

    # when the retry was lost (nothing dispatched it in OSMO_REDISPATCH_AFTER_SECONDS past its time)
    TaskGroup.objects.filter(pk=group.pk).update(dispatch_requested_at=requested - timedelta(seconds=64 + 21))
    result = pods.tick()

    # then the tick dispatches it again
    assert result["redispatch"] == [group.pk]


def test_the_retries_of_a_gang_dispatch_back_off_to_two_minutes():
    # given / when the countdowns of the first nine tries
    countdowns = [dispatch_retry_countdown(retries) for retries in range(9)]

    # then
    assert countdowns == [2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 120.0, 120.0, 120.0]


def test_a_gang_still_retried_by_celery_fails_at_the_dispatch_deadline(user, unwritable_local_pool, settings):
    """A retried gang counts as requested until its retry (in the future): the deadline must not wait for
    the tick to see it as stranded too, or a gang failing at its 9th retry ended about 1,100 s after
    placement instead of OSMO_DISPATCH_DEADLINE_SECONDS (600)."""
    # given a gang placed past the deadline, whose latest dispatch met the backend's error and is
    # retried in two minutes
    settings.OSMO_DISPATCH_DEADLINE_SECONDS = 300
    workflow, _ = workflow_submit(user=user, pool_name="local", spec=SPEC)
    placement_cycle_run(pool_id=unwritable_local_pool.pk)
    group = TaskGroup.objects.get(workflow=workflow)
    TaskGroup.objects.filter(pk=group.pk).update(placed_at=timezone.now() - timedelta(seconds=301))
    with pytest.raises(DispatchTransientError):
        gang_dispatch(group_id=group.pk, retry_in=120)

    # when the tick runs
    result = pods.tick()

    # then the gang fails now, quoting the backend's error, and is not dispatched again
    group.refresh_from_db()
    assert result["dispatch_expired"] == [group.pk]
    assert result["redispatch"] == []
    assert group.status == "FAILED_BACKEND_ERROR"
    assert group.failure_message.startswith("pods could not be created within 300s of placement; the backend's "
                                            "last error: pod ")


def test_the_last_retry_of_a_gang_dispatch_leaves_the_gang_to_the_tick_at_once(user, unwritable_local_pool):
    """After its last retry nothing else dispatches the gang but the tick: the request must not count
    the two minutes a further retry would have waited, or the tick takes over 140 s late, not 20 s."""
    # given a placed gang whose dispatch keeps meeting the backend's error
    workflow, _ = workflow_submit(user=user, pool_name="local", spec=SPEC)
    placement_cycle_run(pool_id=unwritable_local_pool.pk)
    group = TaskGroup.objects.get(workflow=workflow)

    # when the task runs its last try (Celery's retries exhausted)
    outcome = group_dispatch_task.apply(kwargs={"group_id": group.pk}, retries=group_dispatch_task.max_retries)
    after = timezone.now()

    # then it failed with the backend's error, and the gang counts as requested now, not in 120 s
    assert isinstance(outcome.result, DispatchTransientError)
    assert TaskGroup.objects.get(pk=group.pk).dispatch_requested_at <= after
