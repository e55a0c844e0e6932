"""A task's ``credentials`` and ``volumeMounts`` at dispatch, with the service's real database
(docs/kubernetes.md, "Credentials"): the submitter's values reach a Secret owned by the pod on Kubernetes
(the fake API server answers in the API's shapes), nothing is decrypted for the simulated backend, a
credential deleted since the submission fails the gang without a pod; host mounts only as the
platform allows."""

from __future__ import annotations

import base64
import copy
import json
import logging

import kubernetes_validate
import pytest
from kubernetes import client as k8s_client

from credentials.models import Credential
from credentials.services import credential_set
from scheduler.dispatch.kubernetes import KubernetesBackend
from scheduler.models import PoolPlatform
from tests.dispatch.fake_kube import fixture
from tests.dispatch.recorder import Recorder
from tests.dispatch.test_kubernetes_manifest import K8S_VERSION
from tests.factories import make_node, make_pool
from tests.pipeline.helpers import backend_use
from tests.workflows.test_runtime_api import placed as placed_gang
from workflows.models import Task, TaskGroup
from workflows.scheduling import gang_dispatch
from workflows.scheduling.cycle import placement_cycle_run
from workflows.services import workflow_submit

pytestmark = pytest.mark.django_db
NS = "osmo-jobs"
PODS = f"/api/v1/namespaces/{NS}/pods"
SECRETS = f"/api/v1/namespaces/{NS}/secrets"
TOKEN = "hf_dispatch_s3cr3t"

SPEC = """
workflow:
  name: finetune
  resources:
    default: {gpu: 4, platform: dgx}
  tasks:
  - name: train
    image: nvcr.io/nvidia/pytorch:24.03-py3
    command: [python, train.py]
    environment: {EPOCHS: "3"}
    volumeMounts:
    - /data/imagenet:/datasets:ro
    credentials:
      huggingface: {HF_TOKEN: token}
      s3-writer: /root/.aws
"""


def placed(user, backend: str):
    """A submitted and placed one-task workflow on a pool of ``backend`` with platform ``dgx``."""
    pool = make_pool(backend, keys=[("rack", "rack")], backend=backend, k8s_namespace=NS)
    make_node(pool, "n1", {"rack": "r1"}, gpu=4)
    PoolPlatform.objects.create(pool=pool, name="dgx", node_selector={}, host_mounts=["/data"])
    credential_set(owner=user, name="huggingface", kind="generic", values={"token": TOKEN})
    credential_set(owner=user, name="s3-writer", kind="data",
                   values={"endpoint": "s3://bucket", "access_key_id": "AKIAEXAMPLE", "access_key": "sk-value"})
    workflow, _ = workflow_submit(user=user, pool_name=pool.name, spec=SPEC)
    placement_cycle_run(pool_id=pool.pk)
    group = TaskGroup.objects.get(workflow=workflow)
    assert group.status == "INITIALIZING"
    return pool, workflow, group


def test_on_kubernetes_the_credentials_reach_a_secret_owned_by_the_pod(user, kube_api, inline_jobs, monkeypatch,
                                                                        caplog):
    # given a placed task naming two credentials, the API answering in its shapes
    configuration = k8s_client.Configuration()
    configuration.host = kube_api.url
    backend = KubernetesBackend(k8s_client.ApiClient(configuration), request_timeout=(2.0, 5.0))
    backend_use(monkeypatch, backend)
    caplog.set_level(logging.DEBUG)
    pool, workflow, group = placed(user, "kubernetes")
    pod_name = Task.objects.get(workflow=workflow).pod_name
    created = copy.deepcopy(fixture("pod_created.json"))
    created["metadata"].update(name=pod_name, uid="00000000-0000-4000-8000-00000000000a")
    kube_api.reply("POST", PODS, 201, created)
    kube_api.reply("POST", SECRETS, 201, "secret_created.json")

    # when
    gang_dispatch.gang_dispatch(group_id=group.pk)

    # then the pod refers to its Secret by name and key, mounts the data credential and the host folder
    assert kube_api.pending() == []
    pod, secret = kube_api.requests[0].body, kube_api.requests[1].body
    container = pod["spec"]["containers"][0]
    assert container["env"] == [{"name": "EPOCHS", "value": "3"}, {"name": "HF_TOKEN", "valueFrom": {
        "secretKeyRef": {"name": pod_name, "key": "env-0"}}}]
    assert [(m["name"], m["mountPath"], m.get("readOnly")) for m in container["volumeMounts"]] == [
        ("credentials-0", "/root/.aws", True), ("host-0", "/datasets", True)]
    assert pod["spec"]["volumes"][1] == {"name": "host-0", "hostPath": {"path": "/data/imagenet"}}
    # the Secret holds the values, owned by the pod (deleted with it)
    assert secret["metadata"]["name"] == pod_name
    assert secret["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Pod", "name": pod_name, "uid": "00000000-0000-4000-8000-00000000000a"}]
    values = {key: base64.b64decode(value).decode() for key, value in secret["data"].items()}
    assert values == {"env-0": TOKEN, "file-0": "sk-value", "file-1": "AKIAEXAMPLE", "file-2": "s3://bucket"}
    assert [item["path"] for item in pod["spec"]["volumes"][0]["secret"]["items"]] == [
        "access_key", "access_key_id", "endpoint"]
    # no value in the pod, nor in any log line of the dispatch
    assert TOKEN not in json.dumps(pod)
    assert [r for r in caplog.records if TOKEN in r.getMessage() or TOKEN in str(r.__dict__)] == []
    assert Task.objects.filter(workflow=workflow, dispatched_at__isnull=False).count() == 1


