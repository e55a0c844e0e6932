"""Prometheus metrics at /metrics (docs/design.md §10): state from the database at scrape time, events
observed in the worker processes and summed from prometheus_client's multiprocess files."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from django.test import Client, override_settings
from prometheus_client.parser import text_string_to_metric_families

from osmo.metrics import DISPATCH_ERRORS, SUBMIT_TO_DISPATCHED_SECONDS, cycle_observe, cycle_result_observe
from scheduler.heartbeats import heartbeat_record
from tests.conftest import wait_for
from tests.dispatch.fake_kube import FakeKubeApi
from tests.factories import make_api_key, make_node, make_pool
from tests.ops.conftest import METRICS_AUTH
from tests.pipeline.helpers import gang_spec
from workflows.models import TaskGroup, Workflow
from workflows.scheduling.cycle import CycleResult, placement_cycle_run
from workflows.services import workflow_submit

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("metrics_token")]


def scrape(client) -> dict[tuple[str, frozenset], float]:
    """Every sample of /metrics by (name, labels)."""
    response = client.get("/metrics", HTTP_AUTHORIZATION=METRICS_AUTH)
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=")
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(response.content.decode())
        for sample in family.samples
    }


def value(samples: dict, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def submit(user, pool: str, name: str, tasks: int = 1, gpu: int = 2, **kwargs) -> Workflow:
    return workflow_submit(user=user, pool_name=pool, spec=gang_spec(name, tasks, gpu, key=None), **kwargs)[0]


def test_state_gauges_are_read_from_the_database(client, user):
    # given pool gauges: a1 (4 GPUs, 1 used outside), a2 (4, cordoned), a3 (8); one gang placed (2 GPUs)
    pool = make_pool("gauges", keys=[("rack", "rack")])
    make_node(pool, "a1", {"rack": "r1"}, gpu=4, used_gpu=1)
    make_node(pool, "a2", {"rack": "r1"}, gpu=4, schedulable=False)
    make_node(pool, "a3", {"rack": "r1"}, gpu=8)
    submit(user, "gauges", "placed")
    assert len(placement_cycle_run(pool_id=pool.pk).placed) == 1
    # and three gangs queued: one HIGH, two NORMAL
    submit(user, "gauges", "high", priority="HIGH")
    submit(user, "gauges", "normal1")
    submit(user, "gauges", "normal2")
    # when
    samples = scrape(client)
    # then
    assert value(samples, "osmo_database_up") == 1
    assert [value(samples, "osmo_queue_gangs", pool="gauges", priority=p) for p in ("HIGH", "NORMAL", "LOW")] == [
        1, 2, 0]
    assert {s: value(samples, "osmo_tasks", pool="gauges", status=s)
            for s in ("WAITING", "SCHEDULING", "INITIALIZING", "RUNNING")} == {
        "WAITING": 0, "SCHEDULING": 3, "INITIALIZING": 1, "RUNNING": 0}
    assert {s: value(samples, "osmo_pool_gpus", pool="gauges", state=s)
            for s in ("capacity", "used", "reserved", "free")} == {
        "capacity": 16, "used": 3, "reserved": 2, "free": 9}


def test_heartbeat_ages_are_gauges(client):
    # given a tick and a cycle of pool beats
    pool = make_pool("beats", keys=[("rack", "rack")])
    heartbeat_record("tick")
    heartbeat_record("placement_cycle", pool_id=pool.pk)
    # when
    samples = scrape(client)
    # then
    assert 0 <= value(samples, "osmo_scheduler_tick_age_seconds") < 5
    assert 0 <= value(samples, "osmo_placement_cycle_age_seconds", pool="beats") < 5


def test_cycle_observations_are_summed_into_the_scrape(client):
    # given one cycle recorded by this process through the multiprocess files
    cycle_observe(pool="observed", seconds=0.3, placed=2, unschedulable=1, undecided=1)
    # when
    samples = scrape(client)
    # then
    assert value(samples, "osmo_placement_cycle_duration_seconds_count", pool="observed") == 1
    assert value(samples, "osmo_placement_cycle_duration_seconds_sum", pool="observed") == pytest.approx(0.3)
    assert value(samples, "osmo_placement_cycle_duration_seconds_bucket", pool="observed", le="0.25") == 0
    assert value(samples, "osmo_placement_cycle_duration_seconds_bucket", pool="observed", le="0.5") == 1
    assert {o: value(samples, "osmo_placement_gangs_total", pool="observed", outcome=o)
            for o in ("placed", "unschedulable", "undecided", "waiting")} == {
        "placed": 2, "unschedulable": 1, "undecided": 1, "waiting": None}


def test_a_cycle_result_is_split_by_the_reason_each_gang_stored(client, user):
    # given a pool with three queued gangs whose last verdicts were unschedulable, undecided and waiting
    pool = make_pool("verdicts", keys=[("rack", "rack")])
    make_node(pool, "a1", {"rack": "r1"}, gpu=4)
    groups = []
    for name, status in (("u", "unschedulable"), ("d", "undecided"), ("w", "waiting")):
        workflow = submit(user, "verdicts", name)
        group = TaskGroup.objects.get(workflow=workflow)
        group.unschedulable_reason = {"status": status, "message": status}
        group.save(update_fields=["unschedulable_reason"])
        groups.append(group.pk)
    result = CycleResult(pool="verdicts", placed=[-1], unschedulable=groups, timed_out=[-2])
    # when
    cycle_result_observe(result, seconds=0.01)
    # then
    samples = scrape(client)
    assert {o: value(samples, "osmo_placement_gangs_total", pool="verdicts", outcome=o) for o in
            ("placed", "unschedulable", "undecided", "waiting", "queue_timeout")} == dict.fromkeys(
        ("placed", "unschedulable", "undecided", "waiting", "queue_timeout"), 1)


NOT_AUTHENTICATED = {"code": "not_authenticated", "message": "The metrics bearer token or a staff user is required.",
                     "details": {}}


def test_metrics_need_the_token_or_a_staff_user(client, user, staff_user):
    """Replays the attack run's finding: anonymous /metrics named every pool with its queue and GPU use."""
    # given the metrics token set, a user's and a staff user's API tokens, and a staff session
    user_token = make_api_key(user)
    staff_token = make_api_key(staff_user)
    staff_session = Client()
    staff_session.force_login(staff_user)
    user_session = Client()
    user_session.force_login(user)
    with override_settings(OSMO_METRICS_TOKEN="s3cret"):
        # when
        anonymous = client.get("/metrics")
        wrong = client.get("/metrics", HTTP_AUTHORIZATION="Bearer nope")
        as_user = client.get("/metrics", HTTP_AUTHORIZATION=f"Token {user_token}")
        user_page = user_session.get("/metrics")
        right = client.get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret")
        as_staff = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {staff_token}")
        staff_page = staff_session.get("/metrics")
    # then only the token and staff get the scrape
    assert [r.status_code for r in (anonymous, wrong, as_user, user_page)] == [401] * 4
    assert [r.status_code for r in (right, as_staff, staff_page)] == [200] * 3
    assert anonymous.json() == NOT_AUTHENTICATED
    assert anonymous["WWW-Authenticate"] == "Bearer"
    assert "osmo_queue_gangs" in right.content.decode()


