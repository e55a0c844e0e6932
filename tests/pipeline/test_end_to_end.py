"""The pipeline with real processes: PostgreSQL, Redis, `celery worker` and `celery beat`."""

from __future__ import annotations

import random
import threading
import time

import pytest
from django.db import connection, connections
from django.utils import timezone

from scheduler.models import Pool, Reservation, WorkerHeartbeat
from scheduler.selectors import node_queryset_with_usage
from tests.conftest import wait_for
from tests.factories import SEED_EXAMPLES, example_spec, import_example_pool, make_node, make_pool
from tests.pipeline.helpers import (
    assert_never_overcommitted,
    assert_required_constraints_hold,
    assert_reservations_match_tasks,
)
from workflows.models import Task, TaskGroup, Workflow
from workflows.scheduling.locks import PLACEMENT_LOCK as _LOCK_NAMESPACE
from workflows.services import workflow_cancel, workflow_submit

pytestmark = pytest.mark.django_db(transaction=True)


def free_by_node(pool: Pool) -> dict[str, tuple[int, int, int, int]]:
    return {
        n.name: (n.free_gpu, n.free_cpu_millis, n.free_memory_bytes, n.free_storage_bytes)
        for n in node_queryset_with_usage(pool)
    }


def all_finished(workflows: list[Workflow]) -> bool:
    statuses = set(Workflow.objects.filter(pk__in=[w.pk for w in workflows]).values_list("status", flat=True))
    return statuses <= {"COMPLETED", "FAILED", "FAILED_CANCELED", "FAILED_QUEUE_TIMEOUT", "FAILED_BACKEND_ERROR",
                        "FAILED_UPSTREAM", "FAILED_SERVER_ERROR"}


def gang_spec(name: str, tasks: int, gpu: int, seconds: float) -> str:
    rows = [f"    - {{name: t{i}, {'lead: true, ' if i == 0 else ''}image: busybox, command: [true], "
            f"environment: {{OSMO_SIM_SECONDS: '{seconds}'}}}}" for i in range(tasks)]
    return (f"workflow:\n  name: {name}\n  groups:\n  - name: g\n    tasks:\n" + "\n".join(rows)
            + f"\nresources:\n  default: {{gpu: {gpu}, topology: [{{key: rack}}]}}\n")


def test_seed_examples_run_to_completion_on_nvl72(user, celery_worker_factory, celery_beat):
    # given the NVL72 demo pool, pods that run for one simulated second, one worker and beat
    pool = import_example_pool("nvl72.yaml")
    Pool.objects.filter(pk=pool.pk).update(sim_task_seconds=1)
    before = free_by_node(pool)
    celery_worker_factory("e2e", concurrency=2)
    # when the five seed examples are submitted
    workflows = [workflow_submit(user=user, pool_name=pool.name, spec=example_spec(name))[0] for name in SEED_EXAMPLES]
    # then each reaches COMPLETED with placements that satisfy its tree
    wait_for(lambda: all_finished(workflows), timeout=120, message="all seed workflows to finish")
    assert sorted(Workflow.objects.values_list("status", flat=True)) == ["COMPLETED"] * 5
    for group in TaskGroup.objects.select_related("workflow__pool"):
        assert_required_constraints_hold(group)
        assert [t.status for t in group.tasks.all()] == ["COMPLETED"] * group.tasks.count()
    # each example's semantics on the real placement
    same_zone = Task.objects.filter(workflow__name="multiple-nvl72-same-zone").select_related("node")
    assert len({t.node.labels["topology.kubernetes.io/zone"] for t in same_zone}) == 1
    # reused group names: task-1 and task-2 share a rack; zone-a and zone-b are distinct tree nodes,
    # which may share a zone (docs/design.md §4: siblings may share a domain or not), so nothing forces task-3 apart
    scoped = {t.name: t.node for t in Task.objects.filter(workflow__name="scoped-group-example").select_related("node")}
    rack = "topology.kubernetes.io/rack"
    assert scoped["task-1"].labels[rack] == scoped["task-2"].labels[rack]
    # and capacity returns to what it was
    assert Reservation.objects.filter(released_at__isnull=True).count() == 0
    assert free_by_node(pool) == before
    assert_never_overcommitted(pool)
    assert_reservations_match_tasks(pool)


