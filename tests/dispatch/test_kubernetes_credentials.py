"""A task's credentials and host mounts in its Kubernetes pod (docs/kubernetes.md, "Credentials" and
"Objects per workflow"): the Secret owned by the pod, the pod's ``secretKeyRef`` and ``secret`` volume
references (never a value), ``hostPath`` volumes; manifests valid for the schema (strict), calls at the
HTTP boundary in the API's shapes."""

from __future__ import annotations

import base64
import json

import kubernetes_validate
import pytest

from credentials.secrets import SecretPayload
from scheduler.dispatch import DispatchPermanentError
from scheduler.dispatch.pod.manifest import build_manifest
from tests.dispatch.test_kubernetes_manifest import K8S_VERSION
from tests.dispatch.test_kubernetes_objects import NS, POD_UID, PODS, torch_pod

SECRETS = f"/api/v1/namespaces/{NS}/secrets"
TOKEN = "hf_s3cr3t_t0ken"
AWS = "[default]\naws_access_key_id = AKIAEXAMPLE\naws_secret_access_key = wJalrXUtnFEMI\n"
PAYLOAD = SecretPayload(env={"HF_TOKEN": TOKEN}, files={"/root/.aws/credentials": AWS})


def plain_pod(**overrides):
    """A rank without files, host name or platform fields: only what a test adds."""
    values = dict(files=(), hostname="", subdomain="", privileged=False, host_network=False)
    values.update(overrides)
    return torch_pod(**values)


def test_the_pod_refers_to_its_secret_and_holds_no_value():
    # given a task with an environment and credentials (a variable and a file)
    pod = plain_pod(environment={"EPOCHS": "3", "HF_TOKEN": "overridden"}, credentials=PAYLOAD)

    # when
    manifest = build_manifest(pod)

    # then the variable is a secretKeyRef (the credential's value wins over the environment's)
    container = manifest["spec"]["containers"][0]
    assert container["env"] == [
        {"name": "EPOCHS", "value": "3"},
        {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "torch-1-master-1a2b3c4d", "key": "env-0"}}}]
    # the file is one key of a read-only secret volume at its folder
    assert container["volumeMounts"] == [{"name": "credentials-0", "mountPath": "/root/.aws", "readOnly": True}]
    assert manifest["spec"]["volumes"] == [{"name": "credentials-0", "secret": {
        "secretName": "torch-1-master-1a2b3c4d", "defaultMode": 0o400,
        "items": [{"key": "file-0", "path": "credentials"}]}}]
    # no value anywhere in the manifest, and the manifest is valid, strictly
    text = json.dumps(manifest)
    assert (TOKEN in text, "AKIAEXAMPLE" in text, "overridden" in text) == (False, False, False)
    assert kubernetes_validate.validate(manifest, desired_version=K8S_VERSION, strict=True) == "1.37"


def test_the_pod_requests_repr_names_no_credential_value():
    # given
    pod = plain_pod(credentials=PAYLOAD, pull_config='{"auths": {"nvcr.io": {"password": "nvapi-pull"}}}')

    # when
    text = repr(pod) + str(pod)

    # then
    assert (TOKEN in text, "AKIAEXAMPLE" in text, "nvapi-pull" in text) == (False, False, False)


def test_the_secret_is_created_after_the_pod_owned_by_it(kube_api, kube_backend):
    # given
    kube_api.reply("POST", PODS, 201, "pod_created.json")
    kube_api.reply("POST", SECRETS, 201, "secret_created.json")

    # when
    kube_backend.create_pod(plain_pod(credentials=PAYLOAD))

    # then two calls: the pod (no value in it), then its Secret holding the values, owned by the pod's uid
    assert [(r.method, r.path) for r in kube_api.requests] == [("POST", PODS), ("POST", SECRETS)]
    assert TOKEN not in json.dumps(kube_api.requests[0].body)
    secret = kube_api.requests[1].body
    assert (secret["kind"], secret["type"], secret["metadata"]["name"]) == (
        "Secret", "Opaque", "torch-1-master-1a2b3c4d")
    assert secret["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Pod", "name": "torch-1-master-1a2b3c4d", "uid": POD_UID}]
    assert {key: base64.b64decode(value).decode() for key, value in secret["data"].items()} == {
        "env-0": TOKEN, "file-0": AWS}
    assert secret["metadata"]["labels"]["osmo.nvidia.com/task"] == "master"
    assert kubernetes_validate.validate(secret, desired_version=K8S_VERSION, strict=True) == "1.37"


