"""OSMO's pod fields on Kubernetes (docs/kubernetes.md, "Objects per workflow"): the group's headless
Service and the pods' host names that ``{{host:<task>}}`` resolves to, the files' ConfigMap, labels and
platform fields; manifests valid for the schema (strict), calls at the HTTP boundary in the API's shapes."""

from __future__ import annotations

import copy

import kubernetes_validate
import pytest

from scheduler.dispatch import DispatchPermanentError
from scheduler.dispatch.pod.manifest import build_files_configmap, build_manifest, build_service
from scheduler.dispatch.pod.naming import group_service_name
from scheduler.dispatch.pod.request import PodRequest
from tests.dispatch.fake_kube import fixture
from tests.dispatch.test_kubernetes_manifest import K8S_VERSION

NS = "osmo-jobs"
PODS = f"/api/v1/namespaces/{NS}/pods"
CONFIGMAPS = f"/api/v1/namespaces/{NS}/configmaps"
SERVICES = f"/api/v1/namespaces/{NS}/services"
SERVICE = group_service_name("torch-1", "training")
MASTER = f"master.{SERVICE}.{NS}.svc"
POD_UID = "5b0c2c86-3c1f-4a7e-9f51-2f0c7d1e8a10"  # the uid in pod_created.json
LAUNCH = f"torchrun --master_addr {MASTER} --save-to /osmo/output/ckpt\n"


def torch_pod(task: str = "master", **overrides) -> PodRequest:
    """A rank of the two-node torchrun example as dispatch builds it (tokens resolved)."""
    values = dict(pod_name=f"torch-1-{task}-1a2b3c4d", namespace=NS, node_name="node-0001", workflow_id="torch-1",
                  group="training", task=task, pool="nvl72", image="nvcr.io/nvidia/pytorch:24.03-py3",
                  command=("bash",), args=("/opt/train/launch.sh",), gpu=4, hostname=task, subdomain=SERVICE,
                  files=(("/opt/train/launch.sh", LAUNCH),), labels={"team": "vision", "cost-center": "ml-42"},
                  node_selector={"nvidia.com/gpu.product": "GB200"},
                  tolerations=({"key": "dedicated", "operator": "Equal", "value": "training", "effect": "NoSchedule"},),
                  privileged=True, host_network=True)
    values.update(overrides)
    return PodRequest(**values)


def test_every_object_of_a_torchrun_pod_is_valid_for_the_kubernetes_schema():
    # given a rank with files, a host name in its group's Service, labels and a platform
    pod = torch_pod()

    # when its objects are built
    objects = [build_manifest(pod), build_files_configmap(pod, owner_uid=POD_UID),
               build_service(pod, owner_uid=POD_UID)]

    # then each is valid, strictly (no unknown field anywhere)
    assert [kubernetes_validate.validate(o, desired_version=K8S_VERSION, strict=True) for o in objects] == ["1.37"] * 3


def test_the_pod_has_its_host_name_in_the_groups_service_its_files_labels_and_platform():
    # given
    pod = torch_pod()

    # when
    manifest = build_manifest(pod)

    # then
    spec = manifest["spec"]
    assert (spec["hostname"], spec["subdomain"]) == ("master", SERVICE)
    assert spec["volumes"] == [{"name": "osmo-files", "configMap": {"name": "torch-1-master-1a2b3c4d",
                                                                    "defaultMode": 0o755}}]
    container = spec["containers"][0]
    assert container["volumeMounts"] == [{"name": "osmo-files", "mountPath": "/opt/train/launch.sh",
                                          "subPath": "file-0", "readOnly": True}]
    assert container["securityContext"] == {"privileged": True}
    assert (spec["hostNetwork"], spec["dnsPolicy"]) == (True, "ClusterFirstWithHostNet")
    assert spec["nodeSelector"] == {"nvidia.com/gpu.product": "GB200", "kubernetes.io/hostname": "node-0001"}
    assert spec["tolerations"] == [
        {"key": "dedicated", "operator": "Equal", "value": "training", "effect": "NoSchedule"},
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    labels = manifest["metadata"]["labels"]
    assert (labels["team"], labels["cost-center"], labels["osmo.nvidia.com/task"]) == ("vision", "ml-42", "master")


def test_a_workflow_label_cannot_override_the_services_own_labels():
    # given a workflow label with one of the service's keys
    pod = torch_pod(labels={"osmo.nvidia.com/pool": "other", "team": "vision"})

    # when
    labels = build_manifest(pod)["metadata"]["labels"]

    # then the pool label stays the pool's (the service lists and deletes by it)
    assert (labels["osmo.nvidia.com/pool"], labels["team"]) == ("nvl72", "vision")


def test_the_service_is_headless_and_selects_exactly_the_groups_pods():
    # given
    pod = torch_pod()

    # when
    service = build_service(pod, owner_uid=POD_UID)

    # then
    assert service is not None
    assert service["spec"] == {"clusterIP": "None", "publishNotReadyAddresses": True, "selector": {
        "team": "vision", "cost-center": "ml-42", "osmo.nvidia.com/workflow": "torch-1",
        "osmo.nvidia.com/group": "training", "osmo.nvidia.com/pool": "nvl72", "app.kubernetes.io/managed-by": "osmo"}}
    pod_labels = build_manifest(pod)["metadata"]["labels"]
    assert all(pod_labels[key] == value for key, value in service["spec"]["selector"].items())
    assert service["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Pod", "name": "torch-1-master-1a2b3c4d", "uid": POD_UID}]


