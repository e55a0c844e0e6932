"""The Kubernetes backend reconciled against the cluster (docs/kubernetes.md): the failure scenarios of
a run against a real kube-apiserver, replayed step by step at the HTTP boundary (the fake API server
answers in the API's own shapes), with the service's real database."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from kubernetes import client as k8s_client

from scheduler.dispatch import DispatchTransientError
from scheduler.dispatch.kubernetes import KubernetesBackend
from scheduler.models import Pool, Reservation
from tests.dispatch.kube_pool import NS, PODS, placed, pod_item, pod_list
from tests.factories import make_node, make_pool
from tests.pipeline.helpers import backend_use, gang_spec
from workflows import jobs
from workflows.models import Task, TaskGroup
from workflows.scheduling import gang_dispatch, pods
from workflows.scheduling.cycle import placement_cycle_run
from workflows.scheduling.pod.request import pod_request
from workflows.scheduling.pods import pods_sync
from workflows.services import workflow_cancel, workflow_submit

pytestmark = pytest.mark.django_db
def test_a_pod_created_but_not_recorded_is_deleted_by_cancel_and_by_the_sync(user, kube_api, kube_pool,
                                                                            django_capture_on_commit_callbacks):
    """Replays the fault run (4 of 4 tries): the worker is killed after create_pod returned and before
    the task's dispatched_at was saved; the workflow is cancelled before the worker comes back. The
    pod stayed Pending with nvidia.com/gpu: 4 on GPUs the service gave to someone else."""
    # given a placed gang whose pod was created, the record never written (the worker died)
    workflow, task = placed(user, kube_pool)
    kube_api.reply("POST", PODS, 201, "pod_created.json")
    pods.backend_for("kubernetes").create_pod(pod_request(task, kube_pool))
    assert Task.objects.get(pk=task.pk).dispatched_at is None
    # when the user cancels: the cancel deletes the pod of every task with a pod name
    kube_api.reply("DELETE", f"{PODS}/{task.pod_name}", 200, "pod_deleted.json")
    with django_capture_on_commit_callbacks(execute=True):
        workflow_cancel(workflow_pk=workflow.pk, user=user)
    # then the pod was deleted and recorded so, and the capacity is free
    assert [(r.method, r.path) for r in kube_api.requests][-1] == ("DELETE", f"{PODS}/{task.pod_name}")
    assert Task.objects.get(pk=task.pk).pod_deleted_at is not None
    assert Reservation.objects.filter(released_at__isnull=True).count() == 0

    # and when the delete had been lost (the same pod still listed, Pending), the next sync deletes it
    Task.objects.filter(pk=task.pk).update(pod_deleted_at=None)
    kube_api.reply("GET", PODS, 200, pod_list(pod_item(task.pod_name, "Pending")))
    kube_api.reply("DELETE", f"{PODS}/{task.pod_name}", 200, "pod_deleted.json")
    counts = pods_sync(pool_id=kube_pool.pk)
    assert counts["deleted"] == 1
    calls = [(r.method, r.path) for r in kube_api.requests][-2:]
    assert calls == [("GET", PODS), ("DELETE", f"{PODS}/{task.pod_name}")]


def test_a_worker_killed_before_recording_a_gangs_pods_is_redispatched_without_a_second_pod(
        user, kube_api, kube_pool, settings, django_capture_on_commit_callbacks):
    """A gang's pods are recorded in one UPDATE after they were all created: a worker killed between
    the creates and that UPDATE leaves pods that exist and are not recorded."""
    # given a placed 2-task gang whose pods were created, the record never written (the worker died)
    settings.OSMO_REDISPATCH_AFTER_SECONDS = 20
    workflow, task = placed(user, kube_pool, tasks=2)
    tasks = list(Task.objects.filter(workflow=workflow).order_by("position"))
    for each in tasks:
        kube_api.reply("POST", PODS, 201, "pod_created.json")
        pods.backend_for("kubernetes").create_pod(pod_request(each, kube_pool))
    assert not Task.objects.filter(workflow=workflow, dispatched_at__isnull=False).exists()
    # when the tick finds the gang stranded past the grace period and its dispatch runs again
    TaskGroup.objects.filter(pk=task.group_id).update(dispatch_requested_at=timezone.now() - timedelta(seconds=60))
    with django_capture_on_commit_callbacks(execute=True):
        redispatch = pods.tick()["redispatch"]
    assert redispatch == [task.group_id]
    for _each in tasks:
        kube_api.reply("POST", PODS, 409, "status_already_exists.json")
    gang_dispatch.gang_dispatch(group_id=task.group_id)
    # then the same two pods were asked for again (AlreadyExists: success), recorded, none deleted
    posts = [r.body["metadata"]["name"] for r in kube_api.requests if r.method == "POST"]
    assert posts == [t.pod_name for t in tasks] * 2
    assert "DELETE" not in [r.method for r in kube_api.requests]
    assert not Task.objects.filter(workflow=workflow, dispatched_at__isnull=True).exists()


def test_a_transient_error_mid_gang_records_the_pods_made_so_the_retry_posts_only_the_rest(user, kube_api,
                                                                                           kube_pool):
    # given a placed 2-task gang; the API server creates the first pod, then answers 500
    workflow, task = placed(user, kube_pool, tasks=2)
    first, second = Task.objects.filter(workflow=workflow).order_by("position")
    kube_api.reply("POST", PODS, 201, "pod_created.json")
    kube_api.reply("POST", PODS, 500, "status_internal_error.json")
    # when the dispatch runs (the error propagates for Celery to retry), then is retried
    with pytest.raises(DispatchTransientError):
        gang_dispatch.gang_dispatch(group_id=task.group_id)
    assert list(Task.objects.filter(workflow=workflow, dispatched_at__isnull=False).values_list("pk", flat=True)) == [
        first.pk]
    kube_api.reply("POST", PODS, 201, "pod_created.json")
    gang_dispatch.gang_dispatch(group_id=task.group_id)
    # then the retry posted only the pod not made yet, and both are recorded
    posts = [r.body["metadata"]["name"] for r in kube_api.requests if r.method == "POST"]
    assert posts == [first.pod_name, second.pod_name, second.pod_name]
    assert not Task.objects.filter(workflow=workflow, dispatched_at__isnull=True).exists()


def test_the_sync_deletes_pods_no_task_has_and_pods_on_the_wrong_node(user, kube_api, kube_pool):
    # given a running task on its node, a pod of the same task on another node, and a stranger's pod
    workflow, task = placed(user, kube_pool)
    Task.objects.filter(pk=task.pk).update(dispatched_at=timezone.now(), status="RUNNING")
    TaskGroup.objects.filter(workflow=workflow).update(status="RUNNING")
    wrong = "n2" if task.node.name == "n1" else "n1"
    kube_api.reply("GET", PODS, 200, pod_list(pod_item(task.pod_name, "Running", node=wrong),
                                              pod_item("someone-elses-7", "Running")))
    kube_api.reply("DELETE", f"{PODS}/{task.pod_name}", 200, "pod_deleted.json")
    kube_api.reply("DELETE", f"{PODS}/someone-elses-7", 404, "status_not_found.json")
    # when
    deleted = pods.pods_reconcile(kube_pool, now=timezone.now())
    # then both are deleted (a 404 is success), in one list call
    assert deleted == 2
    assert [r.method for r in kube_api.requests].count("GET") == 1


def test_finished_pods_are_kept_for_their_retention_then_deleted(user, kube_api, kube_pool, settings):
    # given retention of 60 s for succeeded and 600 s for failed pods, and two tasks that ended 120 s ago
    settings.OSMO_POD_RETENTION_SUCCEEDED_SECONDS = 60
    settings.OSMO_POD_RETENTION_FAILED_SECONDS = 600
    _w1, ok = placed(user, kube_pool, "ok")
    _w2, bad = placed(user, kube_pool, "bad")
    ended = timezone.now() - timedelta(seconds=120)
    Task.objects.filter(pk=ok.pk).update(status="COMPLETED", finished_at=ended)
    Task.objects.filter(pk=bad.pk).update(status="FAILED", finished_at=ended)
    listing = pod_list(pod_item(ok.pod_name, "Succeeded"), pod_item(bad.pod_name, "Failed"))
    # when the sync reconciles now, and again 10 minutes later
    kube_api.reply("GET", PODS, 200, listing)
    kube_api.reply("DELETE", f"{PODS}/{ok.pod_name}", 200, "pod_deleted.json")
    now_deleted = pods.pods_reconcile(kube_pool, now=timezone.now())
    kube_api.reply("GET", PODS, 200, pod_list(pod_item(bad.pod_name, "Failed")))
    kube_api.reply("DELETE", f"{PODS}/{bad.pod_name}", 200, "pod_deleted.json")
    later_deleted = pods.pods_reconcile(kube_pool, now=timezone.now() + timedelta(seconds=600))
    # then the succeeded pod goes after 60 s, the failed one is kept for 600 s (for its logs)
    assert (now_deleted, later_deleted) == (1, 1)
    deletes = [r.path.rsplit("/", 1)[1] for r in kube_api.requests if r.method == "DELETE"]
    assert deletes == [ok.pod_name, bad.pod_name]


def test_a_pod_that_failed_by_itself_is_not_deleted_when_its_task_fails(user, kube_api, kube_pool):
    """The fault run saw a Failed pod (an OOMKill) deleted within seconds: nothing left to debug."""
    # given a dispatched task whose pod failed by itself
    workflow, task = placed(user, kube_pool)
    Task.objects.filter(pk=task.pk).update(dispatched_at=timezone.now())
    failed = pod_item(task.pod_name, "Failed")
    failed["status"]["containerStatuses"] = [{
        "name": "task", "image": "busybox", "imageID": "", "ready": False, "restartCount": 0,
        "state": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}},
    }]
    kube_api.reply("GET", PODS, 200, pod_list(failed))  # the reconcile: kept (retention)
    kube_api.reply("GET", PODS, 200, pod_list(failed))  # the phases
    # when
    pods_sync(pool_id=kube_pool.pk)
    # then the task failed with the reason, and no DELETE was sent
    task.refresh_from_db()
    assert (task.status, task.failure_message) == ("FAILED", "OOMKilled")
    assert "DELETE" not in [r.method for r in kube_api.requests]


def test_a_permanent_dispatch_failure_is_logged_with_workflow_task_pod_and_reason(user, kube_api, kube_pool,
                                                                                  caplog):
    """The fault run found the workflow's message the only trace of a permanent dispatch failure."""
    # given the API refuses the manifest
    workflow, task = placed(user, kube_pool)
    kube_api.reply("POST", PODS, 422, "status_invalid.json")
    # when
    with caplog.at_level("WARNING"):
        gang_dispatch.gang_dispatch(group_id=task.group_id)
    # then the gang failed, and the log says which workflow, task and pod, and the API's reason
    record = next(r for r in caplog.records if r.getMessage() == "dispatch.failed")
    assert record.levelname == "ERROR"
    assert (record.workflow, record.task, record.pod, record.pool) == (workflow.workflow_id, "t0", task.pod_name,
                                                                       "kube")
    assert "HTTP 422" in record.reason and "a valid environment variable name" in record.reason
    assert TaskGroup.objects.get(pk=task.group_id).status == "FAILED_BACKEND_ERROR"
    assert any(r.getMessage() == "group.backend_failed" for r in caplog.records)


