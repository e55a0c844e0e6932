"""The gangs a placement cycle placed are dispatched in one ``workflows.groups_dispatch`` message (per
``OSMO_DISPATCH_BATCH_GANGS`` gangs): what it sends, and that a lost, redelivered or partly failed
batch still dispatches every gang once (the tick's re-dispatch, idempotent pod creation)."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest
from django.utils import timezone

from scheduler.dispatch import DispatchTransientError
from tests.pipeline.helpers import backend_use, gang_spec
from workflows import jobs
from workflows import tasks as worker_tasks
from workflows.models import Task, TaskGroup
from workflows.scheduling import gang_dispatch, pods
from workflows.scheduling.cycle import placement_cycle_run
from workflows.services import workflow_cancel, workflow_submit

pytestmark = pytest.mark.django_db


class Recorder:
    """A pod backend that counts the creates per pod name (AlreadyExists would be success)."""

    name = "recorder"

    def __init__(self) -> None:
        self.created: Counter[str] = Counter()
        self.fail_for: set[str] = set()

    def create_pod(self, pod):
        if pod.pod_name in self.fail_for:
            raise DispatchTransientError("HTTP 500")
        self.created[pod.pod_name] += 1

    def delete_pod(self, *, namespace, pod_name, grace_seconds=None):
        self.created.pop(pod_name, None)


@pytest.fixture
def recorder(monkeypatch):
    backend = Recorder()
    backend_use(monkeypatch, backend)
    return backend


def place(user, pool, count: int, django_capture_on_commit_callbacks, prefix: str = "b") -> list[int]:
    """Submit ``count`` one-node gangs and place them in one cycle (its messages run on commit)."""
    for index in range(count):
        workflow_submit(user=user, pool_name=pool.name, spec=gang_spec(f"{prefix}{index}", 1, 4, key=None))
    with django_capture_on_commit_callbacks(execute=True):
        result = placement_cycle_run(pool_id=pool.pk)
    assert len(result.placed) == count
    return sorted(result.placed)


def dispatch_messages(sent) -> list[tuple[str, dict]]:
    return [(name, kwargs) for name, kwargs in sent if name in (jobs.GROUP_DISPATCH, jobs.GROUPS_DISPATCH)]


def test_a_cycle_sends_one_dispatch_message_for_the_gangs_it_placed(user, racks, no_broker,
                                                                    django_capture_on_commit_callbacks):
    # when one cycle places three gangs
    placed = place(user, racks, 3, django_capture_on_commit_callbacks)
    # then one message carries them all
    assert dispatch_messages(no_broker) == [(jobs.GROUPS_DISPATCH, {"group_ids": placed})]


def test_the_batch_size_splits_a_cycles_gangs_into_messages(user, racks, no_broker, settings,
                                                            django_capture_on_commit_callbacks):
    settings.OSMO_DISPATCH_BATCH_GANGS = 2
    placed = place(user, racks, 3, django_capture_on_commit_callbacks)
    assert dispatch_messages(no_broker) == [(jobs.GROUPS_DISPATCH, {"group_ids": placed[:2]}),
                                            (jobs.GROUPS_DISPATCH, {"group_ids": placed[2:]})]


def test_a_batch_creates_every_pod_of_its_gangs_once(user, racks, no_broker, recorder,
                                                     django_capture_on_commit_callbacks):
    placed = place(user, racks, 3, django_capture_on_commit_callbacks)
    # when the batch runs, and is then delivered again (acks_late: its worker was lost after the run)
    worker_tasks.groups_dispatch_task.run(group_ids=placed)
    worker_tasks.groups_dispatch_task.run(group_ids=placed)
    # then every pod was created once and recorded
    names = set(Task.objects.filter(group__in=placed).values_list("pod_name", flat=True))
    assert recorder.created == Counter({name: 1 for name in names})
    assert not Task.objects.filter(group__in=placed, dispatched_at__isnull=True).exists()


def test_a_batch_lost_between_the_cycles_commit_and_its_dispatch_is_redispatched_by_the_tick(
        user, racks, no_broker, recorder, django_capture_on_commit_callbacks):
    """The worker is killed after the cycle committed and before the batch ran (or the message is lost
    on its way): the placed gangs are stranded, and the tick dispatches them again."""
    # given a cycle placed three gangs; its batch message never ran
    placed = place(user, racks, 3, django_capture_on_commit_callbacks)
    no_broker.clear()
    with django_capture_on_commit_callbacks(execute=True):
        assert pods.tick()["redispatch"] == []  # within the grace period: nothing yet
    # when the grace period has passed
    TaskGroup.objects.filter(pk__in=placed).update(dispatch_requested_at=timezone.now() - timedelta(seconds=60))
    with django_capture_on_commit_callbacks(execute=True):
        assert pods.tick()["redispatch"] == placed
    # then each gang is dispatched again in a message of its own, and every pod is created once
    messages = dispatch_messages(no_broker)
    assert messages == [(jobs.GROUP_DISPATCH, {"group_id": group_id}) for group_id in placed]
    for _name, kwargs in messages:
        worker_tasks.group_dispatch_task.run(**kwargs)
    names = set(Task.objects.filter(group__in=placed).values_list("pod_name", flat=True))
    assert recorder.created == Counter({name: 1 for name in names})
    assert not Task.objects.filter(group__in=placed, dispatched_at__isnull=True).exists()


def test_a_transient_error_sends_that_gang_on_alone_and_the_batch_goes_on(user, racks, no_broker, recorder,
                                                                          django_capture_on_commit_callbacks):
    placed = place(user, racks, 3, django_capture_on_commit_callbacks)
    failing = Task.objects.get(group=placed[0]).pod_name
    recorder.fail_for = {failing}
    no_broker.clear()
    # when the first gang's pod creation fails transiently
    with django_capture_on_commit_callbacks(execute=True):
        worker_tasks.groups_dispatch_task.run(group_ids=placed)
    # then the other two are dispatched, and the first goes on in its own (retrying) message
    assert set(Task.objects.filter(dispatched_at__isnull=True).values_list("group_id", flat=True)) == {placed[0]}
    assert dispatch_messages(no_broker) == [(jobs.GROUP_DISPATCH, {"group_id": placed[0]})]
    recorder.fail_for = set()
    worker_tasks.group_dispatch_task.run(group_id=placed[0])
    assert not Task.objects.filter(group__in=placed, dispatched_at__isnull=True).exists()
    assert set(recorder.created.values()) == {1}


def test_an_unexpected_error_on_one_gang_leaves_the_rest_of_the_batch_dispatched(
        user, racks, no_broker, recorder, django_capture_on_commit_callbacks, monkeypatch, caplog):
    """Found in review: any error but a transient one ended the batch, so the gangs after it waited
    for the tick's re-dispatch."""
    placed = place(user, racks, 3, django_capture_on_commit_callbacks)
    dispatch = gang_dispatch.gang_dispatch

    def failing_first(*, group_id: int, batch=None, retry_in=0.0):
        if group_id == placed[0]:
            raise RuntimeError("a bug")
        return dispatch(group_id=group_id, batch=batch, retry_in=retry_in)

    monkeypatch.setattr(gang_dispatch, "gang_dispatch", failing_first)
    # when the batch meets an unexpected error on its first gang
    worker_tasks.groups_dispatch_task.run(group_ids=placed)
    # then the two others are dispatched, and the error is logged for the first (left to the tick)
    assert set(Task.objects.filter(dispatched_at__isnull=True).values_list("group_id", flat=True)) == {placed[0]}
    assert any(r.message == "dispatch.batch_gang_failed" and r.exc_info for r in caplog.records)


