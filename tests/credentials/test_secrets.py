"""The Kubernetes objects of a task's credentials (credentials.secrets): a Secret and the pod's
references in the API's shapes (kubernetes-validate, strict), no value in the pod spec; the registry
credential's pull secret for an image's registry."""

from __future__ import annotations

import base64
import json

import kubernetes_validate
import pytest

from credentials.secrets import (
    SecretPayload,
    image_registry,
    pull_secret_manifest,
    registry_host,
    task_secret_objects,
)
from credentials.services import credential_set, registry_pull_config

K8S_VERSION = "1.37.0"
POD_OWNER = {"apiVersion": "v1", "kind": "Pod", "name": "w-1-train-0", "uid": "6c5b2a1e-0000-4000-8000-000000000001",
             "controller": True}


def _pod(objects) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "w-1-train-0", "namespace": "osmo-jobs"},
            "spec": {"restartPolicy": "Never", "volumes": objects.volumes,
                     "containers": [{"name": "task", "image": "busybox", "env": objects.env,
                                     "volumeMounts": objects.volume_mounts}]}}


def test_the_secret_and_the_pods_references_are_valid_objects_and_the_pod_holds_no_value():
    # given
    payload = SecretPayload(env={"HF_TOKEN": "hf_secret", "WANDB_API_KEY": "wb_secret"},
                            files={"/etc/s3/access_key": "sk_secret", "/etc/s3/endpoint": "s3://b",
                                   "/root/.netrc-dir/netrc": "machine x"})

    # when
    objects = task_secret_objects(payload, name="w-1-train-0-credentials", namespace="osmo-jobs",
                                  labels={"osmo.workflow": "w-1"}, owner=POD_OWNER)

    # then
    assert kubernetes_validate.validate(objects.manifest, desired_version=K8S_VERSION, strict=True) == "1.37"
    assert kubernetes_validate.validate(_pod(objects), desired_version=K8S_VERSION, strict=True) == "1.37"
    data = {key: base64.b64decode(value).decode() for key, value in objects.manifest["data"].items()}
    assert data == {"env-0": "hf_secret", "env-1": "wb_secret", "file-0": "sk_secret", "file-1": "s3://b",
                    "file-2": "machine x"}
    assert objects.env == [
        {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "w-1-train-0-credentials", "key": "env-0"}}},
        {"name": "WANDB_API_KEY", "valueFrom": {"secretKeyRef": {"name": "w-1-train-0-credentials", "key": "env-1"}}},
    ]
    assert [(mount["mountPath"], volume["secret"]["items"]) for mount, volume in
            zip(objects.volume_mounts, objects.volumes, strict=True)] == [
        ("/etc/s3", [{"key": "file-0", "path": "access_key"}, {"key": "file-1", "path": "endpoint"}]),
        ("/root/.netrc-dir", [{"key": "file-2", "path": "netrc"}]),
    ]
    assert objects.manifest["metadata"]["ownerReferences"] == [POD_OWNER]
    printed = json.dumps(_pod(objects)) + repr(payload) + repr(objects)
    assert not any(secret in printed for secret in ("hf_secret", "wb_secret", "sk_secret", "machine x"))


@pytest.mark.parametrize(("image", "registry"), [
    ("busybox", "docker.io"), ("library/busybox:1", "docker.io"), ("nvcr.io/nvidia/pytorch:24.05-py3", "nvcr.io"),
    ("localhost/x", "localhost"), ("registry.example.com:5000/team/img", "registry.example.com:5000"),
])
def test_the_registry_of_an_image(image, registry):
    # when / then
    assert image_registry(image) == registry


def test_registry_values_are_compared_as_hosts():
    # when / then
    assert [registry_host(text) for text in ("https://nvcr.io/", "NVCR.IO", "index.docker.io", "ghcr.io/org")] == [
        "nvcr.io", "nvcr.io", "docker.io", "ghcr.io"]


@pytest.mark.django_db
def test_the_users_registry_credential_for_the_images_registry_becomes_a_pull_secret(user, other_user):
    # given
    credential_set(owner=user, name="ngc", kind="registry",
                   values={"registry": "https://nvcr.io", "username": "$oauthtoken", "auth": "nvapi-1"})
    credential_set(owner=other_user, name="hub", kind="registry",
                   values={"registry": "docker.io", "username": "bob", "auth": "pw"})

    # when
    config = registry_pull_config(owner=user, image="nvcr.io/nvidia/pytorch:24.05-py3")
    none_for_hub = registry_pull_config(owner=user, image="busybox")

    # then
    assert config is not None and none_for_hub is None
    auths = json.loads(config)["auths"]
    assert auths == {"nvcr.io": {"username": "$oauthtoken", "password": "nvapi-1",
                                 "auth": base64.b64encode(b"$oauthtoken:nvapi-1").decode()}}
    manifest = pull_secret_manifest(config, name="w-1-train-0-pull", namespace="osmo-jobs", labels={})
    assert kubernetes_validate.validate(manifest, desired_version=K8S_VERSION, strict=True) == "1.37"
    assert json.loads(base64.b64decode(manifest["data"][".dockerconfigjson"])) == json.loads(config)