def test_a_preempted_gangs_pods_are_deleted_by_name_with_the_grace_period(user, kube_api, kube_pool, monkeypatch,
                                                                           django_capture_on_commit_callbacks):
    # given a LOW gang holding both nodes, its pods created
    monkeypatch.setattr(jobs, "_send", lambda name, countdown=None, **kwargs: (
        pods.pods_evict(**kwargs) if name == jobs.PODS_EVICT else None))
    low, _ = workflow_submit(user=user, pool_name=kube_pool.name, spec=gang_spec("low", 2, 4, key=None),
                             priority="LOW")
    placement_cycle_run(pool_id=kube_pool.pk)
    old = sorted(Task.objects.filter(workflow=low).values_list("pod_name", flat=True))
    assert all(old)
    # when a HIGH gang of one task arrives and the cycle evicts the LOW gang (whole)
    for name in old:
        kube_api.reply("DELETE", f"{PODS}/{name}", 200, "pod_deleted.json")
    high, _ = workflow_submit(user=user, pool_name=kube_pool.name, spec=gang_spec("high", 1, 4, key=None),
                              priority="HIGH")
    with django_capture_on_commit_callbacks(execute=True):
        placement_cycle_run(pool_id=kube_pool.pk)
    # then each old pod is deleted by its name with gracePeriodSeconds=30, and the gang waits again
    deletes = [(r.path.rsplit("/", 1)[1], r.query.get("gracePeriodSeconds")) for r in kube_api.requests
               if r.method == "DELETE"]
    assert sorted(deletes) == [(name, ["30"]) for name in old]
    assert TaskGroup.objects.get(workflow=low).status == "SCHEDULING"
    assert TaskGroup.objects.get(workflow=high).status == "INITIALIZING"
    # and a pod the delete missed would be reconciled away: no task has its name any more
    assert not Task.objects.filter(pod_name__in=old).exists()