def test_waiting_gang_placed_automatically_when_running_one_finishes(user, celery_worker_factory, celery_beat):
    # given a pool of one 4-GPU rack and a running gang holding all of it
    pool = make_pool("one-rack", keys=[("rack", "rack")], sim_task_seconds=3)
    make_node(pool, "n1", {"rack": "r1"}, gpu=4)
    celery_worker_factory("w1")
    running = workflow_submit(user=user, pool_name=pool.name, spec=gang_spec("running", 1, 4, 3))[0]
    wait_for(lambda: Task.objects.filter(workflow=running, status="RUNNING").exists(), timeout=30,
             message="first gang running")
    # when a second gang arrives, it waits in SCHEDULING with its reason
    waiting = workflow_submit(user=user, pool_name=pool.name, spec=gang_spec("waiting", 1, 4, 0.5))[0]
    group = TaskGroup.objects.get(workflow=waiting)
    wait_for(lambda: TaskGroup.objects.get(pk=group.pk).unschedulable_reason, timeout=20, message="a reason")
    group.refresh_from_db()
    assert group.status == "SCHEDULING"
    assert "0 of 1" in group.unschedulable_reason["message"]
    # then once the first one completes, the second is placed and completes without any other action
    wait_for(lambda: Workflow.objects.get(pk=waiting.pk).status == "COMPLETED", timeout=60,
             message="second gang to complete")
    assert Workflow.objects.get(pk=running.pk).status == "COMPLETED"
    assert_never_overcommitted(pool)
    assert_reservations_match_tasks(pool)


def test_submission_and_cancel_trigger_placement_without_the_tick(user, celery_worker_factory, worker_env):
    # given no beat process and no tick at all: only the event triggers (submission, cancellation) can place work
    pool = make_pool("cancel-rack", keys=[("rack", "rack")], sim_task_seconds=600)
    make_node(pool, "n1", {"rack": "r1"}, gpu=4)
    celery_worker_factory("w1", env={**worker_env, "OSMO_TICK_WITHOUT_BEAT": "false"})
    hog = workflow_submit(user=user, pool_name=pool.name, spec=gang_spec("hog", 1, 4, 600))[0]
    wait_for(lambda: Task.objects.filter(workflow=hog, status="INITIALIZING", dispatched_at__isnull=False).exists(),
             timeout=20, message="hog placed and dispatched")
    waiting = workflow_submit(user=user, pool_name=pool.name, spec=gang_spec("next", 1, 4, 0.5))[0]
    wait_for(lambda: TaskGroup.objects.get(workflow=waiting).unschedulable_reason, timeout=20, message="a reason")
    # when the hog is cancelled
    workflow_cancel(workflow_pk=hog.pk, user=user)
    # then the waiting gang is placed and dispatched by the cancellation's own trigger
    wait_for(lambda: Task.objects.filter(workflow=waiting, status="INITIALIZING", dispatched_at__isnull=False)
             .exists(), timeout=20, message="next placed after the cancel")
    assert Workflow.objects.get(pk=hog.pk).status == "FAILED_CANCELED"
    assert Task.objects.get(workflow=hog).pod_deleted_at is not None
    assert_never_overcommitted(pool)
    assert_reservations_match_tasks(pool)


def _small_cluster(name: str, sim: float) -> Pool:
    """2 racks x 4 nodes x 4 GPUs = 32 GPUs."""
    pool = make_pool(name, keys=[("rack", "rack")], sim_task_seconds=sim)
    for rack in ("r1", "r2"):
        for n in range(4):
            make_node(pool, f"{rack}-n{n}", {"rack": rack}, gpu=4)
    return pool