def test_a_secret_left_by_an_earlier_attempt_is_success(kube_api, kube_backend):
    # given: the pod and its Secret exist (a retried dispatch)
    kube_api.reply("POST", PODS, 409, "status_already_exists.json")
    kube_api.reply("GET", f"{PODS}/torch-1-master-1a2b3c4d", 200, "pod_created.json")
    kube_api.reply("POST", SECRETS, 409, "status_already_exists.json")

    # when
    kube_backend.create_pod(plain_pod(credentials=PAYLOAD))

    # then the Secret was asked for once, owned by the existing pod's uid
    assert kube_api.requests[-1].body["metadata"]["ownerReferences"][0]["uid"] == POD_UID
    assert kube_api.pending() == []


def test_a_refused_secret_fails_the_pod_permanently_without_its_values(kube_api, kube_backend, monkeypatch):
    # given
    monkeypatch.setenv("OSMO_K8S_AUTH_RETRIES", "0")
    kube_api.reply("POST", PODS, 201, "pod_created.json")
    kube_api.reply("POST", SECRETS, 403, "status_forbidden.json")

    # when
    with pytest.raises(DispatchPermanentError) as raised:
        kube_backend.create_pod(plain_pod(credentials=PAYLOAD))

    # then
    assert str(raised.value).startswith(f"Kubernetes API create Secret {NS}/torch-1-master-1a2b3c4d: HTTP 403")
    assert TOKEN not in str(raised.value)


def test_a_pod_without_credentials_makes_no_secret_call(kube_api, kube_backend):
    # given
    kube_api.reply("POST", PODS, 201, "pod_created.json")

    # when
    kube_backend.create_pod(plain_pod())

    # then (the fixture fails on any unscripted call)
    assert [(r.method, r.path) for r in kube_api.requests] == [("POST", PODS)]


def test_allowed_volume_mounts_are_host_path_volumes():
    # given a task whose platform allows /data and /var/log (checked at submission)
    pod = plain_pod(host_mounts=(("/data/imagenet", "/datasets", True), ("/var/log", "/host-logs", False)))

    # when
    manifest = build_manifest(pod)

    # then
    assert manifest["spec"]["volumes"] == [{"name": "host-0", "hostPath": {"path": "/data/imagenet"}},
                                           {"name": "host-1", "hostPath": {"path": "/var/log"}}]
    assert manifest["spec"]["containers"][0]["volumeMounts"] == [
        {"name": "host-0", "mountPath": "/datasets", "readOnly": True}, {"name": "host-1", "mountPath": "/host-logs"}]
    assert kubernetes_validate.validate(manifest, desired_version=K8S_VERSION, strict=True) == "1.37"


def test_files_credentials_and_host_mounts_together_are_valid_and_wrapped_by_the_runtime(monkeypatch):
    # given every kind of volume on one pod run through the task runtime
    monkeypatch.setenv("OSMO_RUNTIME_IMAGE", "registry.example/osmo-runtime:1")
    pod = torch_pod(credentials=PAYLOAD, host_mounts=(("/data", "/data", True),), runtime_plan='{"command": ["true"]}')

    # when
    manifest = build_manifest(pod)

    # then
    volumes = [volume["name"] for volume in manifest["spec"]["volumes"]]
    assert volumes == ["osmo-files", "credentials-0", "host-0", "osmo-runtime", "osmo-data"]
    env = [entry["name"] for entry in manifest["spec"]["containers"][0]["env"]]
    assert env == ["HF_TOKEN", "OSMO_TASK_PLAN"]
    assert kubernetes_validate.validate(manifest, desired_version=K8S_VERSION, strict=True) == "1.37"
