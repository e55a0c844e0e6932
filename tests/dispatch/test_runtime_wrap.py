"""The runtime's pod wrapping (docs/runtime.md): init container copying the runtime into a shared
emptyDir, the task container's command replaced, the plan in its environment; rendered manifests checked
with kubernetes-validate (strict), and the runtime's result read back from the termination message."""

from __future__ import annotations

import json

import kubernetes_validate
import pytest
from kubernetes import client as k8s_client

from runtime import TaskPlan
from scheduler.dispatch.base import DispatchPermanentError
from scheduler.dispatch.k8s_status import pod_state
from scheduler.dispatch.pod.manifest import build_manifest
from scheduler.dispatch.pod.runtime_wrap import result_from_message
from tests.dispatch.test_kubernetes_manifest import K8S_VERSION, pod_request

PLAN = TaskPlan(command=("python", "train.py"), args=("--epochs", "1"), artifact_url="s3://bucket/osmo/wf/t")


def test_a_task_with_a_plan_runs_through_the_runtime_copied_by_an_init_container(monkeypatch):
    # given
    monkeypatch.setenv("OSMO_RUNTIME_IMAGE", "registry.example.com/osmo/runtime:1.0")
    pod = pod_request(runtime_plan=PLAN.to_json())

    # when
    manifest = build_manifest(pod)

    # then
    assert kubernetes_validate.validate(manifest, desired_version=K8S_VERSION, strict=True) == "1.37"
    spec = manifest["spec"]
    assert spec["initContainers"] == [{
        "name": "osmo-runtime-init", "image": "registry.example.com/osmo/runtime:1.0",
        "command": ["cp", "-a", "/opt/osmo-runtime/.", "/osmo/bin/"],
        "volumeMounts": [{"name": "osmo-runtime", "mountPath": "/osmo/bin"}]}]
    assert spec["volumes"] == [{"name": "osmo-runtime", "emptyDir": {}}, {"name": "osmo-data", "emptyDir": {}}]
    [task] = spec["containers"]
    assert task["image"] == "nvcr.io/nvidia/pytorch:24.05-py3"
    assert task["command"] == ["/osmo/bin/osmo-runtime"]
    assert "args" not in task
    assert task["env"] == [{"name": "NCCL_DEBUG", "value": "INFO"}, {"name": "OSMO_TASK_PLAN", "value": PLAN.to_json()}]
    assert TaskPlan.from_json(task["env"][-1]["value"]) == PLAN
    assert task["volumeMounts"] == [
        {"name": "osmo-runtime", "mountPath": "/osmo/bin", "readOnly": True},
        {"name": "osmo-data", "mountPath": "/osmo/output", "subPath": "output"},
        {"name": "osmo-data", "mountPath": "/osmo/input", "subPath": "input"}]
    assert task["resources"] == build_manifest(pod_request())["spec"]["containers"][0]["resources"]


def test_a_task_without_a_plan_is_not_wrapped(monkeypatch):
    # given
    monkeypatch.setenv("OSMO_RUNTIME_IMAGE", "registry.example.com/osmo/runtime:1.0")

    # when
    manifest = build_manifest(pod_request())

    # then
    assert "initContainers" not in manifest["spec"]
    assert manifest["spec"]["containers"][0]["command"] == ["torchrun"]


def test_a_plan_without_a_runtime_image_is_refused(monkeypatch):
    # given
    monkeypatch.delenv("OSMO_RUNTIME_IMAGE", raising=False)

    # when / then
    with pytest.raises(DispatchPermanentError, match="OSMO_RUNTIME_IMAGE is not set"):
        build_manifest(pod_request(runtime_plan=PLAN.to_json()))


def test_the_runtimes_result_is_the_failed_pods_code_and_message():
    # given a pod whose task container terminated with the runtime's upload failure as its message
    message = json.dumps({"exit_code": 2012, "command_exit_code": 0,
                          "message": "upload failed: s3://b/o: AccessDenied (the command exited with code 0)"})
    terminated = k8s_client.V1ContainerStateTerminated(exit_code=255, reason="Error", message=message)
    pod = k8s_client.V1Pod(status=k8s_client.V1PodStatus(phase="Failed", container_statuses=[
        k8s_client.V1ContainerStatus(name="task", image="x", image_id="", ready=False, restart_count=0,
                                     state=k8s_client.V1ContainerState(terminated=terminated))]))

    # when
    state = pod_state(pod, dispatched_at=None, now=None, pending_timeout_s=600)  # type: ignore[arg-type]

    # then
    assert (state.phase, state.exit_code) == ("Failed", 2012)
    assert state.message == "Error: upload failed: s3://b/o: AccessDenied (the command exited with code 0)"


def test_a_plain_termination_message_is_not_a_result():
    assert result_from_message("OOMKilled") is None
    assert result_from_message('{"exit_code": "x"}') is None
    assert result_from_message('{"exit_code": 2010, "message": "m"}') == (2010, "m")