def test_no_double_booking_with_concurrent_submissions_and_two_workers(user, celery_worker_factory, celery_beat):
    # given two worker processes and a 32-GPU pool
    pool = _small_cluster("busy", 0.5)
    celery_worker_factory("w1", concurrency=2)
    celery_worker_factory("w2", concurrency=2)
    rng = random.Random(7)
    shapes = [(rng.randint(1, 4), rng.choice([1, 2, 4]), rng.choice([0.3, 0.6, 1.0])) for _ in range(30)]
    created: list[Workflow] = []
    lock = threading.Lock()

    def client(chunk):
        try:
            for index, (tasks, gpu, seconds) in chunk:
                workflow = workflow_submit(user=user, pool_name=pool.name,
                                           spec=gang_spec(f"gang{index}", tasks, gpu, seconds))[0]
                with lock:
                    created.append(workflow)
        finally:
            connection.close()

    # when 30 gangs are submitted from 3 concurrent clients
    items = list(enumerate(shapes))
    threads = [threading.Thread(target=client, args=(items[i::3],)) for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(created) == 30
    wait_for(lambda: all_finished(created), timeout=180, interval=0.5, message="all gangs to finish")
    # then all completed and no node was ever over-committed in any resource
    assert set(Workflow.objects.values_list("status", flat=True)) == {"COMPLETED"}
    assert Reservation.objects.count() == sum(tasks for tasks, _gpu, _s in shapes)
    assert_never_overcommitted(pool)
    assert_reservations_match_tasks(pool)
    for group in TaskGroup.objects.select_related("workflow__pool"):
        assert_required_constraints_hold(group)


def _cycle_in_progress(pool_id: int) -> bool:
    with connections["default"].cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = %s AND objid = %s AND granted",
            [_LOCK_NAMESPACE, pool_id],
        )
        return cursor.fetchone()[0] > 0


def test_worker_killed_mid_cycle_loses_nothing_and_double_books_nothing(user, celery_worker_factory, celery_beat):
    # given a pool large enough that a cycle takes a while, and many queued gangs
    pool = make_pool("kill", keys=[("rack", "rack")], sim_task_seconds=0.5)
    from scheduler.models import Node

    Node.objects.bulk_create([
        Node(pool=pool, name=f"r{r:03d}-n{n:02d}", labels={"rack": f"r{r:03d}"}, gpu=4, cpu_millis=144_000,
             memory_bytes=2**40, storage_bytes=2**42)
        for r in range(120) for n in range(18)
    ])
    workflows = [workflow_submit(user=user, pool_name=pool.name, spec=gang_spec(f"k{i}", 8, 4, 0.5))[0]
                 for i in range(40)]
    victim = celery_worker_factory("victim", concurrency=1)
    # when the worker is SIGKILLed while it holds the pool's placement lock (mid-cycle)
    deadline = time.monotonic() + 60
    while not _cycle_in_progress(pool.pk):
        assert time.monotonic() < deadline, "never observed a cycle in progress"
        time.sleep(0.002)
    victim.kill()
    # then the killed transaction rolled back: no half-written placement survives
    for group in TaskGroup.objects.filter(workflow__in=workflows):
        reserved = Reservation.objects.filter(task_id__in=group.tasks.values("pk")).count()
        assert reserved in (0, group.tasks.count()), f"{group} half placed"
    # and a fresh worker (beat keeps ticking) finishes everything
    celery_worker_factory("rescuer", concurrency=2)
    wait_for(lambda: all_finished(workflows), timeout=240, interval=0.5, message="all gangs after the kill")
    assert set(Workflow.objects.filter(pk__in=[w.pk for w in workflows]).values_list("status", flat=True)) == {
        "COMPLETED"}
    assert Reservation.objects.filter(pool=pool).count() == 40 * 8
    assert_never_overcommitted(pool)
    assert_reservations_match_tasks(pool)