def test_the_simulated_backend_gets_no_credentials(user, inline_jobs, monkeypatch):
    # given
    recorder = Recorder()
    backend_use(monkeypatch, recorder)
    _pool, _workflow, group = placed(user, "simulated")

    # when
    gang_dispatch.gang_dispatch(group_id=group.pk)

    # then the pod was made without decrypting anything
    assert [(pod.task, bool(pod.credentials)) for pod in recorder.created] == [("train", False)]


def test_the_local_backend_gets_the_values_and_the_allowed_mount(user, inline_jobs, monkeypatch):
    # given
    recorder = Recorder()
    backend_use(monkeypatch, recorder)
    _pool, _workflow, group = placed(user, "local")

    # when
    gang_dispatch.gang_dispatch(group_id=group.pk)

    # then (beside the task's `osmo` login, docs/runtime.md)
    (pod,) = recorder.created
    assert [pod.credentials.env.pop(name) for name in ("OSMO_URL", "OSMO_POOL")] == ["http://127.0.0.1:8000", "local"]
    assert pod.credentials.env.pop("OSMO_TOKEN")
    assert (pod.credentials.env, pod.credentials.files) == (
        {"HF_TOKEN": TOKEN},
        {"/root/.aws/access_key": "sk-value", "/root/.aws/access_key_id": "AKIAEXAMPLE",
         "/root/.aws/endpoint": "s3://bucket"})
    assert pod.host_mounts == (("/data/imagenet", "/datasets", True),)


def test_a_credential_deleted_since_the_submission_fails_the_gang_without_a_pod(user, kube_api, inline_jobs,
                                                                                 monkeypatch):
    # given a placed task whose credential its user deleted meanwhile
    configuration = k8s_client.Configuration()
    configuration.host = kube_api.url
    backend = KubernetesBackend(k8s_client.ApiClient(configuration), request_timeout=(2.0, 5.0))
    backend_use(monkeypatch, backend)
    _pool, workflow, group = placed(user, "kubernetes")
    Credential.objects.filter(owner=user, name="s3-writer").delete()

    # when
    gang_dispatch.gang_dispatch(group_id=group.pk)

    # then the gang failed naming the credential; no call reached the API
    task = Task.objects.get(workflow=workflow)
    assert (task.status, task.dispatched_at) == ("FAILED_BACKEND_ERROR", None)
    group.refresh_from_db()
    assert group.failure_message == f"pod {task.pod_name}: credential 's3-writer' was deleted since the submission"
    assert kube_api.requests == []


def test_a_key_the_credential_no_longer_holds_fails_the_gang_naming_it(user, inline_jobs, monkeypatch):
    # given a placed task whose credential was replaced without the key its variable maps
    recorder = Recorder()
    backend_use(monkeypatch, recorder)
    _pool, workflow, group = placed(user, "local")
    credential_set(owner=user, name="huggingface", kind="generic", values={"password": "other"})

    # when
    gang_dispatch.gang_dispatch(group_id=group.pk)

    # then
    task = Task.objects.get(workflow=workflow)
    assert task.status == "FAILED_BACKEND_ERROR"
    group.refresh_from_db()
    assert group.failure_message == (f"pod {task.pod_name}: credentials.huggingface.HF_TOKEN: credential "
                                   "'huggingface' has no key 'token'; its keys: password")
    assert recorder.created == []


PULL_SPEC = """
workflow:
  name: pull
  resources:
    default: {gpu: 4}
    small: {cpu: 1}
  groups:
  - name: g
    tasks:
    - name: train
      lead: true
      image: nvcr.io/nvidia/pytorch:24.03-py3
      command: [python, train.py]
    - name: side
      image: busybox
      command: [sleep, "1"]
      resource: small
"""


def _kube_placed(user, kube_api, monkeypatch):
    """A two-task workflow (an NGC image and a Docker Hub one) placed on a Kubernetes pool whose API
    the fake server answers; the pods' names."""
    configuration = k8s_client.Configuration()
    configuration.host = kube_api.url
    backend = KubernetesBackend(k8s_client.ApiClient(configuration), request_timeout=(2.0, 5.0))
    backend_use(monkeypatch, backend)
    pool = make_pool("kubernetes", keys=[("rack", "rack")], backend="kubernetes", k8s_namespace=NS)
    make_node(pool, "n1", {"rack": "r1"}, gpu=4)
    workflow, _ = workflow_submit(user=user, pool_name=pool.name, spec=PULL_SPEC)
    placement_cycle_run(pool_id=pool.pk)
    group = TaskGroup.objects.get(workflow=workflow)
    assert group.status == "INITIALIZING"
    names = dict(Task.objects.filter(workflow=workflow).values_list("name", "pod_name"))
    for index, task in enumerate(("train", "side")):  # dispatched in task order
        created = copy.deepcopy(fixture("pod_created.json"))
        created["metadata"].update(name=names[task], uid=f"00000000-0000-4000-8000-00000000000{index}")
        kube_api.reply("POST", PODS, 201, created)
    return group, names


