"""KubernetesBackend at the HTTP boundary: the official client talks to a fake API server over real HTTP.

The server answers recorded API bodies (tests/fixtures/k8s_pods) and records each request, so these
tests pin down the exact calls (method, path, query, body) and how answers map to results and to
transient/permanent dispatch errors. No kubelet, no cluster, nothing in the client is mocked.
"""

from __future__ import annotations

import socket
from datetime import UTC, datetime, timedelta

import pytest
import yaml
from kubernetes import client as k8s_client

from scheduler.dispatch import backend_for
from scheduler.dispatch.base import (
    LOG_READ_MAX_BYTES,
    DispatchPermanentError,
    DispatchTransientError,
    PodState,
)
from scheduler.dispatch.kubernetes import KubernetesBackend
from scheduler.dispatch.pod.manifest import build_manifest
from scheduler.dispatch.pod.naming import label_value
from scheduler.dispatch.pod.request import PodRequest
from tests.dispatch.fake_kube import FIXTURES
from tests.dispatch.fake_kube import fixture as load_fixture

NS = "osmo-jobs"
PODS = f"/api/v1/namespaces/{NS}/pods"
SELECTOR = "app.kubernetes.io/managed-by=osmo,osmo.nvidia.com/pool=nvl72"
TOKEN = ("eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6NDgyMTMsInN0YXJ0IjoidHJhaW4tMS10cmFpbmVycy13b3JrZXItMlx1MDAwMCJ9")
CREATED = datetime(2025, 6, 1, 12, 0, 0, tzinfo=UTC)  # creationTimestamp of the recorded pods
DISPATCHED = CREATED + timedelta(seconds=1)


def worker(i: int, **overrides) -> PodRequest:
    """The request behind recorded pod ``train-1-trainers-worker-<i>``."""
    values = dict(pod_name=f"train-1-trainers-worker-{i}", namespace=NS, node_name=f"node-{i + 1:04d}",
                  workflow_id="train-1", group="trainers", task=f"worker-{i}", pool="nvl72",
                  image="nvcr.io/nvidia/pytorch:24.05-py3", command=("torchrun",),
                  args=("--nproc-per-node=4", "train.py"),
                  environment={"NCCL_DEBUG": "INFO", "OSMO_TASK": f"worker-{i}"}, gpu=4, cpu_millis=16000,
                  memory_bytes=64 * 2**30, storage_bytes=100 * 2**30, dispatched_at=DISPATCHED)
    values.update(overrides)
    return PodRequest(**values)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# ------------------------------------------------------------------------------------------------
# create_pod
# ------------------------------------------------------------------------------------------------
def test_create_posts_the_manifest(kube_api, kube_backend):
    # given the API accepts the pod
    kube_api.reply("POST", PODS, 201, "pod_created.json")
    # when the pod is created
    kube_backend.create_pod(worker(0))
    # then exactly one POST carried the manifest, as JSON, to the namespace's pods collection
    [request] = kube_api.requests
    assert (request.method, request.path, request.query) == ("POST", PODS, {})
    assert request.body == build_manifest(worker(0))
    assert request.headers["content-type"] == "application/json"


def test_create_is_idempotent_on_already_exists(kube_api, kube_backend):
    # given the pod was created before (a retried dispatch)
    kube_api.reply("POST", PODS, 201, "pod_created.json")
    kube_api.reply("POST", PODS, 409, "status_already_exists.json")
    # when it is created twice
    kube_backend.create_pod(worker(0))
    kube_backend.create_pod(worker(0))
    # then both succeed, with the same body posted
    assert [r.body for r in kube_api.requests] == [build_manifest(worker(0))] * 2


@pytest.mark.parametrize(("status", "fixture"), [
    (500, "status_internal_error.json"),
    (503, "status_service_unavailable.json"),
    (429, "status_too_many_requests.json"),
])
def test_create_server_errors_are_transient(kube_api, kube_backend, status, fixture):
    kube_api.reply("POST", PODS, status, fixture)
    with pytest.raises(DispatchTransientError) as caught:
        kube_backend.create_pod(worker(0))
    assert f"HTTP {status}" in str(caught.value)
    assert load_fixture(fixture)["message"] in str(caught.value)