def test_gangs_whose_dispatch_batch_died_with_its_worker_are_dispatched_by_the_tick(user, celery_worker_factory,
                                                                                     celery_beat, worker_env, tmp_path):
    """The worker is SIGKILLed after its cycle committed and before the cycle's dispatch batch ran:
    the batch message is gone with it (dropped from the queue here), and the placed gangs are
    dispatched all the same, by the tick's re-dispatch."""
    import redis
    from django.conf import settings

    from tests.conftest import WorkerProcess

    # given a worker that places but does not dispatch (it does not consume the dispatch queue)
    pool = _small_cluster("lost-batch", sim=600)
    placer = WorkerProcess(worker_env, tmp_path / "placer.log", name="placer", queues="scheduler,default")
    try:
        gangs = [workflow_submit(user=user, pool_name=pool.name, spec=gang_spec(f"lost{i}", 2, 4, 600))[0]
                 for i in range(3)]
        wait_for(lambda: TaskGroup.objects.filter(workflow__in=gangs, status="INITIALIZING").count() == 3,
                 timeout=30, message="gangs placed")
        # when it is killed, and the batch it sent is lost
    finally:
        placer.kill()
        placer.stop()
    redis.Redis.from_url(settings.CELERY_BROKER_URL).delete("dispatch")
    assert Task.objects.filter(workflow__in=gangs, dispatched_at__isnull=False).count() == 0
    # then a fresh worker (beat keeps ticking) dispatches every pod of the three gangs
    celery_worker_factory("rescuer")
    wait_for(lambda: not Task.objects.filter(workflow__in=gangs, dispatched_at__isnull=True).exists(), timeout=60,
             interval=0.5, message="pods dispatched after the lost batch")
    assert_reservations_match_tasks(pool)


def test_work_progresses_without_beat(user, celery_worker_factory):
    """Beat is gone (never started here): the workers' own tick chain syncs pods and completes work."""
    # given a worker and no beat
    pool = _small_cluster("no-beat", sim=0.5)
    celery_worker_factory("w1")
    # when three one-rack gangs are submitted to two racks (the third fits once one has finished)
    gangs = [workflow_submit(user=user, pool_name=pool.name, spec=gang_spec(f"rack{i}", 4, 4, 0.5))[0]
             for i in range(3)]
    # then all complete: completion is only seen by pod syncs, which only the tick sends
    wait_for(lambda: all_finished(gangs), timeout=60, message="all finished without beat")
    assert set(Workflow.objects.filter(pk__in=[w.pk for w in gangs]).values_list("status", flat=True)) == {"COMPLETED"}
    assert_reservations_match_tasks(pool)


def _tick_at():
    return WorkerHeartbeat.objects.filter(token="scheduler.tick").values_list("at", flat=True).first()


def _tick_holders() -> set[str]:
    """Names of the live workers holding a pending ``workflows.tick`` (a follow-up with a countdown)."""
    from osmo.celery import app

    scheduled = app.control.inspect(timeout=0.5).scheduled() or {}
    return {hostname.split("@", 1)[0] for hostname, entries in scheduled.items()
            if any(entry["request"]["name"] == "workflows.tick" for entry in entries)}


