"""build_manifest: schema-valid Pod manifests (kubernetes-validate, strict) with valid names and labels."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import kubernetes_validate
import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduler.dispatch.pod.manifest import GPU_RESOURCE, build_manifest, pool_selector
from scheduler.dispatch.pod.naming import kube_pod_name, label_value
from scheduler.dispatch.pod.request import PodRequest
from tests.dispatch.fake_kube import FIXTURES, fixture

# The newest Kubernetes schema shipped with the installed kubernetes-validate (1.37.0 ships up to 1.37).
K8S_VERSION = "1.37.0"

# The API server's own rules (apimachinery validation), written out independently of the module.
DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
GIB = 2**30


def pod_request(**overrides) -> PodRequest:
    values = dict(pod_name="train-1-trainers-worker-0", namespace="osmo-jobs", node_name="node-0001",
                  workflow_id="train-1", group="trainers", task="worker-0", pool="nvl72",
                  image="nvcr.io/nvidia/pytorch:24.05-py3", command=("torchrun",),
                  args=("--nproc-per-node=4", "train.py"), environment={"NCCL_DEBUG": "INFO"}, gpu=4,
                  cpu_millis=16000, memory_bytes=64 * GIB, storage_bytes=100 * GIB)
    values.update(overrides)
    return PodRequest(**values)


REQUESTS = {
    "gpu": pod_request(),
    "cpu-only": pod_request(gpu=0, cpu_millis=1500, memory_bytes=512 * 2**20, storage_bytes=0),
    "no-resources": pod_request(gpu=0, cpu_millis=0, memory_bytes=0, storage_bytes=0, command=(), args=(),
                                environment={}),
    "long-names": pod_request(
        pod_name="Pretrain-LLaMA-70B-with-an-unreasonably-long-workflow-name-42-trainers_group-Worker-0017",
        workflow_id="pretrain-llama-70b-with-an-unreasonably-long-workflow-name-that-keeps-going-42",
        group="trainers group (phase #2) " * 4, task="worker-0017-" + "x" * 80,
        node_name="gb200-rack-07-tray-12.cluster.example.com", pool="nvl72 / east"),
    "odd-characters": pod_request(
        task="décodeur/étape #1 ", group="-leading-and-trailing-", workflow_id="__w__",
        environment={"lower.dotted-name": "x", "WITH SPACE": "y", "ÜNICODE": "ü", "EMPTY": "", "A": "1;rm -rf /",
                     "MULTILINE": "a\nb", "_UNDER": "z"},
        command=("bash", "-c"), args=("echo \"$ÜNICODE\" && exit 3",)),
    "one-gpu-fractional-cpu": pod_request(gpu=1, cpu_millis=250, memory_bytes=1, storage_bytes=1),
}


@pytest.mark.parametrize("name", sorted(REQUESTS))
def test_manifest_is_a_valid_pod_for_the_kubernetes_schema(name):
    # given a pod request
    request = REQUESTS[name]
    # when its manifest is built
    manifest = build_manifest(request)
    # then it validates (strictly: no unknown fields) against the Kubernetes Pod schema
    assert kubernetes_validate.validate(manifest, desired_version=K8S_VERSION, strict=True) == "1.37"
    # and names and label values obey the API server's syntax rules, which the schema does not carry
    metadata = manifest["metadata"]
    assert DNS1123_LABEL.match(metadata["name"]) and len(metadata["name"]) <= 63
    for value in metadata["labels"].values():
        assert LABEL_VALUE.match(value) and len(value) <= 63, value


def test_validation_catches_a_broken_manifest():
    # given a manifest with a misspelt field (guards against a validator that accepts anything)
    manifest = build_manifest(pod_request())
    manifest["spec"]["containers"][0]["imagePullPolicyy"] = "Always"
    # then strict validation rejects it
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(manifest, desired_version=K8S_VERSION, strict=True)


def test_manifest_for_a_gpu_task():
    # when the manifest of a 4-GPU task is built
    manifest = build_manifest(pod_request(environment={"ZED": "1", "ALPHA": "2", "mid": "3"}))
    # then it is one never-restarting pod pinned to its node, labelled, with requests == limits
    assert manifest["apiVersion"] == "v1" and manifest["kind"] == "Pod"
    assert manifest["metadata"]["name"] == "train-1-trainers-worker-0"
    assert manifest["metadata"]["namespace"] == "osmo-jobs"
    assert manifest["metadata"]["labels"] == {
        "osmo.nvidia.com/workflow": "train-1",
        "osmo.nvidia.com/group": "trainers",
        "osmo.nvidia.com/task": "worker-0",
        "osmo.nvidia.com/pool": "nvl72",
        "app.kubernetes.io/managed-by": "osmo",
    }
    spec = manifest["spec"]
    assert spec["restartPolicy"] == "Never"
    assert spec["nodeSelector"] == {"kubernetes.io/hostname": "node-0001"}
    assert spec["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    [container] = spec["containers"]
    assert container["name"] == "task"
    assert container["image"] == "nvcr.io/nvidia/pytorch:24.05-py3"
    assert container["command"] == ["torchrun"]
    assert container["args"] == ["--nproc-per-node=4", "train.py"]
    assert container["env"] == [{"name": "ALPHA", "value": "2"}, {"name": "ZED", "value": "1"},
                                {"name": "mid", "value": "3"}]
    expected = {"cpu": "16", "memory": str(64 * GIB), "ephemeral-storage": str(100 * GIB), GPU_RESOURCE: "4"}
    assert container["resources"] == {"requests": expected, "limits": expected}


def test_manifest_for_a_cpu_only_task():
    # when the task asks for no GPU, fractional CPU and no storage
    manifest = build_manifest(pod_request(gpu=0, cpu_millis=1500, memory_bytes=3 * GIB, storage_bytes=0))
    # then there is no GPU resource nor GPU toleration, CPU is in millicores, no ephemeral storage
    [container] = manifest["spec"]["containers"]
    expected = {"cpu": "1500m", "memory": str(3 * GIB)}
    assert container["resources"] == {"requests": expected, "limits": expected}
    assert "tolerations" not in manifest["spec"]


def test_manifest_without_command_uses_the_image_entrypoint():
    manifest = build_manifest(pod_request(command=(), args=(), environment={}, gpu=0, cpu_millis=0,
                                          memory_bytes=0, storage_bytes=0))
    [container] = manifest["spec"]["containers"]
    assert set(container) == {"name", "image"}


def test_odd_names_are_sanitised_in_labels_and_kept_raw_in_annotations():
    # given names that are not valid label values
    request = REQUESTS["odd-characters"]
    # when the manifest is built
    metadata = build_manifest(request)["metadata"]
    # then labels carry sanitised values and annotations the raw names
    assert metadata["labels"]["osmo.nvidia.com/task"] != request.task
    assert metadata["labels"]["osmo.nvidia.com/group"].startswith("leading-and-trailing-")
    assert metadata["annotations"]["osmo.nvidia.com/task"] == "décodeur/étape #1 "
    assert metadata["annotations"]["osmo.nvidia.com/group"] == "-leading-and-trailing-"
    assert metadata["annotations"]["osmo.nvidia.com/workflow"] == "__w__"
    assert metadata["annotations"]["osmo.nvidia.com/pod-name"] == request.pod_name


def test_an_invalid_pod_name_is_truncated_with_a_hash_deterministically():
    # given two long names differing only at the end, beyond 63 characters
    first = "Pretrain-LLaMA-70B-with-an-unreasonably-long-workflow-name-42-trainers-worker-0001"
    second = first[:-1] + "2"
    # then each maps to a valid, stable, distinct name
    assert kube_pod_name(first) == kube_pod_name(first)
    assert kube_pod_name(first) != kube_pod_name(second)
    assert len(kube_pod_name(first)) <= 63 and DNS1123_LABEL.match(kube_pod_name(first))
    assert kube_pod_name(first).startswith("pretrain-llama-70b-with")
    # and a valid name is kept unchanged
    assert kube_pod_name("train-1-trainers-worker-0") == "train-1-trainers-worker-0"
    assert kube_pod_name("x" * 63) == "x" * 63


def test_manifest_is_deterministic():
    assert build_manifest(REQUESTS["odd-characters"]) == build_manifest(REQUESTS["odd-characters"])


def test_pool_selector():
    assert pool_selector("nvl72") == "app.kubernetes.io/managed-by=osmo,osmo.nvidia.com/pool=nvl72"
    assert re.fullmatch(r"app\.kubernetes\.io/managed-by=osmo,osmo\.nvidia\.com/pool=nvl72-east-[0-9a-f]{8}",
                        pool_selector("nvl72 / east"))


@given(st.text(max_size=200))
def test_label_value_is_always_valid(raw):
    value = label_value(raw)
    assert LABEL_VALUE.match(value) and len(value) <= 63
    if LABEL_VALUE.match(raw) and len(raw) <= 63:
        assert value == raw


@given(st.text(min_size=1, max_size=200))
def test_pod_name_is_always_a_dns_label(raw):
    name = kube_pod_name(raw)
    assert DNS1123_LABEL.match(name) and len(name) <= 63


@given(st.text(max_size=80), st.text(max_size=80))
def test_distinct_raw_values_keep_distinct_labels(first, second):
    if first != second:
        assert label_value(first) != label_value(second)


@pytest.mark.parametrize("name", sorted(path.name for path in FIXTURES.glob("pod_*.json")))
def test_recorded_pod_fixtures_are_valid_api_objects(name):
    # the recorded API answers the fake server plays are themselves valid Pods / PodLists
    body = fixture(name)
    pods = body["items"] if body["kind"] == "PodList" else [body]
    for pod in pods:
        kubernetes_validate.validate(pod, desired_version=K8S_VERSION, strict=True)


def _loaded_with(module: str, roots: tuple[str, ...]) -> str:
    """The modules under ``roots`` a fresh interpreter has loaded after importing ``module``."""
    code = (f"import sys, {module}; "
            f"print(','.join(sorted(m for m in sys.modules if m.split('.')[0] in {roots!r})))")
    repo = Path(__file__).resolve().parents[2]
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          cwd=repo).stdout.strip()


def test_manifests_and_labels_load_without_the_kubernetes_client():
    # given a fresh interpreter
    # when the manifests' module is imported (as the node sync does for the labels)
    loaded = _loaded_with("scheduler.dispatch.pod.manifest", ("kubernetes", "urllib3", "django", "celery"))
    # then neither the Kubernetes client nor a framework came with it
    assert loaded == ""


def test_module_imports_no_framework():
    # the backend is importable (and testable) without Django or Celery
    assert _loaded_with("scheduler.dispatch.kubernetes", ("django", "rest_framework", "celery", "kombu")) == ""
