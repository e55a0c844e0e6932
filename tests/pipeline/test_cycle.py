"""The placement cycle and pod lifecycle as services on the real database (no worker process)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from scheduler.models import Reservation
from scheduler.services.pools import pool_keys_set
from tests.factories import make_node
from tests.pipeline.helpers import (
    CHAIN_SPEC,
    assert_never_overcommitted,
    assert_required_constraints_hold,
    backend_use,
    cycle_cursor_set,
    gang_spec,
)
from workflows.models import StatusTransition, Task, TaskGroup, Workflow
from workflows.scheduling.cycle import placement_cycle_run
from workflows.scheduling.gang_dispatch import gang_dispatch
from workflows.scheduling.pods import pods_sync
from workflows.services import workflow_cancel, workflow_submit

pytestmark = pytest.mark.django_db




def submit(user, pool, text, **kwargs) -> Workflow:
    workflow, _ = workflow_submit(user=user, pool_name=pool.name, spec=text, **kwargs)
    return workflow


def test_cycle_places_gang_reserves_and_enqueues_dispatch(user, racks, django_capture_on_commit_callbacks):
    # given
    workflow = submit(user, racks, gang_spec("job", 2, 4))
    # when
    with django_capture_on_commit_callbacks() as callbacks:
        result = placement_cycle_run(pool_id=racks.pk)
    # then
    group = TaskGroup.objects.get(workflow=workflow)
    assert result.placed == [group.pk]
    assert group.status == "INITIALIZING"
    tasks = list(Task.objects.filter(workflow=workflow).select_related("node").order_by("name"))
    assert {t.node.labels["rack"] for t in tasks} == {"r1"} or {t.node.labels["rack"] for t in tasks} == {"r2"}
    assert len({t.node.name for t in tasks}) == 2
    assert all(t.status == "INITIALIZING" and t.pod_name.startswith(f"{workflow.global_id}-t") for t in tasks)
    assert Reservation.objects.filter(released_at__isnull=True).count() == 2
    assert_required_constraints_hold(group)
    workflow.refresh_from_db()
    assert workflow.status == "RUNNING"
    assert len(callbacks) == 1  # one group_dispatch enqueued, on commit only
    assert StatusTransition.objects.filter(task__isnull=False, to_status="INITIALIZING").count() == 2


def test_group_that_cannot_fit_waits_with_reason_then_is_placed_after_cancel(user, racks):
    # given two gangs each holding a whole rack
    first = submit(user, racks, gang_spec("first", 2, 4))
    submit(user, racks, gang_spec("other", 2, 4))
    placement_cycle_run(pool_id=racks.pk)
    waiting = submit(user, racks, gang_spec("waiting", 2, 4))
    # when
    placement_cycle_run(pool_id=racks.pk)
    # then the third waits with its reason
    group = TaskGroup.objects.get(workflow=waiting)
    assert group.status == "SCHEDULING"
    assert group.unschedulable_reason["status"] == "unschedulable"
    assert "0 of 2" in group.unschedulable_reason["message"]
    # and is placed once the first workflow is cancelled
    workflow_cancel(workflow_pk=first.pk, user=user)
    assert Reservation.objects.filter(released_at__isnull=True).count() == 2
    placement_cycle_run(pool_id=racks.pk)
    group.refresh_from_db()
    assert group.status == "INITIALIZING"
    assert group.unschedulable_reason is None
    assert_never_overcommitted(racks)


def test_waiting_gang_placed_when_running_one_completes(user, racks):
    # given two gangs of a whole rack each already running, and a third one waiting
    a = submit(user, racks, gang_spec("a", 2, 4))
    b = submit(user, racks, gang_spec("b", 2, 4))
    placement_cycle_run(pool_id=racks.pk)
    c = submit(user, racks, gang_spec("c", 2, 4))
    placement_cycle_run(pool_id=racks.pk)
    assert TaskGroup.objects.get(workflow=c).status == "SCHEDULING"
    # when a's pods run to completion (simulated backend: 1 s)
    for workflow in (a, b):
        gang_dispatch(group_id=TaskGroup.objects.get(workflow=workflow).pk)
    Task.objects.filter(workflow=a).update(dispatched_at=timezone.now() - timedelta(seconds=5))
    pods_sync(pool_id=racks.pk)
    # then a completed, released its capacity, and c is placed in the next cycle
    a.refresh_from_db()
    assert a.status == "COMPLETED"
    assert Reservation.objects.filter(task_id__in=a.tasks.values("pk"), released_at__isnull=True).count() == 0
    placement_cycle_run(pool_id=racks.pk)
    assert TaskGroup.objects.get(workflow=c).status == "INITIALIZING"
    assert_never_overcommitted(racks)


def test_lifecycle_statuses_and_history(user, racks):
    workflow = submit(user, racks, gang_spec("life", 1, 1, key=None))
    placement_cycle_run(pool_id=racks.pk)
    gang_dispatch(group_id=TaskGroup.objects.get(workflow=workflow).pk)
    task = Task.objects.get(workflow=workflow)
    assert task.dispatched_at is not None
    # Pending -> Running
    Task.objects.filter(pk=task.pk).update(dispatched_at=timezone.now() - timedelta(seconds=0.6))
    pods_sync(pool_id=racks.pk)
    task.refresh_from_db()
    assert task.status == "RUNNING"
    # Running -> Succeeded
    Task.objects.filter(pk=task.pk).update(dispatched_at=timezone.now() - timedelta(seconds=2))
    pods_sync(pool_id=racks.pk)
    workflow.refresh_from_db()
    assert workflow.status == "COMPLETED"
    history = list(StatusTransition.objects.filter(task=task).values_list("to_status", flat=True))
    assert history == ["INITIALIZING", "RUNNING", "COMPLETED"]
    workflow_history = list(
        StatusTransition.objects.filter(workflow=workflow, group=None).values_list("to_status", flat=True)
    )
    assert workflow_history == ["PENDING", "RUNNING", "COMPLETED"]


def test_failed_task_fails_gang_and_downstream(user, racks):
    text = """
