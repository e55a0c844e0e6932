"""Interleavings of the pipeline's writers (placement cycle, pod sync, dispatch, cancel, tick), each
forced deterministically. Found by review; every test here failed before its fix (see commit log)."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from scheduler.models import Reservation
from tests.factories import make_node, make_pool
from tests.pipeline.helpers import (
    CHAIN_SPEC,
    assert_never_overcommitted,
    assert_reservations_match_tasks,
    backend_use,
    gang_spec,
)
from workflows import jobs
from workflows.models import StatusTransition, Task, TaskGroup, Workflow
from workflows.scheduling import pods
from workflows.scheduling.cycle import placement_cycle_run, read, run, walk
from workflows.scheduling.gang_dispatch import gang_dispatch
from workflows.scheduling.pods import pods_sync
from workflows.services import workflow_cancel, workflow_submit


def in_thread(fn):
    box: dict = {}

    def run():
        try:
            box["value"] = fn()
        except Exception as exc:  # reported by the test through box["error"]
            box["error"] = exc
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    return thread, box


@pytest.mark.django_db(transaction=True)
def test_cancel_racing_pod_sync_is_never_overwritten(user, racks, no_broker, monkeypatch):
    # given a running gang whose pod sync is about to write RUNNING
    workflow, _ = workflow_submit(user=user, pool_name=racks.name, spec=gang_spec("race", 1, 1, key=None))
    placement_cycle_run(pool_id=racks.pk)
    gang_dispatch(group_id=TaskGroup.objects.get(workflow=workflow).pk)
    Task.objects.filter(workflow=workflow).update(dispatched_at=timezone.now() - timedelta(seconds=0.7))
    real = pods.tasks_status_set
    cancel: dict = {}

    def racing(changes):
        if not cancel:  # the user cancels while the sync is between its read and its write
            cancel["thread"], cancel["box"] = in_thread(
                lambda: workflow_cancel(workflow_pk=workflow.pk, user=user))
            time.sleep(0.5)
        return real(changes)

    monkeypatch.setattr(pods, "tasks_status_set", racing)
    # when
    pods_sync(pool_id=racks.pk)
    cancel["thread"].join(10)
    monkeypatch.setattr(pods, "tasks_status_set", real)
    Task.objects.filter(workflow=workflow).update(dispatched_at=timezone.now() - timedelta(seconds=5))
    pods_sync(pool_id=racks.pk)  # the simulated pod "finishes" later: must not revive the workflow
    # then the cancel won, for good
    assert "error" not in cancel["box"], cancel["box"]
    workflow.refresh_from_db()
    assert workflow.status == "FAILED_CANCELED"
    assert Task.objects.get(workflow=workflow).status == "FAILED_CANCELED"
    history = list(StatusTransition.objects.filter(workflow=workflow, group=None).values_list("to_status", flat=True))
    assert history == ["PENDING", "RUNNING", "FAILED_CANCELED"]
    assert_reservations_match_tasks(racks)


@pytest.mark.django_db(transaction=True)
def test_pod_created_after_cancel_is_taken_back(user, racks, monkeypatch):
    # given a backend that records pods, and a user who cancels while the first pod is being created
    def send(name, countdown=None, **kw):
        if name == jobs.POD_DELETE:
            pods.pod_delete(**kw)

    monkeypatch.setattr(jobs, "_send", send)
    live: set[str] = set()
    events: list[tuple[str, str]] = []

    class Recorder:
        name = "recorder"

        def create_pod(self, pod):
            if not events:
                thread, box = in_thread(lambda: workflow_cancel(workflow_pk=workflow.pk, user=user))
                thread.join(10)
                assert "error" not in box, box
            events.append(("create", pod.pod_name))
            live.add(pod.pod_name)

        def delete_pod(self, *, namespace, pod_name, grace_seconds=None):
            events.append(("delete", pod_name))
            live.discard(pod_name)

    backend_use(monkeypatch, Recorder())
    workflow, _ = workflow_submit(user=user, pool_name=racks.name, spec=gang_spec("leak", 3, 1, key=None))
    placement_cycle_run(pool_id=racks.pk)
    # when
    gang_dispatch(group_id=TaskGroup.objects.get(workflow=workflow).pk)
    # then no pod of the cancelled gang is left: the dispatch recorded none (one UPDATE for the gang,
    # after its pods were created) and deleted each pod it had made, after making it
    # (the cancel deletes the pod of every task that has a pod name, created or not: NotFound is success)
    assert live == set()
    created = [index for index, (kind, _name) in enumerate(events) if kind == "create"]
    assert len(created) == 3
    for index in created:
        assert ("delete", events[index][1]) in events[index + 1:]
    assert Task.objects.filter(workflow=workflow, dispatched_at__isnull=False).count() == 0
    assert Task.objects.filter(workflow=workflow, pod_deleted_at__isnull=True).count() == 0


@pytest.mark.django_db
def test_two_groups_placed_in_one_cycle_record_one_workflow_transition(user, racks, no_broker):
    text = """