@pytest.mark.parametrize(("status", "fixture", "message"), [
    (403, "status_forbidden.json", 'cannot create resource "pods" in API group "" in the namespace "osmo-jobs"'),
    (422, "status_invalid.json", "a valid environment variable name must consist only of printable ASCII"),
    (404, "status_namespace_not_found.json", 'namespaces "osmo-jobs" not found'),
    (401, "status_unauthorized.json", "Unauthorized"),
])
def test_create_client_errors_are_permanent_with_the_api_message(kube_api, kube_backend, status, fixture,
                                                                   message, monkeypatch):
    # given a refusal that lasts (401/403 are first retried a few times: see the next test)
    monkeypatch.setenv("OSMO_K8S_AUTH_RETRIES", "2")
    attempts = 3 if status in (401, 403) else 1
    for _ in range(attempts):
        kube_api.reply("POST", PODS, status, fixture)
    # when / then
    with pytest.raises(DispatchPermanentError) as caught:
        kube_backend.create_pod(worker(0))
    assert f"HTTP {status}" in str(caught.value)
    assert message in str(caught.value)
    assert len(kube_api.requests) == attempts  # other errors are not retried inside the client: Celery decides


def test_a_403_while_the_api_server_starts_is_retried_not_permanent(kube_api, kube_backend):
    """Replays the fault run: for ~75 ms after its port opens, before its RBAC caches synced,
    kube-apiserver answers 403 to requests RBAC allows; the dispatch failed the gang for it."""
    # given two 403s, then the pod is created
    kube_api.reply("POST", PODS, 403, "status_forbidden.json")
    kube_api.reply("POST", PODS, 403, "status_forbidden.json")
    kube_api.reply("POST", PODS, 201, {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "x"}})
    # when
    kube_backend.create_pod(worker(0))
    # then: three requests, no error
    assert [r.method for r in kube_api.requests] == ["POST", "POST", "POST"]


def test_create_against_an_unreachable_server_is_transient():
    configuration = k8s_client.Configuration()
    configuration.host = f"http://127.0.0.1:{closed_port()}"
    configuration.retries = 0
    backend = KubernetesBackend(k8s_client.ApiClient(configuration))
    with pytest.raises(DispatchTransientError, match="create pod osmo-jobs/train-1-trainers-worker-0"):
        backend.create_pod(worker(0))


def test_create_timeout_is_transient(kube_api):
    # given an API server slower than the read timeout
    kube_api.reply("POST", PODS, 201, "pod_created.json", delay=1.0)
    configuration = k8s_client.Configuration()
    configuration.host = kube_api.url
    backend = KubernetesBackend(k8s_client.ApiClient(configuration), request_timeout=(1.0, 0.2))
    # then the call fails as retryable
    with pytest.raises(DispatchTransientError, match="Timeout"):
        backend.create_pod(worker(0))


def test_create_with_an_overlong_name_posts_the_truncated_name(kube_api, kube_backend):
    long_name = "train-1-trainers-" + "w" * 80
    kube_api.reply("POST", PODS, 201, "pod_created.json")
    kube_backend.create_pod(worker(0, pod_name=long_name))
    [request] = kube_api.requests
    assert request.body["metadata"]["name"] == build_manifest(worker(0, pod_name=long_name))["metadata"]["name"]
    assert len(request.body["metadata"]["name"]) <= 63


# ------------------------------------------------------------------------------------------------
# delete_pod
# ------------------------------------------------------------------------------------------------
def test_delete_calls_the_pod_path(kube_api, kube_backend):
    kube_api.reply("DELETE", f"{PODS}/train-1-trainers-worker-0", 200, "pod_deleted.json")
    kube_backend.delete_pod(namespace=NS, pod_name="train-1-trainers-worker-0")
    [request] = kube_api.requests
    assert (request.method, request.path) == ("DELETE", f"{PODS}/train-1-trainers-worker-0")


def test_delete_is_idempotent_on_not_found(kube_api, kube_backend):
    kube_api.reply("DELETE", f"{PODS}/train-1-trainers-worker-0", 200, "pod_deleted.json")
    kube_api.reply("DELETE", f"{PODS}/train-1-trainers-worker-0", 404, "status_not_found.json")
    kube_backend.delete_pod(namespace=NS, pod_name="train-1-trainers-worker-0")
    kube_backend.delete_pod(namespace=NS, pod_name="train-1-trainers-worker-0")
    assert len(kube_api.requests) == 2