def test_a_pod_without_files_or_host_name_has_no_configmap_and_no_service():
    # given
    pod = torch_pod(files=(), hostname="", subdomain="")

    # when / then
    assert build_files_configmap(pod, owner_uid=POD_UID) is None
    assert build_service(pod, owner_uid=POD_UID) is None
    spec = build_manifest(pod)["spec"]
    assert "volumes" not in spec and "hostname" not in spec and "subdomain" not in spec


def test_the_first_pod_of_a_group_creates_its_configmap_and_the_service_both_owned_by_it(kube_api, kube_backend):
    # given: the Service does not exist yet
    kube_api.reply("POST", PODS, 201, "pod_created.json")
    kube_api.reply("POST", CONFIGMAPS, 201, "configmap_created.json")
    kube_api.reply("PATCH", f"{SERVICES}/{SERVICE}", 404, "status_service_not_found.json")
    kube_api.reply("POST", SERVICES, 201, "service_created.json")

    # when
    kube_backend.create_pod(torch_pod())

    # then: the pod, its files (resolved), then the Service, each owned by the new pod's uid
    assert [(r.method, r.path) for r in kube_api.requests] == [
        ("POST", PODS), ("POST", CONFIGMAPS), ("PATCH", f"{SERVICES}/{SERVICE}"), ("POST", SERVICES)]
    owner = [{"apiVersion": "v1", "kind": "Pod", "name": "torch-1-master-1a2b3c4d", "uid": POD_UID}]
    configmap = kube_api.requests[1].body
    assert (configmap["data"], configmap["metadata"]["ownerReferences"]) == ({"file-0": LAUNCH}, owner)
    patch = kube_api.requests[2]
    assert patch.headers["content-type"] == "application/strategic-merge-patch+json"
    assert patch.body == {"metadata": {"ownerReferences": owner}}
    service = kube_api.requests[3].body
    assert (service["kind"], service["metadata"]["name"], service["spec"]["clusterIP"]) == ("Service", SERVICE, "None")
    assert service["metadata"]["ownerReferences"] == owner


def test_the_next_pod_of_the_group_only_adds_itself_to_the_services_owners(kube_api, kube_backend):
    # given: the Service exists (the master's); the worker's pod is created with its own uid
    created = copy.deepcopy(fixture("pod_created.json"))
    created["metadata"].update(name="torch-1-worker-1-1a2b3c4d", uid="0e6d1c2b-7a9f-4b3e-8d51-9c2a4f6e1b03")
    kube_api.reply("POST", PODS, 201, created)
    kube_api.reply("POST", CONFIGMAPS, 201, "configmap_created.json")
    kube_api.reply("PATCH", f"{SERVICES}/{SERVICE}", 200, "service_created.json")

    # when
    kube_backend.create_pod(torch_pod("worker-1"))

    # then: one PATCH, no Service created again
    assert [(r.method, r.path) for r in kube_api.requests] == [
        ("POST", PODS), ("POST", CONFIGMAPS), ("PATCH", f"{SERVICES}/{SERVICE}")]
    assert kube_api.requests[2].body == {"metadata": {"ownerReferences": [
        {"apiVersion": "v1", "kind": "Pod", "name": "torch-1-worker-1-1a2b3c4d",
         "uid": "0e6d1c2b-7a9f-4b3e-8d51-9c2a4f6e1b03"}]}}


def test_a_pod_created_by_an_earlier_attempt_reads_its_uid_for_the_objects_it_owns(kube_api, kube_backend):
    # given: the pod exists (a retry), its ConfigMap too, the Service not yet
    kube_api.reply("POST", PODS, 409, "status_already_exists.json")
    kube_api.reply("GET", f"{PODS}/torch-1-master-1a2b3c4d", 200, "pod_created.json")
    kube_api.reply("POST", CONFIGMAPS, 409, "status_already_exists.json")
    kube_api.reply("PATCH", f"{SERVICES}/{SERVICE}", 404, "status_service_not_found.json")
    kube_api.reply("POST", SERVICES, 201, "service_created.json")

    # when
    kube_backend.create_pod(torch_pod())

    # then the Service is owned by the existing pod's uid
    assert kube_api.requests[-1].body["metadata"]["ownerReferences"][0]["uid"] == POD_UID
    assert kube_api.pending() == []


def test_a_pod_without_files_or_host_name_costs_one_call(kube_api, kube_backend):
    # given
    kube_api.reply("POST", PODS, 201, "pod_created.json")

    # when
    kube_backend.create_pod(torch_pod(files=(), hostname="", subdomain=""))

    # then no ConfigMap or Service call was made (the fixture fails on any unscripted one)
    assert [(r.method, r.path) for r in kube_api.requests] == [("POST", PODS)]


@pytest.mark.parametrize("status", [403, 422])
def test_a_refused_configmap_fails_the_pod_permanently(kube_api, kube_backend, status, monkeypatch):
    # given
    monkeypatch.setenv("OSMO_K8S_AUTH_RETRIES", "0")
    kube_api.reply("POST", PODS, 201, "pod_created.json")
    kube_api.reply("POST", CONFIGMAPS, status, "status_forbidden.json" if status == 403 else "status_invalid.json")

    # when / then
    with pytest.raises(DispatchPermanentError, match=f"create ConfigMap {NS}/torch-1-master-1a2b3c4d: HTTP {status}"):
        kube_backend.create_pod(torch_pod(hostname="", subdomain=""))