workflow:
  name: pair
  groups:
  - name: left
    tasks:
    - {name: a, lead: true, image: busybox, command: [true]}
  - name: right
    tasks:
    - {name: b, lead: true, image: busybox, command: [true]}
resources:
  default: {gpu: 1}
"""
    workflow, _ = workflow_submit(user=user, pool_name=racks.name, spec=text)
    placement_cycle_run(pool_id=racks.pk)
    rows = list(StatusTransition.objects.filter(workflow=workflow, group=None).values_list("from_status", "to_status"))
    assert rows == [("", "PENDING"), ("PENDING", "RUNNING")]


@pytest.mark.django_db
def test_cancel_keeps_failed_upstream_of_downstream_groups(user, racks, no_broker):
    text = CHAIN_SPEC
    workflow, _ = workflow_submit(user=user, pool_name=racks.name, spec=text)
    workflow_cancel(workflow_pk=workflow.pk, user=user)
    second = TaskGroup.objects.get(workflow=workflow, name="second")
    assert second.status == Task.objects.get(workflow=workflow, name="b").status == "FAILED_UPSTREAM"
    assert list(StatusTransition.objects.filter(group=second, task=None).values_list("to_status", flat=True)) == [
        "WAITING", "FAILED_UPSTREAM"]


@pytest.mark.django_db
def test_gang_that_never_fits_does_not_block_the_pool(user, racks, no_broker, settings):
    # given a gang that cannot fit even the idle pool (3 x 4 GPUs in one 2-node rack), waiting for long
    settings.OSMO_STARVATION_SECONDS = 60
    settings.OSMO_REFUSE_NEVER_FITS = False  # a pool that grows: such a gang is queued, not refused
    impossible, _ = workflow_submit(user=user, pool_name=racks.name, spec=gang_spec("never", 3, 4))
    TaskGroup.objects.filter(workflow=impossible).update(scheduling_since=timezone.now() - timedelta(hours=1))
    small, _ = workflow_submit(user=user, pool_name=racks.name, spec=gang_spec("small", 1, 1, key=None))
    # when
    placement_cycle_run(pool_id=racks.pk)
    # then the small one is placed, and the impossible one says it can never fit as things stand
    assert TaskGroup.objects.get(workflow=small).status == "INITIALIZING"
    reason = TaskGroup.objects.get(workflow=impossible).unschedulable_reason
    assert reason["fits_empty_pool"] is False
    assert reason["message"].endswith("(it does not fit even when the pool is idle)")


@pytest.mark.django_db
def test_soft_time_limit_is_not_a_solver_error(user, racks, no_broker, monkeypatch):
    from celery.exceptions import SoftTimeLimitExceeded

    def slow(*args, **kwargs):
        raise SoftTimeLimitExceeded()

    monkeypatch.setattr(walk, "solve", slow)
    workflow, _ = workflow_submit(user=user, pool_name=racks.name, spec=gang_spec("slow", 2, 4))
    with pytest.raises(SoftTimeLimitExceeded):
        placement_cycle_run(pool_id=racks.pk)
    workflow.refresh_from_db()
    assert workflow.status == "PENDING"
    assert TaskGroup.objects.get(workflow=workflow).status == "SCHEDULING"


@pytest.mark.django_db
def test_cycle_budget_commits_what_it_placed(user, racks, no_broker, settings):
    settings.OSMO_CYCLE_BUDGET_SECONDS = 0
    workflow, _ = workflow_submit(user=user, pool_name=racks.name, spec=gang_spec("later", 1, 1, key=None))
    result = placement_cycle_run(pool_id=racks.pk)
    assert result.budget_exhausted is True
    assert result.placed == []
    assert TaskGroup.objects.get(workflow=workflow).status == "SCHEDULING"


@pytest.mark.django_db(transaction=True)
def test_cancel_racing_a_placement_cycle_neither_deadlocks_nor_fails(user, racks, no_broker, monkeypatch):
    workflow, _ = workflow_submit(user=user, pool_name=racks.name, spec=gang_spec("dl", 2, 4))
    real = run.workflows_status_refresh
    cancel: dict = {}

    def refresh(workflow_rows, **kwargs):
        # the cycle has written the group and its tasks; the user cancels right now
        if not cancel:
            cancel["thread"], cancel["box"] = in_thread(
                lambda: workflow_cancel(workflow_pk=workflow.pk, user=user))
            time.sleep(0.5)
        return real(workflow_rows, **kwargs)

    monkeypatch.setattr(run, "workflows_status_refresh", refresh)
    placement_cycle_run(pool_id=racks.pk)
    cancel["thread"].join(10)
    assert "error" not in cancel["box"], cancel["box"]
    workflow.refresh_from_db()
    assert workflow.status == "FAILED_CANCELED"
    assert Reservation.objects.filter(released_at__isnull=True).count() == 0
    assert_reservations_match_tasks(racks)


@pytest.mark.django_db(transaction=True)
def test_submission_answers_201_when_the_broker_hiccups_after_commit(user, racks, monkeypatch):
    from kombu.exceptions import OperationalError as KombuOperationalError
    from rest_framework.test import APIClient

    def down(name, countdown=None, **kwargs):
        raise KombuOperationalError("Error 111 connecting to redis")

    monkeypatch.setattr(jobs, "_send", down)
    monkeypatch.setattr(jobs, "placement_pending_mark", lambda pool_id, clear=False: True)
    client = APIClient(raise_request_exception=False)
    client.force_authenticate(user)
    response = client.post("/api/workflows/", {"pool": racks.name, "spec": gang_spec("hiccup", 1, 1, key=None)},
                           format="json")
    assert response.status_code == 201
    assert list(Workflow.objects.values_list("workflow_id", "status")) == [("hiccup-1", "PENDING")]


@pytest.mark.django_db
def test_tick_redispatches_a_stranded_gang_once_per_grace_period(
    user, racks, no_broker, monkeypatch, django_capture_on_commit_callbacks
):
    workflow, _ = workflow_submit(user=user, pool_name=racks.name, spec=gang_spec("slow", 2, 1, key=None))
    placement_cycle_run(pool_id=racks.pk)
    group = TaskGroup.objects.get(workflow=workflow)
    # the first pod exists; the dispatch message for the rest was lost a minute ago
    TaskGroup.objects.filter(pk=group.pk).update(dispatch_requested_at=timezone.now() - timedelta(seconds=60))
    Task.objects.filter(workflow=workflow, name="t0").update(dispatched_at=timezone.now())
    no_broker.clear()
    for _ in range(5):
        with django_capture_on_commit_callbacks(execute=True):
            pods.tick()
    sent = [kw for name, kw in no_broker if name == jobs.GROUP_DISPATCH]
    assert sent == [{"group_id": group.pk}]


@pytest.mark.django_db
def test_tick_fails_a_gang_whose_pods_never_get_created(user, racks, no_broker, monkeypatch, settings):
    settings.OSMO_DISPATCH_DEADLINE_SECONDS = 300
    workflow, _ = workflow_submit(user=user, pool_name=racks.name, spec=gang_spec("stuck", 2, 1, key=None))
    placement_cycle_run(pool_id=racks.pk)
    long_ago = timezone.now() - timedelta(seconds=301)
    TaskGroup.objects.filter(workflow=workflow).update(placed_at=long_ago, dispatch_requested_at=long_ago)
    result = pods.tick()
    workflow.refresh_from_db()
    assert result["dispatch_expired"] == [TaskGroup.objects.get(workflow=workflow).pk]
    assert workflow.status == "FAILED_BACKEND_ERROR"
    assert "could not be created within 300s" in workflow.failure_message
    assert_reservations_match_tasks(racks)


@pytest.mark.django_db
def test_tick_resends_unconfirmed_pod_deletes(user, racks, no_broker, monkeypatch, django_capture_on_commit_callbacks):
    workflow, _ = workflow_submit(user=user, pool_name=racks.name, spec=gang_spec("gone", 1, 1, key=None))
    placement_cycle_run(pool_id=racks.pk)
    gang_dispatch(group_id=TaskGroup.objects.get(workflow=workflow).pk)
    workflow_cancel(workflow_pk=workflow.pk, user=user)  # its delete message is lost (no broker)
    task = Task.objects.get(workflow=workflow)
    Task.objects.filter(pk=task.pk).update(finished_at=timezone.now() - timedelta(seconds=60))
    no_broker.clear()
    with django_capture_on_commit_callbacks(execute=True):
        pods.tick()
    deletes = [kw for name, kw in no_broker if name == jobs.POD_DELETE]
    assert deletes == [{"task_id": task.pk}]
    pods.pod_delete(task_id=task.pk)
    no_broker.clear()
    with django_capture_on_commit_callbacks(execute=True):
        pods.tick()
    deletes = [kw for name, kw in no_broker if name == jobs.POD_DELETE]
    assert deletes == []


@pytest.mark.django_db(transaction=True)
def test_overlapping_cycles_of_one_pool_never_double_book(user, no_broker, monkeypatch):
    # given one 4-GPU node and two 4-GPU gangs; cycle A pauses right after reading its snapshot
    pool = make_pool("one", keys=[("rack", "rack")])
    make_node(pool, "n1", {"rack": "r1"}, gpu=4)
    for index in range(2):
        workflow_submit(user=user, pool_name=pool.name, spec=gang_spec(f"w{index}", 1, 4, key=None))
    loaded, resume = threading.Event(), threading.Event()
    real = read.snapshot_load_with_ids

    def slow_load(*args, **kwargs):
        result = real(*args, **kwargs)
        if threading.current_thread().name == "A":
            loaded.set()
            resume.wait(10)
        return result

    monkeypatch.setattr(read, "snapshot_load_with_ids", slow_load)
    results: dict = {}

    def run(name):
        try:
            results[name] = placement_cycle_run(pool_id=pool.pk)
        finally:
            connection.close()

    a = threading.Thread(target=run, args=("A",), name="A")
    a.start()
    assert loaded.wait(10)
    # when cycle B runs meanwhile
    b = threading.Thread(target=run, args=("B",), name="B")
    b.start()
    b.join(10)
    resume.set()
    a.join(10)
    # then B backed off, A placed exactly one gang, and the node was never over-committed
    assert results["B"].locked is False
    assert len(results["A"].placed) == 1
    assert_never_overcommitted(pool)
