"""When the cluster, not the task, is the cause (docs/kubernetes.md §10): pods the cluster refuses to
schedule, pods it disrupts or evicts, pods that disappear with their node, images that cannot be pulled
and containers that cannot start, replayed at the HTTP boundary (the fake API server answers in the
API's shapes: ``PodScheduled``/``DisruptionTarget`` conditions, node objects with ``Ready`` conditions
and taints, field-selected pod lists, 404 ``Status`` bodies) against the service's real database."""

from __future__ import annotations

import math
import re
from datetime import timedelta

import pytest
from django.utils import timezone

from scheduler.models import Node, Reservation
from tests.dispatch.kube_pool import PODS, placed, pod_item, pod_list
from tests.ops.conftest import METRICS_TOKEN
from tests.ops.test_metrics import scrape, value
from tests.scheduler.test_kubernetes_follow import listing, node, pod
from workflows.models import StatusTransition, Task, TaskGroup
from workflows.scheduling.cycle import placement_cycle_run
from workflows.scheduling.pods import pods_sync

pytestmark = pytest.mark.django_db
REFUSED = ("0/2 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s) didn't match Pod's node "
           "affinity/selector. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.")
NODE_PODS = "/api/v1/pods"


def _stamp(moment) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def refused_pod(name: str, node_name: str, *, since) -> dict:
    """A pod the scheduler will not bind (never scheduled: no nodeName, no container statuses)."""
    item = pod_item(name, "Pending", node=node_name)
    del item["spec"]["nodeName"]
    item["status"]["conditions"] = [{"type": "PodScheduled", "status": "False", "lastProbeTime": None,
                                     "lastTransitionTime": _stamp(since), "reason": "Unschedulable",
                                     "message": REFUSED}]
    return item


def disrupted_pod(name: str, node_name: str, *, now) -> dict:
    """A Running pod of a NotReady node that the taint manager deletes (the kubelet cannot confirm)."""
    item = pod_item(name, "Running", node=node_name)
    item["metadata"]["deletionTimestamp"] = _stamp(now)
    item["metadata"]["deletionGracePeriodSeconds"] = 30
    item["status"]["conditions"] = [
        {"type": "DisruptionTarget", "status": "True", "lastProbeTime": None, "lastTransitionTime": _stamp(now),
         "reason": "DeletionByTaintManager", "message": "Taint manager: deleting due to NoExecute taint"},
        {"type": "Ready", "status": "False", "lastProbeTime": None, "lastTransitionTime": _stamp(now)},
    ]
    return item


def evicted_pod(name: str, node_name: str) -> dict:
    item = pod_item(name, "Failed", node=node_name)
    item["status"].update({"reason": "Evicted", "message": "The node was low on resource: memory. Threshold "
                                                           "quantity: 100Mi, available: 42Mi."})
    item["status"]["containerStatuses"] = [{"name": "task", "image": "busybox", "imageID": "", "ready": False,
                                            "restartCount": 0, "state": {"terminated": {"exitCode": 137,
                                                                                        "reason": "Error"}}}]
    return item