def test_a_finished_72_pod_gang_past_retention_costs_one_delete_collection_call(user, kube_api, kube_pool,
                                                                               settings):
    # given a gang of 72 one-GPU tasks that completed two hours ago (retention: one hour)
    settings.OSMO_POD_RETENTION_SUCCEEDED_SECONDS = 3600
    for index in range(3, 19):
        make_node(kube_pool, f"n{index}", {"rack": "r1"}, gpu=4)
    workflow, _ = workflow_submit(user=user, pool_name=kube_pool.name, spec=gang_spec("big", 72, 1, key=None))
    placement_cycle_run(pool_id=kube_pool.pk)
    tasks = list(Task.objects.filter(workflow=workflow))
    assert len(tasks) == 72 and all(t.node_id for t in tasks)
    Task.objects.filter(workflow=workflow).update(status="COMPLETED", finished_at=timezone.now() - timedelta(hours=2))
    kube_api.reply("GET", PODS, 200, pod_list(*(pod_item(t.pod_name, "Succeeded", node=t.node.name) for t in tasks)))
    kube_api.reply("DELETE", PODS, 200, {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": []})
    # when
    deleted = pods.pods_reconcile(kube_pool, now=timezone.now())
    # then one list and one DELETE of the collection, selected by the gang's labels and finished pods only
    assert deleted == 72
    assert [(r.method, r.path) for r in kube_api.requests] == [("GET", PODS), ("DELETE", PODS)]
    delete = kube_api.requests[1]
    assert delete.query["labelSelector"] == [
        f"app.kubernetes.io/managed-by=osmo,osmo.nvidia.com/pool=kube,osmo.nvidia.com/workflow={workflow.global_id},"
        "osmo.nvidia.com/group=g"]
    assert delete.query["fieldSelector"] == ["status.phase!=Pending,status.phase!=Running,status.phase!=Unknown"]
    assert Task.objects.filter(workflow=workflow, pod_deleted_at__isnull=True).count() == 0


def test_a_gang_with_a_pod_still_kept_is_deleted_pod_by_pod(user, kube_api, kube_pool, settings):
    # given a two-task gang: one pod succeeded (due), one failed (kept longer, for its logs)
    settings.OSMO_POD_RETENTION_SUCCEEDED_SECONDS = 60
    settings.OSMO_POD_RETENTION_FAILED_SECONDS = 86400
    workflow, _ = workflow_submit(user=user, pool_name=kube_pool.name, spec=gang_spec("pair", 2, 4, key=None))
    placement_cycle_run(pool_id=kube_pool.pk)
    ok, bad = Task.objects.filter(workflow=workflow).order_by("position")
    ended = timezone.now() - timedelta(seconds=120)
    Task.objects.filter(pk=ok.pk).update(status="COMPLETED", finished_at=ended)
    Task.objects.filter(pk=bad.pk).update(status="FAILED", finished_at=ended)
    kube_api.reply("GET", PODS, 200, pod_list(pod_item(ok.pod_name, "Succeeded"), pod_item(bad.pod_name, "Failed")))
    kube_api.reply("DELETE", f"{PODS}/{ok.pod_name}", 200, "pod_deleted.json")
    # when / then: only the due pod goes, by name
    assert pods.pods_reconcile(kube_pool, now=timezone.now()) == 1
    assert [(r.method, r.path) for r in kube_api.requests][-1] == ("DELETE", f"{PODS}/{ok.pod_name}")


def test_an_api_server_outage_logs_one_warning_per_failed_sync_and_no_traceback(kube_pool, monkeypatch, caplog):
    """The sync used to log an ERROR with a traceback every few seconds while the API server was down,
    and then retried itself on top of the tick's syncs."""
    from django.core.cache import cache

    from tests.dispatch.test_kubernetes_api import closed_port
    from workflows.tasks import PODS_SYNC_ERROR_AFTER, pods_sync_task

    cache.delete(f"pods-sync-failures:{kube_pool.pk}")
    # given an API server that refuses connections
    configuration = k8s_client.Configuration()
    configuration.host = f"http://127.0.0.1:{closed_port()}"
    configuration.retries = 0
    down = KubernetesBackend(k8s_client.ApiClient(configuration), request_timeout=(1.0, 1.0))
    backend_use(monkeypatch, down)
    # when the tick's syncs run one after another (eagerly: a retry of its own would run inline too)
    with caplog.at_level("INFO"):
        for _ in range(PODS_SYNC_ERROR_AFTER + 1):
            pods_sync_task.apply(kwargs={"pool_id": kube_pool.pk})
        monkeypatch.setattr(pods, "pods_sync", lambda pool_id: None)  # the API server is back
        pods_sync_task.apply(kwargs={"pool_id": kube_pool.pk})
    # then one record per sync: WARNINGs counting the failures in a row, the one ERROR at the
    # PODS_SYNC_ERROR_AFTER-th, no traceback anywhere, and an INFO when a sync succeeds again
    ours = [r for r in caplog.records if r.getMessage().startswith("pods_sync.")]
    assert [(r.levelname, getattr(r, "attempt", None)) for r in ours] == [
        *(("WARNING", n) for n in range(1, PODS_SYNC_ERROR_AFTER)), ("ERROR", PODS_SYNC_ERROR_AFTER),
        ("WARNING", PODS_SYNC_ERROR_AFTER + 1), ("INFO", None)]
    assert all("list pods in osmo-jobs" in r.reason and r.pool_id == kube_pool.pk for r in ours[:-1])
    assert ours[-1].failed_syncs == PODS_SYNC_ERROR_AFTER + 1
    assert not [r for r in caplog.records if r.exc_info or r.exc_text]
    assert [r.getMessage() for r in caplog.records if r.levelname == "ERROR"] == ["pods_sync.backend_unreachable"]


def test_one_sync_with_5000_pods_makes_a_constant_number_of_paginated_list_calls(user, kube_api, kube_pool):
    # given 5,000 running tasks of the pool, each with its pod in the namespace
    workflow, _ = workflow_submit(user=user, pool_name=kube_pool.name, spec=gang_spec("wide", 1, 4, key=None))
    group = TaskGroup.objects.get(workflow=workflow)
    TaskGroup.objects.filter(pk=group.pk).update(status="RUNNING")
    Task.objects.filter(workflow=workflow).delete()
    now = timezone.now()
    Task.objects.bulk_create([Task(workflow=workflow, group=group, name=f"t{i}", position=i, image="busybox",
                                   status="RUNNING", pod_name=f"wide-1-t{i:05d}", dispatched_at=now)
                              for i in range(5000)])
    names = [f"wide-1-t{i:05d}" for i in range(5000)]
    pages = [names[start:start + 500] for start in range(0, 5000, 500)]

    def script_listing() -> None:
        for index, page in enumerate(pages):
            body = pod_list(*(pod_item(name, "Running") for name in page))
            if index < len(pages) - 1:
                body["metadata"]["continue"] = f"token-{index + 1}"
            kube_api.reply("GET", PODS, 200, body)

    script_listing()  # one listing serves both the reconcile and the phases
    # when one sync runs
    counts = pods_sync(pool_id=kube_pool.pk, now=now)
    # then one paginated listing of 10 pages (500 per page), never a call per pod
    assert counts == {"running": 0, "completed": 0, "failed": 0, "requeued": 0, "rescheduled": 0, "deleted": 0}
    assert {(r.method, r.path) for r in kube_api.requests} == {("GET", PODS)}
    assert len(kube_api.requests) == 10
    assert [r.query.get("continue") for r in kube_api.requests[:10]] == [None, *([f"token-{i}"] for i in range(1, 10))]
    assert {r.query["limit"][0] for r in kube_api.requests} == {"500"}
    assert not kube_api.pending()


def test_a_pod_already_terminating_is_not_deleted_again(user, kube_api, kube_pool):
    """A pod being deleted still lists as Running until its grace period ends: deleting it again on
    every sync cost a DELETE per pod every 2 s (and could cut a preemption's grace period short)."""
    # given an orphan pod that Kubernetes is already terminating, and one that it is not
    terminating = pod_item("evicted-1", "Running")
    terminating["metadata"]["deletionTimestamp"] = "2026-11-23T10:00:00Z"
    kube_api.reply("GET", PODS, 200, pod_list(terminating, pod_item("stray-2", "Running")))
    kube_api.reply("DELETE", f"{PODS}/stray-2", 200, "pod_deleted.json")
    # when the sync reconciles
    deleted = pods.pods_reconcile(kube_pool, now=timezone.now())
    # then only the other one is deleted
    assert deleted == 1
    assert [r.path.rsplit("/", 1)[1] for r in kube_api.requests if r.method == "DELETE"] == ["stray-2"]


def test_a_refused_delete_does_not_stop_the_pools_status_sync(user, kube_api, kube_pool, caplog):
    """One pod the API server refuses to delete (422, or a 403 from an older Role) must not fail the
    whole sync: the other pods are still deleted and task status is still read back."""
    # given two stray pods; the API server refuses to delete the first
    kube_api.reply("GET", PODS, 200, pod_list(pod_item("stray-1", "Running"), pod_item("stray-2", "Running")))
    kube_api.reply("DELETE", f"{PODS}/stray-1", 422, "status_invalid.json")
    kube_api.reply("DELETE", f"{PODS}/stray-2", 200, "pod_deleted.json")
    # when the sync reconciles
    deleted = pods.pods_reconcile(kube_pool, now=timezone.now())
    # then the second is deleted and the refusal is logged
    assert deleted == 1
    assert any(r.getMessage() == "pod.reconcile_failed" for r in caplog.records)


def test_a_pools_own_grace_period_deletes_its_preempted_pods_while_a_pool_on_the_default_uses_the_setting(
        user, kube_api, kube_pool, django_capture_on_commit_callbacks):
    # given the pool above with a grace period of its own (5 s), and a second Kubernetes pool beside it
    # that sets none (the deployment's OSMO_PREEMPTION_GRACE_SECONDS, 30)
    Pool.objects.filter(pk=kube_pool.pk).update(preemption_grace=5)
    other = make_pool("kube-default", keys=[("rack", "rack")], backend="kubernetes", k8s_namespace=NS)
    for name in ("m1", "m2"):
        make_node(other, name, {"rack": "r1"}, gpu=4)
    deletes = {}
    for pool in (kube_pool, other):
        # a LOW gang holding both nodes, then a HIGH gang of one task that evicts it
        low, _ = workflow_submit(user=user, pool_name=pool.name, spec=gang_spec(f"{pool.name}-low", 2, 4, key=None),
                                 priority="LOW")
        placement_cycle_run(pool_id=pool.pk)
        old = sorted(Task.objects.filter(workflow=low).values_list("pod_name", flat=True))
        for name in old:
            kube_api.reply("DELETE", f"{PODS}/{name}", 200, "pod_deleted.json")
        workflow_submit(user=user, pool_name=pool.name, spec=gang_spec(f"{pool.name}-high", 1, 4, key=None),
                        priority="HIGH")
        with django_capture_on_commit_callbacks(execute=True):
            placement_cycle_run(pool_id=pool.pk)
        deletes[pool.name] = sorted((r.path.rsplit("/", 1)[1], r.query.get("gracePeriodSeconds"))
                                    for r in kube_api.requests if r.method == "DELETE"
                                    and r.path.rsplit("/", 1)[1] in old)
        assert [name for name, _ in deletes[pool.name]] == old
    # then each pool's evicted pods were deleted with its own grace period
    assert {tuple(grace) for _, grace in deletes["kube"]} == {("5",)}
    assert {tuple(grace) for _, grace in deletes["kube-default"]} == {("30",)}