def test_delete_uses_the_same_name_as_create_for_overlong_names(kube_api, kube_backend):
    long_name = "train-1-trainers-" + "w" * 80
    name = build_manifest(worker(0, pod_name=long_name))["metadata"]["name"]
    kube_api.reply("DELETE", f"{PODS}/{name}", 404, "status_not_found.json")
    kube_backend.delete_pod(namespace=NS, pod_name=long_name)
    assert [r.path for r in kube_api.requests] == [f"{PODS}/{name}"]


@pytest.mark.parametrize(("status", "fixture", "error"), [
    (500, "status_internal_error.json", DispatchTransientError),
    (503, "status_service_unavailable.json", DispatchTransientError),
    (403, "status_forbidden.json", DispatchPermanentError),
])
def test_delete_error_mapping(kube_api, kube_backend, status, fixture, error, monkeypatch):
    monkeypatch.setenv("OSMO_K8S_AUTH_RETRIES", "0")
    kube_api.reply("DELETE", f"{PODS}/train-1-trainers-worker-0", status, fixture)
    with pytest.raises(error, match=f"HTTP {status}"):
        kube_backend.delete_pod(namespace=NS, pod_name="train-1-trainers-worker-0")


# ------------------------------------------------------------------------------------------------
# pod_states
# ------------------------------------------------------------------------------------------------
def test_pod_states_lists_by_label_following_continue_tokens(kube_api, kube_backend):
    # given two pages of pods in the pool (one page ends with a continue token)
    kube_api.reply("GET", PODS, 200, "pod_list_page1.json")
    kube_api.reply("GET", PODS, 200, "pod_list_page2.json")
    # when the states of seven dispatched pods are read shortly after dispatch
    states = kube_backend.pod_states([worker(i) for i in range(7)], now=DISPATCHED + timedelta(seconds=30))
    # then the pool's pods were listed by label, page by page
    first, second = kube_api.requests
    assert first.query == {"labelSelector": [SELECTOR], "limit": ["500"]}
    assert second.query == {"labelSelector": [SELECTOR], "limit": ["500"], "continue": [TOKEN]}
    assert {r.method for r in kube_api.requests} == {"GET"}
    assert {r.path for r in kube_api.requests} == {PODS}
    # and each phase maps to a state; another workflow's pod in the list is ignored
    assert states == {
        "train-1-trainers-worker-0": PodState("Running"),
        "train-1-trainers-worker-1": PodState(
            "Pending", None,
            'ImagePullBackOff: Back-off pulling image "nvcr.io/nvidia/pytorch:99.99-py3": ErrImagePull: rpc '
            'error: code = NotFound desc = failed to pull and unpack image "nvcr.io/nvidia/pytorch:99.99-py3": '
            "not found"),
        "train-1-trainers-worker-2": PodState(
            "Pending", None,
            "Unschedulable: 0/4 nodes are available: 4 node(s) didn't match Pod's node affinity/selector. "
            "preemption: 0/4 nodes are available: 4 Preemption is not helpful for scheduling.",
            cause="unschedulable", since=CREATED),
        "train-1-trainers-worker-3": PodState("Succeeded", 0, ""),
        "train-1-trainers-worker-4": PodState("Failed", 137, "OOMKilled"),
        "train-1-trainers-worker-5": PodState(
            "Failed", 137,
            "ContainerStatusUnknown: The container could not be located when the pod was terminated: Evicted: "
            "The node was low on resource: ephemeral-storage. Threshold quantity: 10Gi, available: 9Gi. "
            "Container task was using 120Gi, request is 100Gi, has larger consumption of ephemeral-storage.",
            cause="evicted"),
        "train-1-trainers-worker-6": PodState("Missing"),
    }


def test_pending_past_the_timeout_fails_with_a_clear_message(kube_api, kube_backend):
    # given pods still Pending 601 s after dispatch (limit 600 s): no kubelet ever started them
    kube_api.reply("GET", PODS, 200, "pod_list_page1.json")
    kube_api.reply("GET", PODS, 200, "pod_list_page2.json")
    states = kube_backend.pod_states([worker(i) for i in range(6)], now=DISPATCHED + timedelta(seconds=601))
    # then they are Failed, saying why; running and finished pods are unaffected
    assert states["train-1-trainers-worker-1"] == PodState(
        "Failed", None,
        "pod stayed Pending for 601 s; no kubelet started it (reason: ImagePullBackOff: Back-off pulling image "
        '"nvcr.io/nvidia/pytorch:99.99-py3": ErrImagePull: rpc error: code = NotFound desc = failed to pull and '
        'unpack image "nvcr.io/nvidia/pytorch:99.99-py3": not found)', live=True, cause="image_pull")
    # a pod the cluster refuses to schedule is left to the unschedulable rule (docs/kubernetes.md §10)
    assert (states["train-1-trainers-worker-2"].phase, states["train-1-trainers-worker-2"].cause) == (
        "Pending", "unschedulable")
    assert states["train-1-trainers-worker-0"] == PodState("Running")
    assert states["train-1-trainers-worker-3"] == PodState("Succeeded", 0, "")