def test_a_gang_cancelled_before_its_batch_runs_gets_no_pod(user, racks, no_broker, recorder,
                                                           django_capture_on_commit_callbacks):
    placed = place(user, racks, 2, django_capture_on_commit_callbacks)
    cancelled = TaskGroup.objects.select_related("workflow").get(pk=placed[0]).workflow
    workflow_cancel(workflow_pk=cancelled.pk, user=user)
    # when the batch runs
    worker_tasks.groups_dispatch_task.run(group_ids=placed)
    # then only the other gang's pod exists
    assert set(recorder.created) == {Task.objects.get(group=placed[1]).pod_name}
    assert not Task.objects.filter(workflow=cancelled, dispatched_at__isnull=False).exists()


def test_a_batch_reads_its_gangs_once_and_records_each_gang_in_one_query(
        user, racks, no_broker, recorder, django_capture_on_commit_callbacks):
    """Once per message: the gangs, their tasks and their pool; each gang: one UPDATE recording its
    pods, however many pods (a query per pod, or the gangs read one by one, would show here)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    for index in range(4):  # gangs of two 2-GPU pods: all four fit the four 4-GPU nodes
        workflow_submit(user=user, pool_name=racks.name, spec=gang_spec(f"two{index}", 2, 2, key=None))
    with django_capture_on_commit_callbacks(execute=True):
        placed = sorted(placement_cycle_run(pool_id=racks.pk).placed)
    assert len(placed) == 4
    with CaptureQueriesContext(connection) as single:
        worker_tasks.groups_dispatch_task.run(group_ids=placed[:1])
    with CaptureQueriesContext(connection) as batch:
        worker_tasks.groups_dispatch_task.run(group_ids=placed[1:])
    assert len(single) == 3 + 1
    assert len(batch) == 3 + 3 * 1
    assert len(recorder.created) == 8
    assert not Task.objects.filter(dispatched_at__isnull=True).exists()