def not_ready(name: str) -> dict:
    return node(name, ready="Unknown", taints=[
        {"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule", "timeAdded": "2026-11-27T00:00:00Z"},
        {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute", "timeAdded": "2026-11-27T00:00:00Z"}])


NOT_FOUND = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "reason": "NotFound",
             "code": 404}


def node_read(kube_api, name: str, item: dict | None, others: list[dict] = ()) -> None:
    """Script the re-read of one node: the node object (None: 404) and, when it exists, the other pods on it."""
    if item is None:
        kube_api.reply("GET", f"/api/v1/nodes/{name}", 404, {**NOT_FOUND, "message": f'nodes "{name}" not found',
                                                              "details": {"name": name, "kind": "nodes"}})
        return
    kube_api.reply("GET", f"/api/v1/nodes/{name}", 200, item)
    kube_api.reply("GET", NODE_PODS, 200, listing("PodList", list(others)))


def dispatched(task, *, ago: int, status: str = "INITIALIZING") -> None:
    at = timezone.now() - timedelta(seconds=ago)
    Task.objects.filter(pk=task.pk).update(dispatched_at=at, status=status)
    TaskGroup.objects.filter(pk=task.group_id).update(status=status)


def history(group_id: int) -> list[tuple[str, str, str]]:
    return list(StatusTransition.objects.filter(group_id=group_id, task__isnull=True).order_by("pk")
                .values_list("from_status", "to_status", "message"))


def test_a_pod_refused_past_the_limit_requeues_its_gang_which_is_placed_on_another_node(
        user, kube_api, kube_pool, django_capture_on_commit_callbacks, settings, client):
    # given a placed one-task gang whose pod the cluster has refused for 61 s (another tenant fills its node)
    settings.OSMO_METRICS_TOKEN = METRICS_TOKEN
    workflow, task = placed(user, kube_pool)
    dispatched(task, ago=90)
    full, other = task.node_name, "n2" if task.node_name == "n1" else "n1"
    now = timezone.now()
    kube_api.reply("GET", PODS, 200, pod_list(refused_pod(task.pod_name, full, since=now - timedelta(seconds=61))))
    node_read(kube_api, full, node(full), [pod("train-b", full, gpu="4")])
    kube_api.reply("DELETE", f"{PODS}/{task.pod_name}", 200, "pod_deleted.json")
    before = value(scrape(client), "osmo_k8s_requeues_total", pool="kube", outcome="requeued")
    # when the pool's pods are read (the Celery task, which also records the metrics)
    from workflows.tasks import pods_sync_task

    with django_capture_on_commit_callbacks(execute=True):
        pods_sync_task(pool_id=kube_pool.pk)
    # then the gang is queued again through RESCHEDULED, counted as a requeue (not a retry), with the cluster's words
    group = TaskGroup.objects.get(pk=task.group_id)
    # (61 s when read at once; a loaded machine may take a second or more to get there)
    waited = int(re.search(r"unschedulable for (\d+) s", group.unschedulable_reason["message"]).group(1))
    assert 61 <= waited <= 61 + math.ceil((timezone.now() - now).total_seconds())
    said = f"task t0: the cluster refused to schedule it: pod {task.pod_name} unschedulable for {waited} s: " \
           f"Unschedulable: {REFUSED} (queued again, 1 of 3)"
    assert (group.status, group.requeues, group.retries, group.preemptions) == ("SCHEDULING", 1, 0, 0)
    assert group.unschedulable_reason == {"status": "waiting", "code": "cluster_refused", "message": said}
    assert history(group.pk)[-2:] == [("INITIALIZING", "RESCHEDULED", said), ("RESCHEDULED", "SCHEDULING",
                                                                              "queued again")]
    # its pod deleted with the preemption grace, its capacity released, the refusing node's usage re-read
    deletes = [(r.path, r.query.get("gracePeriodSeconds")) for r in kube_api.requests if r.method == "DELETE"]
    assert deletes == [(f"{PODS}/{task.pod_name}", ["30"])]
    assert not Reservation.objects.filter(task_id=task.pk).exists()
    assert Node.objects.get(pool=kube_pool, name=full).used_gpu == 4
    reads = [(r.path, r.query.get("fieldSelector")) for r in kube_api.requests if r.method == "GET" and r.path != PODS]
    assert reads == [(f"/api/v1/nodes/{full}", None),
                     (NODE_PODS, [f"spec.nodeName={full},status.phase!=Succeeded,status.phase!=Failed"])]
    assert value(scrape(client), "osmo_k8s_requeues_total", pool="kube", outcome="requeued") - (before or 0) == 1
    # and the next placement puts it on the other node, under a new pod name
    placement_cycle_run(pool_id=kube_pool.pk)
    again = Task.objects.get(pk=task.pk)
    assert (again.status, again.node_name) == ("INITIALIZING", other)
    assert again.pod_name != task.pod_name


def test_a_pod_refused_for_less_than_the_limit_keeps_waiting(user, kube_api, kube_pool):
    # given a pod refused for 59 s (the limit is 60 s)
    _workflow, task = placed(user, kube_pool)
    dispatched(task, ago=90)
    now = timezone.now()
    kube_api.reply("GET", PODS, 200, pod_list(refused_pod(task.pod_name, task.node_name,
                                                          since=now - timedelta(seconds=59))))
    # when
    counts = pods_sync(pool_id=kube_pool.pk, now=now)
    # then nothing moves, and no node was read (only the listing was asked for)
    assert counts["requeued"] == 0
    assert TaskGroup.objects.get(pk=task.group_id).status == "INITIALIZING"
    assert [(r.method, r.path) for r in kube_api.requests] == [("GET", PODS)]


def test_a_slow_image_pull_on_a_scheduled_pod_is_not_unschedulable(user, kube_api, kube_pool):
    # given a pod bound to its node 5 minutes ago, still pulling its image (ErrImagePull, then ContainerCreating)
    _workflow, task = placed(user, kube_pool)
    dispatched(task, ago=300)
    now = timezone.now()
    item = pod_item(task.pod_name, "Pending", node=task.node_name)
    item["status"]["conditions"] = [{"type": "PodScheduled", "status": "True", "lastProbeTime": None,
                                     "lastTransitionTime": _stamp(now - timedelta(seconds=300))}]
    item["status"]["containerStatuses"] = [{"name": "task", "image": "busybox", "imageID": "", "ready": False,
                                            "restartCount": 0, "state": {"waiting": {
                                                "reason": "ErrImagePull", "message": "context deadline exceeded"}}}]
    kube_api.reply("GET", PODS, 200, pod_list(item))
    # when
    counts = pods_sync(pool_id=kube_pool.pk, now=now)
    # then it keeps its place: no requeue, no node read, no delete
    assert (counts["requeued"], counts["failed"]) == (0, 0)
    assert TaskGroup.objects.get(pk=task.group_id).status == "INITIALIZING"
    assert [(r.method, r.path) for r in kube_api.requests] == [("GET", PODS)]


def test_past_the_requeue_limit_the_gang_fails_quoting_the_cluster(user, kube_api, kube_pool, settings,
                                                                   django_capture_on_commit_callbacks):
    # given a gang requeued once already, a limit of one requeue, and its pod refused again for 2 minutes
    settings.OSMO_K8S_UNSCHEDULABLE_REQUEUES = 1
    workflow, task = placed(user, kube_pool)
    dispatched(task, ago=150)
    TaskGroup.objects.filter(pk=task.group_id).update(requeues=1)
    now = timezone.now()
    kube_api.reply("GET", PODS, 200, pod_list(refused_pod(task.pod_name, task.node_name,
                                                          since=now - timedelta(seconds=120))))
    node_read(kube_api, task.node_name, node(task.node_name))
    kube_api.reply("DELETE", f"{PODS}/{task.pod_name}", 200, "pod_deleted.json")
    # when
    with django_capture_on_commit_callbacks(execute=True):
        counts = pods_sync(pool_id=kube_pool.pk, now=now)
    # then the task and its gang fail with FAILED_BACKEND_ERROR, quoting the cluster; the pod is deleted at once
    task.refresh_from_db()
    workflow.refresh_from_db()
    said = (f"task t0: the cluster refused to schedule it 2 times: pod {task.pod_name} unschedulable for 120 s: "
            f"Unschedulable: {REFUSED}")
    assert (task.status, task.failure_message) == ("FAILED_BACKEND_ERROR", said)
    assert (workflow.status, TaskGroup.objects.get(pk=task.group_id).requeues) == ("FAILED_BACKEND_ERROR", 1)
    assert (counts["requeued"], counts["requeue_failed"], counts["failed"]) == (0, 1, 1)
    assert [(r.path, r.query.get("gracePeriodSeconds")) for r in kube_api.requests if r.method == "DELETE"] == [
        (f"{PODS}/{task.pod_name}", None)]
    assert not Reservation.objects.filter(task_id=task.pk, released_at__isnull=True).exists()


def test_a_disrupted_pod_reschedules_its_gang_away_from_its_notready_node(user, kube_api, kube_pool, settings, client,
                                                                          django_capture_on_commit_callbacks):
    # given a running gang whose node went NotReady: the taint manager is deleting its pod (DisruptionTarget)
    settings.OSMO_METRICS_TOKEN = METRICS_TOKEN
    workflow, task = placed(user, kube_pool)
    dispatched(task, ago=600, status="RUNNING")
    lost, other = task.node_name, "n2" if task.node_name == "n1" else "n1"
    now = timezone.now()
    kube_api.reply("GET", PODS, 200, pod_list(disrupted_pod(task.pod_name, lost, now=now)))
    node_read(kube_api, lost, not_ready(lost))
    kube_api.reply("DELETE", f"{PODS}/{task.pod_name}", 200, "pod_deleted.json")
    before = value(scrape(client), "osmo_k8s_reschedules_total", pool="kube", cause="disrupted",
                   outcome="rescheduled")
    # when the pool's pods are read (the Celery task, which also records the metrics)
    from workflows.tasks import pods_sync_task

    with django_capture_on_commit_callbacks(execute=True):
        pods_sync_task(pool_id=kube_pool.pk)
    # then the gang is RESCHEDULED as a retry against the pool's limit, the cluster's words in its history
    group = TaskGroup.objects.get(pk=task.group_id)
    said = (f"task t0: pod {task.pod_name}: disrupted on node {lost}: DeletionByTaintManager: Taint manager: "
            f"deleting due to NoExecute taint: rescheduled (retry 1 of 3)")
    assert (group.status, group.retries, group.requeues) == ("SCHEDULING", 1, 0)
    assert history(group.pk)[-2:] == [("RUNNING", "RESCHEDULED", said), ("RESCHEDULED", "SCHEDULING", "queued again")]
    after = value(scrape(client), "osmo_k8s_reschedules_total", pool="kube", cause="disrupted", outcome="rescheduled")
    assert after - (before or 0) == 1
    # the lost node is unschedulable at once (not at the next periodic sync), so the gang goes to the other one
    assert Node.objects.get(pool=kube_pool, name=lost).schedulable is False
    placement_cycle_run(pool_id=kube_pool.pk)
    assert Task.objects.get(pk=task.pk).node_name == other
    workflow.refresh_from_db()
    assert workflow.status == "RUNNING"


def test_an_evicted_pod_past_the_pools_retry_limit_fails_evicted_and_is_kept(user, kube_api, kube_pool):
    # given a pool that allows no retries, and a running pod the kubelet evicted (memory pressure)
    kube_pool.max_retries = 0
    kube_pool.save(update_fields=["max_retries"])
    workflow, task = placed(user, kube_pool)
    dispatched(task, ago=600, status="RUNNING")
    evicted = evicted_pod(task.pod_name, task.node_name)
    kube_api.reply("GET", PODS, 200, pod_list(evicted))
    node_read(kube_api, task.node_name, node(task.node_name))
    # when
    counts = pods_sync(pool_id=kube_pool.pk)
    # then the task fails FAILED_EVICTED (not FAILED: its exit code 137 is the eviction's), saying the limit
    task.refresh_from_db()
    assert task.status == "FAILED_EVICTED"
    assert task.failure_message == (
        f"task t0: pod {task.pod_name}: Error: Evicted: The node was low on resource: memory. Threshold quantity: "
        "100Mi, available: 42Mi.: not rescheduled, the pool's limit of 0 retries is reached")
    assert TaskGroup.objects.get(pk=task.group_id).status == "FAILED_EVICTED"
    assert counts["lost.evicted.failed"] == 1
    # the failed pod is kept for its logs (its retention), not deleted now
    assert "DELETE" not in [r.method for r in kube_api.requests]


def test_a_pod_gone_with_its_deleted_node_is_rescheduled_and_the_node_cordoned(user, kube_api, kube_pool,
                                                                              django_capture_on_commit_callbacks):
    # given a running task whose pod is no longer listed, and whose node the cluster no longer has (404)
    _workflow, task = placed(user, kube_pool)
    dispatched(task, ago=600, status="RUNNING")
    kube_api.reply("GET", PODS, 200, pod_list())
    node_read(kube_api, task.node_name, None)
    kube_api.reply("DELETE", f"{PODS}/{task.pod_name}", 404, "status_not_found.json")
    # when
    with django_capture_on_commit_callbacks(execute=True):
        counts = pods_sync(pool_id=kube_pool.pk)
    # then the gang is rescheduled, saying so, and the node's row is cordoned
    group = TaskGroup.objects.get(pk=task.group_id)
    assert (group.status, group.retries) == ("SCHEDULING", 1)
    assert history(group.pk)[-2][2] == (f"task t0: pod {task.pod_name} disappeared; its node {task.node_name} was "
                                        "deleted: rescheduled (retry 1 of 3)")
    assert counts["lost.node_lost.rescheduled"] == 1
    assert Node.objects.get(pool=kube_pool, name=task.node_name).schedulable is False


def test_a_pod_missing_while_its_node_is_ready_still_fails_backend_error(user, kube_api, kube_pool):
    # given a running task whose pod is gone while its node is Ready (someone deleted the pod)
    _workflow, task = placed(user, kube_pool)
    dispatched(task, ago=600, status="RUNNING")
    kube_api.reply("GET", PODS, 200, pod_list())
    node_read(kube_api, task.node_name, node(task.node_name))
    # when
    pods_sync(pool_id=kube_pool.pk)
    # then it is not the infrastructure's loss: FAILED_BACKEND_ERROR as before, no retry counted
    task.refresh_from_db()
    assert (task.status, task.failure_message) == ("FAILED_BACKEND_ERROR", "pod disappeared from the backend")
    assert TaskGroup.objects.get(pk=task.group_id).retries == 0


def test_an_unreadable_node_defers_a_missing_pod_to_the_next_sync(user, kube_api, kube_pool):
    # given a missing pod, and the API answering 503 for its node
    _workflow, task = placed(user, kube_pool)
    dispatched(task, ago=600, status="RUNNING")
    kube_api.reply("GET", PODS, 200, pod_list())
    kube_api.reply("GET", f"/api/v1/nodes/{task.node_name}", 503, "status_service_unavailable.json")
    # when
    pods_sync(pool_id=kube_pool.pk)
    # then the task keeps running until its node can be read
    assert Task.objects.get(pk=task.pk).status == "RUNNING"


def test_an_image_that_cannot_be_pulled_fails_image_pull_after_the_pending_timeout(user, kube_api, kube_pool):
    # given a pod bound 601 s ago that cannot pull its image (the pending timeout is 600 s)
    _workflow, task = placed(user, kube_pool)
    dispatched(task, ago=601)
    item = pod_item(task.pod_name, "Pending", node=task.node_name)
    item["status"]["containerStatuses"] = [{"name": "task", "image": "nvcr.io/x:none", "imageID": "", "ready": False,
                                            "restartCount": 0, "state": {"waiting": {
                                                "reason": "ImagePullBackOff",
                                                "message": 'Back-off pulling image "nvcr.io/x:none"'}}}]
    kube_api.reply("GET", PODS, 200, pod_list(item))
    kube_api.reply("DELETE", f"{PODS}/{task.pod_name}", 200, "pod_deleted.json")
    # when
    pods_sync(pool_id=kube_pool.pk)
    # then
    task.refresh_from_db()
    assert task.status == "FAILED_IMAGE_PULL"
    assert task.failure_message.endswith('(reason: ImagePullBackOff: Back-off pulling image "nvcr.io/x:none")')


def test_a_container_that_cannot_start_fails_start_error_whatever_its_exit_actions(user, kube_api, kube_pool):
    # given a pod whose container the runtime could not start (terminated StartError, exit code 128)
    _workflow, task = placed(user, kube_pool)
    dispatched(task, ago=30)
    item = pod_item(task.pod_name, "Failed", node=task.node_name)
    item["status"]["containerStatuses"] = [{"name": "task", "image": "busybox", "imageID": "", "ready": False,
                                            "restartCount": 0, "state": {"terminated": {
                                                "exitCode": 128, "reason": "StartError",
                                                "message": 'exec: "/bin/train": stat /bin/train: no such file'}}}]
    kube_api.reply("GET", PODS, 200, pod_list(item))
    # when
    pods_sync(pool_id=kube_pool.pk)
    # then
    task.refresh_from_db()
    assert (task.status, task.exit_code) == ("FAILED_START_ERROR", 128)
    assert task.failure_message == 'StartError: exec: "/bin/train": stat /bin/train: no such file'


def test_a_lost_pod_whose_gang_member_already_ended_fails_instead_of_rescheduling(user, kube_api, kube_pool):
    # given a running two-task gang whose second task already completed (the lead decides: the gang runs on)
    workflow, lead = placed(user, kube_pool, tasks=2)
    dispatched(lead, ago=600, status="RUNNING")
    member = Task.objects.get(workflow=workflow, name="t1")
    Task.objects.filter(pk=member.pk).update(status="COMPLETED", dispatched_at=timezone.now(),
                                             finished_at=timezone.now())
    # when the lead's pod is evicted
    kube_api.reply("GET", PODS, 200, pod_list(evicted_pod(lead.pod_name, lead.node_name)))
    node_read(kube_api, lead.node_name, node(lead.node_name))
    counts = pods_sync(pool_id=kube_pool.pk)
    # then the gang cannot restart whole: the lead fails FAILED_EVICTED, saying why; nothing is rescheduled
    lead.refresh_from_db()
    assert lead.status == "FAILED_EVICTED"
    assert lead.failure_message.endswith(": not queued again, another task of its gang already ended")
    assert (counts["rescheduled"], TaskGroup.objects.get(pk=lead.group_id).retries) == (0, 0)
    assert TaskGroup.objects.get(pk=lead.group_id).status == "FAILED_EVICTED"