def test_metrics_without_a_token_configured_answer_staff_only(client):
    # given no metrics token configured
    with override_settings(OSMO_METRICS_TOKEN=""):
        # when an anonymous scraper, and one sending an empty bearer, ask
        anonymous = client.get("/metrics")
        empty = client.get("/metrics", HTTP_AUTHORIZATION="Bearer ")
    # then neither gets the scrape
    assert (anonymous.status_code, empty.status_code) == (401, 401)


@pytest.mark.django_db(transaction=True)
def test_a_real_worker_reports_its_cycle_and_the_dispatch_latency(client, user, celery_worker_factory):
    # given pool metrics-live and a real worker process sharing the metrics directory
    pool = make_pool("metrics-live", keys=[("rack", "rack")])
    make_node(pool, "a1", {"rack": "r1"}, gpu=4)
    celery_worker_factory("metrics")
    # when a gang is submitted (the placement request goes through Redis to the worker)
    workflow = submit(user, "metrics-live", "latency", tasks=2)
    wait_for(lambda: Workflow.objects.get(pk=workflow.pk).tasks.filter(dispatched_at__isnull=True).count() == 0,
             timeout=60, message="pods dispatched")

    # then the scrape shows the worker's cycle, the placed gang and its submit->dispatched latency
    def observed():
        samples = scrape(client)
        return samples if value(samples, "osmo_submit_to_dispatched_seconds_count", pool="metrics-live") else None

    samples = wait_for(observed, timeout=30, message="latency observed")
    assert value(samples, "osmo_submit_to_dispatched_seconds_count", pool="metrics-live") == 1
    group = TaskGroup.objects.get(workflow=workflow)
    last = max(group.tasks.values_list("dispatched_at", flat=True))
    expected = (last - group.scheduling_since).total_seconds()
    assert value(samples, "osmo_submit_to_dispatched_seconds_sum", pool="metrics-live") == pytest.approx(expected)
    assert value(samples, "osmo_placement_gangs_total", pool="metrics-live", outcome="placed") == 1
    assert value(samples, "osmo_placement_cycle_duration_seconds_count", pool="metrics-live") >= 1


KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{{name: fake, cluster: {{server: "{url}"}}}}]
users: [{{name: fake, user: {{token: fake-token}}}}]
contexts: [{{name: fake, context: {{cluster: fake, user: fake}}}}]
current-context: fake
"""


@pytest.mark.django_db(transaction=True)
def test_dispatch_errors_are_counted_by_kind(client, user, celery_worker_factory, worker_env, tmp_path):
    # given a Kubernetes pool whose API server answers pod creation with 500, then 403
    api = FakeKubeApi().start()
    pods = "/api/v1/namespaces/osmo-jobs/pods"
    api.reply("POST", pods, 500, "status_internal_error.json")
    api.reply("POST", pods, 403, "status_forbidden.json")
    (tmp_path / "kubeconfig").write_text(KUBECONFIG.format(url=api.url))
    pool = make_pool("metrics-kube", keys=[("rack", "rack")], backend="kubernetes", k8s_namespace="osmo-jobs")
    make_node(pool, "a1", {"rack": "r1"}, gpu=4)
    before = scrape(client)
    # (a 403 is permanent at once here: no in-call retries of the API server's start-up window)
    celery_worker_factory("kube", env={**worker_env, "KUBECONFIG": str(tmp_path / "kubeconfig"),
                                       "OSMO_K8S_AUTH_RETRIES": "0"})
    try:
        # when a gang is submitted: its first dispatch (the cycle's batch) hits the 500, the gang goes on
        # in its own group_dispatch message, which hits the 403
        workflow = submit(user, "metrics-kube", "refused")
        wait_for(lambda: Workflow.objects.get(pk=workflow.pk).status == "FAILED_BACKEND_ERROR", timeout=60,
                 message="gang failed by the backend")
    finally:
        api.stop()

    # then one retry (of the batch) and one permanent error (of the gang's own task) are counted
    def delta(kind: str, task: str = "workflows.group_dispatch") -> float:
        labels = {"task": task, "kind": kind}
        return (value(scrape(client), "osmo_dispatch_errors_total", **labels) or 0) - (
            value(before, "osmo_dispatch_errors_total", **labels) or 0)

    wait_for(lambda: delta("permanent") == 1, timeout=10, message="permanent error counted")
    batch = "workflows.groups_dispatch"
    assert (delta("retry", batch), delta("permanent", batch), delta("failed", batch)) == (1, 0, 0)
    assert (delta("retry"), delta("permanent"), delta("failed")) == (0, 1, 0)
    # (the pod list of the sync and the failure path's delete of the named pod may come too)
    assert [request.method for request in api.requests if request.method == "POST"] == ["POST", "POST"]


def test_the_grafana_dashboard_queries_only_exposed_metrics(client):
    # given one sample of every metric (a pool, heartbeats, a cycle, a dispatch, a dispatch error)
    pool = make_pool("dashboard", keys=[("rack", "rack")])
    heartbeat_record("tick")
    heartbeat_record("placement_cycle", pool_id=pool.pk)
    cycle_observe(pool="dashboard", seconds=0.1, placed=1)
    SUBMIT_TO_DISPATCHED_SECONDS.labels(pool="dashboard").observe(0.2)
    DISPATCH_ERRORS.labels(task="workflows.pod_delete", kind="failed").inc()
    exposed = {name for name, _labels in scrape(client)}
    # when the dashboard's queries are read
    dashboard = json.loads((Path(__file__).resolve().parents[2] / "docs" / "grafana-osmo.json").read_text())
    queried = {name for panel in dashboard["panels"] for target in panel["targets"]
               for name in re.findall(r"\bosmo_[a-z_]+", target["expr"])}
    # then every one of them is exposed
    assert len(queried) == 10
    assert queried - exposed == set()


def test_worker_task_cpu_is_counted_per_task_name(client):
    # given a task run that burns 20 ms of its thread's CPU between Celery's prerun and postrun signals
    from celery.signals import task_postrun, task_prerun

    class Sender:
        name = "scheduler.cpu_metric_test"

    before = scrape(client)
    task_prerun.send(sender=Sender, task_id="cpu-1", task=Sender, args=(), kwargs={})
    until = time.thread_time() + 0.02
    while time.thread_time() < until:
        pass
    task_postrun.send(sender=Sender, task_id="cpu-1", task=Sender, args=(), kwargs={}, retval=None, state="SUCCESS")
    # when scraped
    after = scrape(client)

    # then one run and at least that CPU are counted under its name
    def delta(name: str) -> float:
        return (value(after, name, task=Sender.name) or 0) - (value(before, name, task=Sender.name) or 0)

    assert delta("osmo_worker_tasks_total") == 1
    assert delta("osmo_worker_task_cpu_seconds_total") >= 0.02