def test_the_registry_credential_of_the_images_registry_becomes_the_pods_pull_secret(user, other_user, kube_api,
                                                                                      inline_jobs, monkeypatch):
    # given the submitter's NGC credential (and another user's, for Docker Hub)
    credential_set(owner=user, name="ngc", kind="registry",
                   values={"registry": "https://nvcr.io", "username": "$oauthtoken", "auth": "nvapi-s3cr3t"})
    credential_set(owner=other_user, name="hub", kind="registry",
                   values={"registry": "docker.io", "username": "bob", "auth": "hub-s3cr3t"})
    group, names = _kube_placed(user, kube_api, monkeypatch)
    kube_api.reply("POST", SECRETS, 201, "secret_created.json")

    # when
    gang_dispatch.gang_dispatch(group_id=group.pk)

    # then three calls: the NGC pod naming a pull Secret, that Secret, and the busybox pod without one
    assert kube_api.pending() == []
    assert [(r.method, r.path) for r in kube_api.requests] == [("POST", PODS), ("POST", SECRETS), ("POST", PODS)]
    train, pull, side = (r.body for r in kube_api.requests)
    assert "imagePullSecrets" not in side["spec"]
    assert train["spec"]["imagePullSecrets"] == [{"name": f"{names['train']}-pull"}]
    assert (pull["type"], pull["metadata"]["name"]) == ("kubernetes.io/dockerconfigjson", f"{names['train']}-pull")
    assert pull["metadata"]["ownerReferences"] == [{"apiVersion": "v1", "kind": "Pod", "name": names["train"],
                                                    "uid": "00000000-0000-4000-8000-000000000000"}]
    assert kubernetes_validate.validate(train, desired_version=K8S_VERSION, strict=True) == "1.37"
    assert kubernetes_validate.validate(pull, desired_version=K8S_VERSION, strict=True) == "1.37"
    config = json.loads(base64.b64decode(pull["data"][".dockerconfigjson"]))
    assert config == {"auths": {"nvcr.io": {"username": "$oauthtoken", "password": "nvapi-s3cr3t",
                                            "auth": base64.b64encode(b"$oauthtoken:nvapi-s3cr3t").decode()}}}
    # no secret value in either pod
    assert "s3cr3t" not in json.dumps(side) + json.dumps(train)


def test_without_a_registry_credential_for_the_image_no_pull_secret_is_made(user, other_user, kube_api,
                                                                             inline_jobs, monkeypatch):
    # given only another user's NGC credential, and the submitter's for a registry neither image is on
    credential_set(owner=other_user, name="ngc", kind="registry",
                   values={"registry": "nvcr.io", "username": "$oauthtoken", "auth": "nvapi-other"})
    credential_set(owner=user, name="ghcr", kind="registry",
                   values={"registry": "ghcr.io", "username": "alice", "auth": "ghp-x"})
    group, _names = _kube_placed(user, kube_api, monkeypatch)

    # when
    gang_dispatch.gang_dispatch(group_id=group.pk)

    # then the two pods were made, no Secret (the fake server fails on any unscripted call)
    assert [(r.method, r.path) for r in kube_api.requests] == [("POST", PODS), ("POST", PODS)]
    assert [r.body["spec"].get("imagePullSecrets") for r in kube_api.requests] == [None, None]


@pytest.mark.parametrize(("runtime_image", "gets_login"), [
    pytest.param("registry.example/osmo-runtime:1", True, id="_case_run_by_the_runtime"),
    pytest.param("", False, id="_case_the_user_s_command_alone"),
])
def test_on_kubernetes_the_login_goes_in_the_pod_s_secret_only_when_the_runtime_runs_it(
        user, inline_jobs, monkeypatch, settings, runtime_image, gets_login):
    # given a placed task on a Kubernetes pool, with or without the runtime image
    settings.OSMO_RUNTIME_IMAGE = runtime_image
    recorder = Recorder()
    backend_use(monkeypatch, recorder)
    _workflow, tasks = placed_gang(user, tasks=1, backend="kubernetes")

    # when its gang is dispatched
    gang_dispatch.gang_dispatch(group_id=tasks[0].group_id)

    # then the task's `osmo` login (docs/runtime.md) is among the secret variables (the pod's Secret),
    # never in the plan or the pod's env
    (pod,) = recorder.created
    assert sorted(pod.credentials.env) == (["OSMO_POOL", "OSMO_TOKEN", "OSMO_URL"] if gets_login else [])
    assert bool(pod.runtime_plan) is gets_login
    if gets_login:
        token = pod.credentials.env["OSMO_TOKEN"]
        assert token not in pod.runtime_plan and token not in json.dumps(dict(pod.environment))