def test_pending_at_the_limit_is_still_pending(kube_api, kube_backend):
    kube_api.reply("GET", PODS, 200, "pod_list_page1.json")
    kube_api.reply("GET", PODS, 200, "pod_list_page2.json")
    states = kube_backend.pod_states([worker(1)], now=DISPATCHED + timedelta(seconds=600))
    assert states["train-1-trainers-worker-1"].phase == "Pending"


def test_pending_timeout_without_dispatch_time_counts_from_pod_creation(kube_api, kube_backend):
    kube_api.reply("GET", PODS, 200, "pod_list_waiting.json")
    states = kube_backend.pod_states([worker(7, dispatched_at=None)], now=CREATED + timedelta(seconds=700))
    assert states["train-1-trainers-worker-7"] == PodState(
        "Failed", None, "pod stayed Pending for 700 s; no kubelet started it (reason: ContainerCreating)", live=True)


def test_pending_waiting_reasons_are_reported(kube_api, kube_backend):
    kube_api.reply("GET", PODS, 200, "pod_list_waiting.json")
    states = kube_backend.pod_states([worker(6), worker(7)], now=DISPATCHED + timedelta(seconds=5))
    assert states == {
        "train-1-trainers-worker-6": PodState("Pending", None,
                                              'CreateContainerConfigError: secret "hf-token" not found'),
        "train-1-trainers-worker-7": PodState("Pending", None, "ContainerCreating"),
    }


def test_pending_timeout_comes_from_the_environment(kube_api, monkeypatch):
    # given OSMO_K8S_PENDING_TIMEOUT=60
    monkeypatch.setenv("OSMO_K8S_PENDING_TIMEOUT", "60")
    configuration = k8s_client.Configuration()
    configuration.host = kube_api.url
    backend = KubernetesBackend.from_settings(api_client=k8s_client.ApiClient(configuration))
    kube_api.reply("GET", PODS, 200, "pod_list_waiting.json")
    # when a pod is still creating after 61 s
    states = backend.pod_states([worker(6)], now=DISPATCHED + timedelta(seconds=61))
    # then it has failed
    assert backend.pending_timeout_s == 60
    assert states["train-1-trainers-worker-6"] == PodState(
        "Failed", None,
        'pod stayed Pending for 61 s; no kubelet started it (reason: CreateContainerConfigError: secret "hf-token" '
        "not found)", live=True, cause="start_error")


def test_naive_now_is_taken_as_utc(kube_api, kube_backend):
    kube_api.reply("GET", PODS, 200, "pod_list_waiting.json")
    states = kube_backend.pod_states([worker(7)], now=(DISPATCHED + timedelta(seconds=601)).replace(tzinfo=None))
    assert states["train-1-trainers-worker-7"].phase == "Failed"


def test_pod_states_lists_each_namespace_and_pool_once(kube_api, kube_backend):
    # given pods in two namespaces, one of them in a pool whose name is not a valid label value
    other_pods = "/api/v1/namespaces/team-b/pods"
    kube_api.reply("GET", PODS, 200, "pod_list_waiting.json")
    kube_api.reply("GET", other_pods, 200, "pod_list_empty.json")
    requests = [worker(6), worker(7), worker(0, namespace="team-b", pool="nvl72 / east")]
    # when their states are read
    states = kube_backend.pod_states(requests, now=DISPATCHED)
    # then one list call per (namespace, pool), with the sanitised pool label in the selector
    assert [(r.path, r.query["labelSelector"]) for r in kube_api.requests] == [
        (PODS, [SELECTOR]),
        (other_pods, [f"app.kubernetes.io/managed-by=osmo,osmo.nvidia.com/pool={label_value('nvl72 / east')}"]),
    ]
    assert states["train-1-trainers-worker-0"] == PodState("Missing")
    assert states["train-1-trainers-worker-6"].phase == "Pending"


def test_pod_states_with_no_pods_makes_no_call(kube_api, kube_backend):
    assert kube_backend.pod_states([], now=DISPATCHED) == {}
    assert kube_api.requests == []