def test_ticks_resume_when_the_worker_holding_the_next_tick_is_killed(user, celery_worker_factory, worker_env):
    """Beat is gone, and the worker holding the pending follow-up tick is SIGKILLed: that message comes
    back only after the broker's visibility timeout (an hour). The other worker's own timer
    (osmo.celery.TickWatchdog) finds the tick overdue and starts the chain again."""
    env = {**worker_env, "OSMO_PLACEMENT_TICK_SECONDS": "3"}
    # given two workers, no beat, and the tick chain running in one of them
    workers = {name: celery_worker_factory(name, env=env) for name in ("w1", "w2")}
    wait_for(_tick_at, timeout=60, message="a first tick")
    killed_at = None
    for attempt in range(3, 9):
        holders = wait_for(_tick_holders, timeout=30, message="a worker holding the next tick")
        holder = sorted(holders)[0]
        # when that worker is killed while the other one holds no tick
        workers.pop(holder).kill()
        if not _tick_holders():
            killed_at = timezone.now()
            break
        # the chain moved to the other worker in between: replace the killed one and try again
        workers[f"w{attempt}"] = celery_worker_factory(f"w{attempt}", env=env)
    assert killed_at is not None, "never caught the follow-up tick in one worker"
    # then ticks run again within a few intervals (a watch every 9 s, overdue after 9 s)
    wait_for(lambda: _tick_at() > killed_at, timeout=40, message="a tick after the kill")
    resumed_at = _tick_at()
    # and keep going as a chain (the next one follows an interval later)
    wait_for(lambda: _tick_at() > resumed_at, timeout=15, message="the chain going on")


def test_concurrent_preemptions_neither_double_book_nor_lose_work(user, celery_worker_factory, celery_beat):
    # given two worker processes and a 32-GPU pool full of LOW gangs that run for a while
    pool = _small_cluster("preempt", 2.0)
    celery_worker_factory("w1", concurrency=2)
    celery_worker_factory("w2", concurrency=2)
    lows = [workflow_submit(user=user, pool_name=pool.name, spec=gang_spec(f"low{i}", 2, 4, 2.0),
                            priority="LOW")[0] for i in range(4)]
    wait_for(lambda: TaskGroup.objects.filter(workflow__in=lows, status__in=["INITIALIZING", "RUNNING"]).count() == 4,
             timeout=30, message="the LOW gangs placed")
    nodes = {n.pk: n.gpu for n in pool.nodes.all()}
    overbooked: list[str] = []
    stop = threading.Event()

    def watch() -> None:  # active reservations per node, sampled while everything moves
        try:
            while not stop.is_set():
                held: dict[int, int] = {}
                for node_id, gpu in Reservation.objects.filter(pool=pool, released_at__isnull=True).values_list(
                        "node_id", "gpu"):
                    held[node_id] = held.get(node_id, 0) + gpu
                overbooked.extend(f"node {k}: {v}" for k, v in held.items() if v > nodes[k])
                time.sleep(0.05)
        finally:
            connection.close()

    watcher = threading.Thread(target=watch)
    watcher.start()
    created: list[Workflow] = []
    lock = threading.Lock()

    def client(names: list[str], priority: str) -> None:
        try:
            for name in names:
                workflow = workflow_submit(user=user, pool_name=pool.name, spec=gang_spec(name, 2, 4, 0.5),
                                           priority=priority)[0]
                with lock:
                    created.append(workflow)
        finally:
            connections.close_all()

    # when HIGH and NORMAL gangs arrive from two clients at once
    threads = [threading.Thread(target=client, args=([f"high{i}" for i in range(3)], "HIGH")),
               threading.Thread(target=client, args=([f"normal{i}" for i in range(3)], "NORMAL"))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        # then every workflow, the preempted LOW ones included, completes
        wait_for(lambda: all_finished(created + lows), timeout=150, message="all workflows to finish")
    finally:
        stop.set()
        watcher.join()
    assert set(Workflow.objects.filter(pk__in=[w.pk for w in created + lows]).values_list("status", flat=True)) == {
        "COMPLETED"}
    # LOW work was preempted, restarted whole and finished; no node was ever held beyond its GPUs
    assert TaskGroup.objects.filter(workflow__in=lows, preemptions__gt=0).exists()
    assert overbooked == []
    assert Reservation.objects.filter(pool=pool, released_at__isnull=True).count() == 0
    assert_never_overcommitted(pool)
    assert_reservations_match_tasks(pool)