workflow:
  name: dag
  groups:
  - name: first
    tasks:
    - {name: a, lead: true, image: busybox, command: [false], environment: {OSMO_SIM_EXIT_CODE: "3"}}
    - {name: b, image: busybox, command: [true]}
  - name: second
    tasks:
    - {name: c, lead: true, image: busybox, command: [true], inputs: [{task: a}]}
resources:
  default: {gpu: 1}
"""
    workflow = submit(user, racks, text)
    assert dict(TaskGroup.objects.filter(workflow=workflow).values_list("name", "status")) == {
        "first": "SCHEDULING", "second": "WAITING"}
    placement_cycle_run(pool_id=racks.pk)
    gang_dispatch(group_id=TaskGroup.objects.get(workflow=workflow, name="first").pk)
    earlier = timezone.now() - timedelta(seconds=5)
    Task.objects.filter(workflow=workflow, name__in=["a", "b"]).update(dispatched_at=earlier)
    pods_sync(pool_id=racks.pk)
    workflow.refresh_from_db()
    statuses = dict(Task.objects.filter(workflow=workflow).values_list("name", "status"))
    assert statuses == {"a": "FAILED", "b": "COMPLETED", "c": "FAILED_UPSTREAM"}
    assert Task.objects.get(workflow=workflow, name="a").exit_code == 3
    assert workflow.status == "FAILED"
    assert "task a failed" in workflow.failure_message
    assert Reservation.objects.filter(released_at__isnull=True).count() == 0


def test_downstream_group_waits_for_upstream(user, racks):
    text = CHAIN_SPEC
    workflow = submit(user, racks, text)
    placement_cycle_run(pool_id=racks.pk)
    gang_dispatch(group_id=TaskGroup.objects.get(workflow=workflow, name="first").pk)
    assert TaskGroup.objects.get(workflow=workflow, name="second").status == "WAITING"
    Task.objects.filter(workflow=workflow, name="a").update(dispatched_at=timezone.now() - timedelta(seconds=5))
    pods_sync(pool_id=racks.pk)
    assert TaskGroup.objects.get(workflow=workflow, name="second").status == "SCHEDULING"
    placement_cycle_run(pool_id=racks.pk)
    assert TaskGroup.objects.get(workflow=workflow, name="second").status == "INITIALIZING"


def test_priority_then_age_order(user, racks):
    # given room for one whole-pool gang at a time: an old LOW, then two NORMAL, then a HIGH
    low = submit(user, racks, gang_spec("low", 4, 4, key=None), priority="LOW")
    older = submit(user, racks, gang_spec("older", 4, 4, key=None))
    newer = submit(user, racks, gang_spec("newer", 4, 4, key=None))
    high = submit(user, racks, gang_spec("high", 4, 4, key=None), priority="HIGH")
    order = []
    for _ in range(4):
        # when each placed gang is cancelled in turn, the next cycle picks the next one
        placement_cycle_run(pool_id=racks.pk)
        placed = Workflow.objects.get(groups__status="INITIALIZING")
        order.append(placed.name)
        workflow_cancel(workflow_pk=placed.pk, user=user)
    # then priority first, then age within a priority
    assert order == ["high", "older", "newer", "low"]
    assert {low.pk, older.pk, newer.pk, high.pk} == set(Workflow.objects.values_list("pk", flat=True))


def test_backfill_lets_small_gang_pass_a_big_one(user, racks):
    submit(user, racks, gang_spec("hold", 1, 4, key=None))
    placement_cycle_run(pool_id=racks.pk)
    big = submit(user, racks, gang_spec("big", 4, 4, key=None))
    small = submit(user, racks, gang_spec("small", 1, 4, key=None))
    placement_cycle_run(pool_id=racks.pk)
    assert TaskGroup.objects.get(workflow=big).status == "SCHEDULING"
    assert TaskGroup.objects.get(workflow=small).status == "INITIALIZING"


def test_starving_gang_stops_backfill(user, racks, settings):
    settings.OSMO_STARVATION_SECONDS = 60
    submit(user, racks, gang_spec("hold", 1, 4, key=None))
    placement_cycle_run(pool_id=racks.pk)
    big = submit(user, racks, gang_spec("big", 4, 4, key=None))
    TaskGroup.objects.filter(workflow=big).update(scheduling_since=timezone.now() - timedelta(seconds=120))
    small = submit(user, racks, gang_spec("small", 1, 4, key=None))
    placement_cycle_run(pool_id=racks.pk)
    assert TaskGroup.objects.get(workflow=small).status == "SCHEDULING"
    assert TaskGroup.objects.get(workflow=small).unschedulable_reason["code"] == "behind_starving_group"


def test_a_starving_gang_keeps_its_machines_and_backfill_goes_on_elsewhere(user, racks, settings):
    settings.OSMO_STARVATION_SECONDS = 60
    # given a1 with 2 GPUs taken and a2 full, and a gang of three whole nodes waiting long enough
    submit(user, racks, gang_spec("two", 1, 2, key=None))
    submit(user, racks, gang_spec("four", 1, 4, key=None))
    placement_cycle_run(pool_id=racks.pk)
    assert set(Task.objects.values_list("node__name", flat=True)) == {"a1", "a2"}
    big = submit(user, racks, gang_spec("big", 3, 4, key=None))
    TaskGroup.objects.filter(workflow=big).update(scheduling_since=timezone.now() - timedelta(seconds=120))
    # when a 2-GPU gang and then a 4-GPU gang arrive behind it
    small = submit(user, racks, gang_spec("small", 1, 2, key=None))
    whole = submit(user, racks, gang_spec("whole", 1, 4, key=None))
    placement_cycle_run(pool_id=racks.pk)
    # then the big gang keeps the machines of its idle-pool placement (a1, a2, b1): the small gang is
    # placed on b2, the other machine, and the 4-GPU gang, which only b1 could take, waits behind it
    assert TaskGroup.objects.get(workflow=big).status == "SCHEDULING"
    assert Task.objects.get(workflow=small).node.name == "b2"
    group = TaskGroup.objects.get(workflow=whole)
    assert group.status == "SCHEDULING" and group.unschedulable_reason["code"] == "behind_starving_group"
    # and once the two gangs on a1 and a2 end, the big gang gets its machines
    for name in ("two", "four"):
        workflow_cancel(workflow_pk=Workflow.objects.get(name=name).pk, user=user)
    placement_cycle_run(pool_id=racks.pk)
    assert TaskGroup.objects.get(workflow=big).status == "INITIALIZING"
    assert set(Task.objects.filter(workflow=big).values_list("node__name", flat=True)) == {"a1", "a2", "b1"}


def test_queue_timeout_fails_group(user, racks, settings):
    settings.OSMO_REFUSE_NEVER_FITS = False  # a gang larger than the pool today stays queued
    workflow = submit(user, racks, gang_spec("late", 5, 4, extra="  timeout: {queue_timeout: 30s}\n"))
    TaskGroup.objects.filter(workflow=workflow).update(scheduling_since=timezone.now() - timedelta(seconds=31))
    result = placement_cycle_run(pool_id=racks.pk)
    workflow.refresh_from_db()
    assert len(result.timed_out) == 1
    assert workflow.status == "FAILED_QUEUE_TIMEOUT"
    assert "queue_timeout (30s)" in workflow.failure_message


def test_removed_key_makes_queued_group_wait_with_reason(user, racks, settings):
    settings.OSMO_REFUSE_NEVER_FITS = False  # a gang larger than the pool today stays queued
    workflow = submit(user, racks, gang_spec("keys", 5, 4))  # never fits: stays queued
    placement_cycle_run(pool_id=racks.pk)
    pool_keys_set(pool=racks, keys=[{"key": "row", "label": "row"}])
    racks.refresh_from_db()
    placement_cycle_run(pool_id=racks.pk)
    group = TaskGroup.objects.get(workflow=workflow)
    assert group.status == "SCHEDULING"
    assert group.unschedulable_reason["code"] == "pool_keys_changed"
    assert group.unschedulable_reason["missing_keys"] == ["rack"]


def test_cancel_releases_reservations(user, racks):
    workflow = submit(user, racks, gang_spec("gone", 2, 4))
    placement_cycle_run(pool_id=racks.pk)
    assert Reservation.objects.filter(released_at__isnull=True).count() == 2
    workflow_cancel(workflow_pk=workflow.pk, user=user)
    assert Reservation.objects.filter(released_at__isnull=True).count() == 0
    assert set(Task.objects.values_list("status", flat=True)) == {"FAILED_CANCELED"}


def test_relabelled_key_makes_queued_group_wait(user, racks, settings):
    settings.OSMO_REFUSE_NEVER_FITS = False  # a gang larger than the pool today stays queued
    workflow = submit(user, racks, gang_spec("relabel", 5, 4))
    pool_keys_set(pool=racks, keys=[{"key": "rack", "label": "topology.kubernetes.io/rack"}])
    racks.refresh_from_db()
    placement_cycle_run(pool_id=racks.pk)
    reason = TaskGroup.objects.get(workflow=workflow).unschedulable_reason
    assert reason["code"] == "pool_keys_changed"
    assert reason["relabelled_keys"] == ["rack"]
    assert "now read another node label" in reason["message"]


def test_added_unused_key_changes_nothing_for_queued_group(user, racks, settings):
    settings.OSMO_REFUSE_NEVER_FITS = False  # a gang larger than the pool today stays queued
    # given a group that fits once a node is added
    workflow = submit(user, racks, gang_spec("grow", 3, 4))
    placement_cycle_run(pool_id=racks.pk)
    assert TaskGroup.objects.get(workflow=workflow).status == "SCHEDULING"
    # when an unrelated coarser key is added and a third node joins rack r1
    pool_keys_set(pool=racks, keys=[{"key": "zone", "label": "zone"}, {"key": "rack", "label": "rack"}])
    racks.refresh_from_db()
    for node in racks.nodes.all():
        node.labels = {**node.labels, "zone": "z1"}
        node.save(update_fields=["labels"])
    make_node(racks, "a3", {"zone": "z1", "rack": "r1"}, gpu=4)
    placement_cycle_run(pool_id=racks.pk)
    # then the group is placed: its tree's meaning did not change
    assert TaskGroup.objects.get(workflow=workflow).status == "INITIALIZING"


def test_solver_error_fails_only_that_group(user, racks, monkeypatch):
    # given a solver that breaks on one gang
    from workflows.scheduling.cycle import walk as placement

    real_solve = placement.solve

    def flaky_solve(snapshot, request, policy):
        if request.name == "g" and request.tasks[0].name == "t0" and len(request.tasks) == 3:
            raise ValueError("boom")
        return real_solve(snapshot, request, policy)

    monkeypatch.setattr(placement, "solve", flaky_solve)
    broken = submit(user, racks, gang_spec("broken", 3, 1, key=None))
    fine = submit(user, racks, gang_spec("fine", 2, 1, key=None))
    # when
    placement_cycle_run(pool_id=racks.pk)
    # then the broken one fails with a server error and the other one is still placed
    broken.refresh_from_db()
    assert broken.status == "FAILED_SERVER_ERROR"
    assert "internal error" in broken.failure_message
    assert TaskGroup.objects.get(workflow=fine).status == "INITIALIZING"


def test_exec_timeout_fails_a_running_gang(user, racks):
    workflow = submit(user, racks, gang_spec("long", 1, 1, key=None, extra="  timeout: {exec_timeout: 60s}\n"))
    placement_cycle_run(pool_id=racks.pk)
    gang_dispatch(group_id=TaskGroup.objects.get(workflow=workflow).pk)
    Task.objects.filter(workflow=workflow).update(dispatched_at=timezone.now() - timedelta(seconds=0.7))
    pods_sync(pool_id=racks.pk)  # RUNNING
    TaskGroup.objects.filter(workflow=workflow).update(started_at=timezone.now() - timedelta(seconds=61))
    pods_sync(pool_id=racks.pk)
    workflow.refresh_from_db()
    assert workflow.status == "FAILED_EXEC_TIMEOUT"
    assert "exec_timeout (60s)" in workflow.failure_message
    assert Reservation.objects.filter(released_at__isnull=True).count() == 0


def test_permanent_backend_error_fails_the_gang(user, racks, monkeypatch):
    from scheduler.dispatch import DispatchPermanentError

    class Refusing:
        name = "refusing"

        def create_pod(self, pod):
            raise DispatchPermanentError("admission webhook denied the pod")

    backend_use(monkeypatch, Refusing())
    workflow = submit(user, racks, gang_spec("denied", 2, 1, key=None))
    placement_cycle_run(pool_id=racks.pk)
    gang_dispatch(group_id=TaskGroup.objects.get(workflow=workflow).pk)
    workflow.refresh_from_db()
    assert workflow.status == "FAILED_BACKEND_ERROR"
    assert "admission webhook denied the pod" in workflow.failure_message
    assert set(Task.objects.filter(workflow=workflow).values_list("status", flat=True)) == {"FAILED_BACKEND_ERROR"}
    assert Reservation.objects.filter(released_at__isnull=True).count() == 0


def test_pod_missing_from_the_backend_fails_the_gang(user, racks, monkeypatch):
    from scheduler.dispatch import PodState

    workflow = submit(user, racks, gang_spec("vanished", 1, 1, key=None))
    placement_cycle_run(pool_id=racks.pk)
    gang_dispatch(group_id=TaskGroup.objects.get(workflow=workflow).pk)

    class Forgetful:
        name = "forgetful"

        def pods_observe(self, pods, *, namespace, pool, now):
            return [], {pod.pod_name: PodState("Missing") for pod in pods}

    backend_use(monkeypatch, Forgetful())
    pods_sync(pool_id=racks.pk)
    workflow.refresh_from_db()
    assert workflow.status == "FAILED_BACKEND_ERROR"
    assert Task.objects.get(workflow=workflow).failure_message == "pod disappeared from the backend"
    assert Reservation.objects.filter(released_at__isnull=True).count() == 0


def test_a_resumed_cycle_places_the_starving_gang_on_its_own_kept_machines(user, settings):
    """Found in review: a cycle resuming from its cursor met the starving gang last and held it behind
    its own reservation, so it evicted LOW work elsewhere while its kept machines stood free."""
    from tests.factories import make_pool
    from workflows.scheduling.cycle import queue_read as _queue_read

    settings.OSMO_STARVATION_SECONDS = 60
    pool = make_pool("p6", keys=[("rack", "rack")], sim_task_seconds=1000)
    for rack, prefix in (("r1", "a"), ("r2", "b"), ("r3", "c")):
        for n in (1, 2):
            make_node(pool, f"{prefix}{n}", {"rack": rack}, gpu=4)

    def submit(name: str, tasks: int, priority: str, key: str | None = None) -> Workflow:
        return workflow_submit(user=user, pool_name="p6", spec=gang_spec(name, tasks, 4, key=key),
                               priority=priority)[0]

    # given two racks held by NORMAL gangs, a one-node NORMAL gang and a one-node LOW gang on the third
    x, _y = submit("x", 2, "NORMAL", "rack"), submit("y", 2, "NORMAL", "rack")
    placement_cycle_run(pool_id=pool.pk)
    z, low = submit("z", 1, "NORMAL"), submit("low", 1, "LOW")
    placement_cycle_run(pool_id=pool.pk)
    # and a two-node NORMAL gang starving (waiting past the threshold, fits the idle pool) before a LOW one
    starving = submit("s", 2, "NORMAL")
    TaskGroup.objects.filter(workflow=starving).update(scheduling_since=timezone.now() - timedelta(seconds=120))
    tail = submit("tail", 6, "LOW")
    placement_cycle_run(pool_id=pool.pk)
    group = TaskGroup.objects.get(workflow=starving)
    assert group.status == "SCHEDULING" and group.idle_fit and group.proof_epoch is not None
    # when the machines kept for it and one more free up, and the next cycle resumes behind it
    for workflow in (x, z):
        workflow_cancel(workflow_pk=workflow.pk, user=user)
    pool.refresh_from_db()
    cursor = next(q.order for q in _queue_read(pool) if q.pk == TaskGroup.objects.get(workflow=tail).pk)
    cycle_cursor_set(pool, cursor)
    result = placement_cycle_run(pool_id=pool.pk)
    # then it is placed on the free machines, and no LOW gang is evicted for it
    assert result.resumed and result.preempted == 0
    assert TaskGroup.objects.get(workflow=starving).status == "INITIALIZING"
    assert TaskGroup.objects.get(workflow=low).preemptions == 0