def test_expired_continue_token_restarts_the_listing(kube_api, kube_backend):
    # given the continue token expires between the two pages
    kube_api.reply("GET", PODS, 200, "pod_list_page1.json")
    kube_api.reply("GET", PODS, 410, "status_expired.json")
    kube_api.reply("GET", PODS, 200, "pod_list_page1.json")
    kube_api.reply("GET", PODS, 200, "pod_list_page2.json")
    # when states are read
    states = kube_backend.pod_states([worker(3)], now=DISPATCHED)
    # then the listing started over without the token, and completed
    assert ["continue" in r.query for r in kube_api.requests] == [False, True, False, True]
    assert states["train-1-trainers-worker-3"] == PodState("Succeeded", 0, "")


@pytest.mark.parametrize(("status", "fixture", "error"), [
    (500, "status_internal_error.json", DispatchTransientError),
    (429, "status_too_many_requests.json", DispatchTransientError),
    (403, "status_forbidden.json", DispatchPermanentError),
])
def test_list_error_mapping(kube_api, kube_backend, status, fixture, error, monkeypatch):
    monkeypatch.setenv("OSMO_K8S_AUTH_RETRIES", "0")
    kube_api.reply("GET", PODS, status, fixture)
    with pytest.raises(error, match=f"list pods in {NS}: HTTP {status}"):
        kube_backend.pod_states([worker(0)], now=DISPATCHED)


# ------------------------------------------------------------------------------------------------
# from_settings / backend_for
# ------------------------------------------------------------------------------------------------
def write_kubeconfig(path, *, good_url: str, bad_url: str) -> None:
    """Two contexts: ``lab`` (the fake server, token auth) is not the current one; ``prod`` is unreachable."""
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "prod", "preferences": {},
        "clusters": [{"name": "lab", "cluster": {"server": good_url}},
                     {"name": "prod", "cluster": {"server": bad_url}}],
        "users": [{"name": "osmo", "user": {"token": "s3cr3t-token"}}],
        "contexts": [{"name": "lab", "context": {"cluster": "lab", "user": "osmo", "namespace": NS}},
                     {"name": "prod", "context": {"cluster": "prod", "user": "osmo"}}],
    }))


@pytest.fixture
def clean_env(monkeypatch):
    for name in ("KUBECONFIG", "OSMO_K8S_CONTEXT", "OSMO_K8S_IN_CLUSTER", "OSMO_K8S_PENDING_TIMEOUT"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_from_settings_with_a_kubeconfig_file_and_context(kube_api, tmp_path, clean_env):
    # given a kubeconfig whose "lab" context points at the API server
    kubeconfig = tmp_path / "kubeconfig"
    write_kubeconfig(kubeconfig, good_url=kube_api.url, bad_url=f"http://127.0.0.1:{closed_port()}")
    default_host = k8s_client.Configuration.get_default_copy().host
    # when a backend is built from it and creates a pod
    backend = KubernetesBackend.from_settings(kubeconfig=str(kubeconfig), context="lab")
    kube_api.reply("POST", PODS, 201, "pod_created.json")
    backend.create_pod(worker(0))
    # then the request reached that server with the user's bearer token
    [request] = kube_api.requests
    assert request.path == PODS
    assert request.headers["authorization"] == "Bearer s3cr3t-token"
    # and the client's global default configuration was left alone
    assert k8s_client.Configuration.get_default_copy().host == default_host


def test_from_settings_reads_kubeconfig_and_context_from_the_environment(kube_api, tmp_path, clean_env):
    kubeconfig = tmp_path / "kubeconfig"
    write_kubeconfig(kubeconfig, good_url=kube_api.url, bad_url=f"http://127.0.0.1:{closed_port()}")
    clean_env.setenv("KUBECONFIG", str(kubeconfig))
    clean_env.setenv("OSMO_K8S_CONTEXT", "lab")
    backend = backend_for("kubernetes")
    assert isinstance(backend, KubernetesBackend) and backend.name == "kubernetes"
    kube_api.reply("DELETE", f"{PODS}/train-1-trainers-worker-0", 404, "status_not_found.json")
    backend.delete_pod(namespace=NS, pod_name="train-1-trainers-worker-0")
    assert [r.headers["authorization"] for r in kube_api.requests] == ["Bearer s3cr3t-token"]


def test_from_settings_uses_the_current_context_by_default(kube_api, tmp_path, clean_env):
    # given the current context is the unreachable "prod" cluster
    kubeconfig = tmp_path / "kubeconfig"
    write_kubeconfig(kubeconfig, good_url=kube_api.url, bad_url=f"http://127.0.0.1:{closed_port()}")
    backend = KubernetesBackend.from_settings(kubeconfig=str(kubeconfig))
    # then calls go there (and fail as transient), not to the fake server
    with pytest.raises(DispatchTransientError):
        backend.create_pod(worker(0))
    assert kube_api.requests == []


def test_from_settings_with_a_missing_kubeconfig_is_permanent(tmp_path, clean_env):
    with pytest.raises(DispatchPermanentError, match="kubeconfig"):
        KubernetesBackend.from_settings(kubeconfig=str(tmp_path / "absent"))


def test_from_settings_with_an_unknown_context_is_permanent(kube_api, tmp_path, clean_env):
    kubeconfig = tmp_path / "kubeconfig"
    write_kubeconfig(kubeconfig, good_url=kube_api.url, bad_url=kube_api.url)
    with pytest.raises(DispatchPermanentError, match="nope"):
        KubernetesBackend.from_settings(kubeconfig=str(kubeconfig), context="nope")


def test_in_cluster_outside_a_cluster_is_permanent(clean_env):
    clean_env.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    clean_env.delenv("KUBERNETES_SERVICE_PORT", raising=False)
    with pytest.raises(DispatchPermanentError, match="in-cluster"):
        KubernetesBackend.from_settings(in_cluster=True)
    clean_env.setenv("OSMO_K8S_IN_CLUSTER", "true")
    with pytest.raises(DispatchPermanentError, match="in-cluster"):
        backend_for("kubernetes")


def test_backend_for_takes_a_ready_api_client(kube_api):
    configuration = k8s_client.Configuration()
    configuration.host = kube_api.url
    backend = backend_for("kubernetes", api_client=k8s_client.ApiClient(configuration), pending_timeout_s=5)
    assert isinstance(backend, KubernetesBackend)
    assert backend.pending_timeout_s == 5


# ------------------------------------------------------------------------------------------------
# pod_log / pod_events
# ------------------------------------------------------------------------------------------------
def test_pod_log_reads_the_task_containers_tail_as_text(kube_api, kube_backend):
    # given a pod whose log (text/plain) has more lines than asked for
    kube_api.reply_text("GET", f"{PODS}/train-1-trainers-worker-0/log", 200, "pod_log.txt")
    # when the last 4 lines are read
    log = kube_backend.pod_log(worker(0), tail=4, now=DISPATCHED)
    # then one more line was asked for, to know whether the log was cut
    [request] = kube_api.requests
    assert request.query == {"container": ["task"], "tailLines": ["5"], "limitBytes": [str(LOG_READ_MAX_BYTES)]}
    assert log.truncated is True
    assert log.lines == (
        "[rank0]: NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.0.3.17<0>",
        "[rank0]: epoch 0 step 100 loss 2.3141 lr 3.0e-04 tokens/s 181204",
        "[rank0]: epoch 0 step 200 loss 1.9876 lr 3.0e-04 tokens/s 183377",
        "[rank0]: epoch 0 step 300 loss 1.8120 lr 3.0e-04 tokens/s 182950",
    )


def test_pod_log_is_read_up_to_a_byte_limit_and_a_cut_answer_is_said_to_be_cut(kube_api, kube_backend,
                                                                                 monkeypatch):
    """Replays the audit's finding: a log was tailed by lines only, so a few long lines could be read
    into the web process whatever their size."""
    # given a byte limit exactly the size of the answer the server gives (the server cut it there)
    from scheduler.dispatch import kubernetes

    answer = (FIXTURES / "pod_log.txt").read_bytes()
    monkeypatch.setattr(kubernetes, "LOG_READ_MAX_BYTES", len(answer))
    kube_api.reply_text("GET", f"{PODS}/train-1-trainers-worker-0/log", 200, "pod_log.txt")

    # when
    log = kube_backend.pod_log(worker(0), tail=100, now=DISPATCHED)

    # then the limit was asked for, and the last (maybe partial) line is dropped and the log said cut
    [request] = kube_api.requests
    assert request.query == {"container": ["task"], "tailLines": ["101"], "limitBytes": [str(len(answer))]}
    assert log.truncated is True
    assert log.lines == tuple(answer.decode().splitlines()[:-1])


def test_pod_log_shorter_than_the_tail_is_whole(kube_api, kube_backend):
    kube_api.reply_text("GET", f"{PODS}/train-1-trainers-worker-0/log", 200, "pod_log.txt")
    log = kube_backend.pod_log(worker(0), tail=100, now=DISPATCHED)
    assert (len(log.lines), log.truncated) == (5, False)


@pytest.mark.parametrize(("status", "fixture", "error", "message"), [
    (400, "status_log_waiting.json", DispatchPermanentError, 'is waiting to start'),
    (404, "status_not_found.json", DispatchPermanentError, "HTTP 404"),
    (503, "status_service_unavailable.json", DispatchTransientError, "HTTP 503"),
])
def test_pod_log_errors(kube_api, kube_backend, status, fixture, error, message):
    kube_api.reply("GET", f"{PODS}/train-1-trainers-worker-1/log", status, fixture)
    with pytest.raises(error, match=message):
        kube_backend.pod_log(worker(1), tail=10, now=DISPATCHED)


def test_a_users_log_and_events_reads_are_not_held_by_the_403_retries(kube_api, kube_backend, monkeypatch):
    """The 401/403 retries cover the service's own work (the API server's start-up window); a user
    waiting on a log or events read is answered at once (one request each, no backoff)."""
    monkeypatch.setenv("OSMO_K8S_AUTH_RETRIES", "4")
    kube_api.reply("GET", f"{PODS}/train-1-trainers-worker-1/log", 403, "status_forbidden.json")
    kube_api.reply("GET", EVENTS, 403, "status_forbidden.json")
    with pytest.raises(DispatchPermanentError, match="HTTP 403"):
        kube_backend.pod_log(worker(1), tail=10, now=DISPATCHED)
    with pytest.raises(DispatchPermanentError, match="HTTP 403"):
        kube_backend.pod_events([worker(1)], now=DISPATCHED)
    assert [(r.method, r.path) for r in kube_api.requests] == [
        ("GET", f"{PODS}/train-1-trainers-worker-1/log"), ("GET", EVENTS)]


def test_pod_log_against_an_unreachable_server_is_transient():
    configuration = k8s_client.Configuration()
    configuration.host = f"http://127.0.0.1:{closed_port()}"
    configuration.retries = 0
    backend = KubernetesBackend(k8s_client.ApiClient(configuration))
    with pytest.raises(DispatchTransientError, match="read log of pod osmo-jobs/train-1-trainers-worker-0"):
        backend.pod_log(worker(0), tail=10, now=DISPATCHED)


EVENTS = f"/api/v1/namespaces/{NS}/events"


def test_pod_events_of_a_few_pods_are_read_per_pod_with_container_reasons(kube_api, kube_backend):
    # given events of worker-0, none for worker-4, and the pool's pods (worker-4 was OOMKilled)
    kube_api.reply("GET", EVENTS, 200, "event_list_worker0.json")
    kube_api.reply("GET", EVENTS, 200, {"kind": "EventList", "apiVersion": "v1", "metadata": {}, "items": []})
    kube_api.reply("GET", PODS, 200, "pod_list_page1.json")
    kube_api.reply("GET", PODS, 200, "pod_list_page2.json")
    # when
    events = kube_backend.pod_events([worker(0), worker(4)], now=DISPATCHED + timedelta(hours=1))
    # then one field-selected event list per pod, and only the workflow's pods listed, by label
    workflow = f"{SELECTOR},osmo.nvidia.com/workflow=train-1"
    assert [(r.path, r.query.get("fieldSelector"), r.query.get("labelSelector")) for r in kube_api.requests] == [
        (EVENTS, ["involvedObject.kind=Pod,involvedObject.name=train-1-trainers-worker-0"], None),
        (EVENTS, ["involvedObject.kind=Pod,involvedObject.name=train-1-trainers-worker-4"], None),
        (PODS, None, [workflow]),
        (PODS, None, [workflow]),
    ]
    summary = sorted((e.time.isoformat(), e.pod_name, e.kind) for e in events)
    assert summary == [
        ("2025-06-01T12:00:01+00:00", "train-1-trainers-worker-0", "Scheduled"),
        ("2025-06-01T12:00:03+00:00", "train-1-trainers-worker-0", "Pulled"),
        ("2025-06-01T12:00:04+00:00", "train-1-trainers-worker-0", "Started"),
        ("2025-06-01T12:03:10+00:00", "train-1-trainers-worker-4", "OOMKilled"),
    ]
    oom = next(e for e in events if e.kind == "OOMKilled")
    assert oom.message == "container task exited with code 137"


def test_pod_events_of_many_pods_are_one_paginated_namespace_list(kube_api, kube_backend):
    # given nine pods (more than are read one by one), events on two pages, one of another pod
    kube_api.reply("GET", EVENTS, 200, "event_list_page1.json")
    kube_api.reply("GET", EVENTS, 200, "event_list_page2.json")
    kube_api.reply("GET", PODS, 200, "pod_list_page1.json")
    kube_api.reply("GET", PODS, 200, "pod_list_page2.json")
    # when
    events = kube_backend.pod_events([worker(i) for i in range(9)], now=DISPATCHED + timedelta(seconds=90))
    # then two event calls in all (the second with the continue token), whatever the number of pods
    event_calls = [r for r in kube_api.requests if r.path == EVENTS]
    assert [r.query["fieldSelector"] for r in event_calls] == [["involvedObject.kind=Pod"]] * 2
    assert "continue" in event_calls[1].query
    kinds = {(e.pod_name, e.kind) for e in events}
    assert ("train-1-trainers-worker-1", "Failed") in kinds and ("train-1-trainers-worker-4", "Killing") in kinds
    assert ("train-1-trainers-worker-1", "ImagePullBackOff") in kinds  # from the pod's container state
    assert ("train-1-trainers-worker-5", "Evicted") in kinds
    assert not any(e.pod_name == "other-7" for e in events)
    failed = next(e for e in events if e.kind == "Failed")
    assert failed.message.endswith("not found (x4)")
    assert failed.time == datetime(2025, 6, 1, 12, 1, 10, tzinfo=UTC)


def test_pod_events_unreachable_is_transient(kube_api, kube_backend):
    kube_api.reply("GET", EVENTS, 503, "status_service_unavailable.json")
    with pytest.raises(DispatchTransientError, match=f"list events in {NS}: HTTP 503"):
        kube_backend.pod_events([worker(0)], now=DISPATCHED)


# ------------------------------------------------------------------------------------------------
# pod_states: the cluster's causes (docs/kubernetes.md §10)
# ------------------------------------------------------------------------------------------------
def _disrupted(i: int, phase: str, reason: str, message: str, terminated: dict | None = None) -> dict:
    item = load_fixture("pod_list_page1.json")["items"][0]  # a recorded Running pod, reshaped
    item["metadata"]["name"] = f"train-1-trainers-worker-{i}"
    item["status"]["phase"] = phase
    item["status"]["conditions"] = [{"type": "DisruptionTarget", "status": "True", "lastProbeTime": None,
                                     "lastTransitionTime": "2025-06-01T12:10:00Z", "reason": reason,
                                     "message": message}]
    if terminated is not None:
        item["status"]["containerStatuses"][0]["state"] = {"terminated": terminated}
    return item


def test_a_disruption_target_says_the_infrastructure_took_the_pod_unless_it_had_finished(kube_api, kube_backend):
    # given a pod drained while running (still terminating), one killed by it (exit 143), one that finished first
    body = load_fixture("pod_list_empty.json")
    body["items"] = [
        _disrupted(0, "Running", "EvictionByEvictionAPI", "Eviction API: evicting"),
        _disrupted(1, "Failed", "DeletionByTaintManager", "Taint manager: deleting due to NoExecute taint",
                   {"exitCode": 143, "reason": "Error"}),
        _disrupted(2, "Succeeded", "EvictionByEvictionAPI", "Eviction API: evicting",
                   {"exitCode": 0, "reason": "Completed"}),
    ]
    kube_api.reply("GET", PODS, 200, body)
    # when
    states = kube_backend.pod_states([worker(i) for i in range(3)], now=DISPATCHED + timedelta(seconds=700))
    # then
    node = body["items"][0]["spec"]["nodeName"]
    assert states == {
        "train-1-trainers-worker-0": PodState(
            "Failed", None, f"disrupted on node {node}: EvictionByEvictionAPI: Eviction API: evicting", live=True,
            cause="disrupted"),
        "train-1-trainers-worker-1": PodState(
            "Failed", 143, f"disrupted on node {node}: DeletionByTaintManager: Taint manager: deleting due to "
            "NoExecute taint", cause="disrupted"),
        "train-1-trainers-worker-2": PodState("Succeeded", 0, ""),
    }
