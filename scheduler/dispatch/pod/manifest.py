"""What the ``kubernetes`` backend sends: the labels its objects carry, the selectors that find them, and
the Pod, ConfigMap and Service manifests of one task (docs/design.md §6). Pure dicts, JSON-ready; same
request, same manifest.

Apart from :mod:`scheduler.dispatch.kubernetes` (which sends them) so that the labels and the manifests
can be read without loading the Kubernetes client: the node sync names the service's pods by these
labels, and tests validate the manifests against the API's schema.
"""

from __future__ import annotations

from typing import Any

from scheduler.dispatch.base import DispatchPermanentError
from scheduler.dispatch.pod.naming import kube_pod_name, label_value
from scheduler.dispatch.pod.objects import container_env, credentials_objects, host_mount_objects, pull_secret_name
from scheduler.dispatch.pod.request import PodRequest
from scheduler.dispatch.pod.runtime_wrap import RUNTIME_IMAGE_ENV, runtime_image, wrap_with_runtime
from scheduler.resources import RESOURCES

CONTAINER_NAME = "task"  # the task's container in its pod

# ------------------------------------------------------------------------------------------------
# Labels and annotations (the lead and docs/kubernetes.md rely on these exact keys)
# ------------------------------------------------------------------------------------------------
LABEL_PREFIX = "osmo.nvidia.com"
LABEL_WORKFLOW = f"{LABEL_PREFIX}/workflow"
LABEL_GROUP = f"{LABEL_PREFIX}/group"
LABEL_TASK = f"{LABEL_PREFIX}/task"
LABEL_POOL = f"{LABEL_PREFIX}/pool"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGED_BY = "osmo"
NODE_SELECTOR_KEY = "kubernetes.io/hostname"
GPU_RESOURCE = "nvidia.com/gpu"


def pool_selector(pool: str) -> str:
    """The label selector listing the pods this service created for ``pool``."""
    return f"{LABEL_MANAGED_BY}={MANAGED_BY},{LABEL_POOL}={label_value(pool)}"


def workflow_selector(*, pool: str, workflow_id: str) -> str:
    """The label selector of one workflow's pods (every pod carries its pool and workflow labels)."""
    return f"{pool_selector(pool)},{LABEL_WORKFLOW}={label_value(workflow_id)}"


def gang_selector(*, pool: str, workflow_id: str, group: str) -> str:
    """The label selector of one gang's pods (its workflow's, narrowed by the group label)."""
    return f"{workflow_selector(pool=pool, workflow_id=workflow_id)},{LABEL_GROUP}={label_value(group)}"


def _resources(pod: PodRequest) -> dict[str, str]:
    """The pod's requests (and limits) by Kubernetes resource name: whole cores or millicores, the rest as
    plain integers (devices, bytes); a resource it does not request is left out."""
    quantities: dict[str, str] = {}
    for resource in RESOURCES:
        amount = int(getattr(pod, resource.amount_field))
        if amount <= 0:
            continue
        if resource.kind == "cpu":
            quantities[resource.kubernetes_name] = str(amount // 1000) if amount % 1000 == 0 else f"{amount}m"
        else:
            quantities[resource.kubernetes_name] = str(amount)
    return quantities


FILES_VOLUME = "osmo-files"
FILE_MODE = 0o755  # OSMO's files are mostly scripts the task runs


def _labels(pod: PodRequest) -> dict[str, str]:
    """The workflow's own labels (validated at submission), then the service's, which win."""
    return {**{str(k): str(v) for k, v in pod.labels.items()},
            LABEL_WORKFLOW: label_value(pod.workflow_id),
            LABEL_GROUP: label_value(pod.group),
            LABEL_TASK: label_value(pod.task),
            LABEL_POOL: label_value(pod.pool),
            LABEL_MANAGED_BY: MANAGED_BY}


def _group_labels(pod: PodRequest) -> dict[str, str]:
    """The labels every pod of the pod's group carries (the Service's selector)."""
    labels = _labels(pod)
    labels.pop(LABEL_TASK)
    return labels


def _owner(pod: PodRequest, uid: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "name": kube_pod_name(pod.pod_name), "uid": uid}


def build_files_configmap(pod: PodRequest, *, owner_uid: str | None = None) -> dict[str, Any] | None:
    """The ConfigMap holding the task's ``files`` (named as its pod, owned by it: the garbage collector
    deletes it with the pod), or None for a task without files."""
    if not pod.files:
        return None
    metadata: dict[str, Any] = {"name": kube_pod_name(pod.pod_name), "namespace": pod.namespace,
                                "labels": _labels(pod)}
    if owner_uid:
        metadata["ownerReferences"] = [_owner(pod, owner_uid)]
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata,
            "data": {f"file-{index}": contents for index, (_path, contents) in enumerate(pod.files)}}


def build_service(pod: PodRequest, *, owner_uid: str | None = None) -> dict[str, Any] | None:
    """The group's headless Service (``clusterIP: None``, selecting the group's pods), which gives each
    pod with ``hostname``/``subdomain`` a DNS name; None for a pod without a subdomain. Owned by the
    group's pods: the garbage collector deletes it once the last of them is gone."""
    if not pod.subdomain:
        return None
    metadata: dict[str, Any] = {"name": pod.subdomain, "namespace": pod.namespace, "labels": _group_labels(pod),
                                "annotations": {LABEL_WORKFLOW: str(pod.workflow_id), LABEL_GROUP: str(pod.group)}}
    if owner_uid:
        metadata["ownerReferences"] = [_owner(pod, owner_uid)]
    return {"apiVersion": "v1", "kind": "Service", "metadata": metadata,
            "spec": {"clusterIP": "None", "selector": _group_labels(pod), "publishNotReadyAddresses": True}}


def build_manifest(pod: PodRequest) -> dict[str, Any]:
    """The Pod manifest (a plain dict, JSON-ready) for one task. Pure: same request, same manifest."""
    labels = _labels(pod)
    annotations = {
        LABEL_WORKFLOW: str(pod.workflow_id),
        LABEL_GROUP: str(pod.group),
        LABEL_TASK: str(pod.task),
        LABEL_POOL: str(pod.pool),
        f"{LABEL_PREFIX}/pod-name": pod.pod_name,
    }
    container: dict[str, Any] = {"name": CONTAINER_NAME, "image": pod.image}
    if pod.command:
        container["command"] = [str(part) for part in pod.command]
    if pod.args:
        container["args"] = [str(part) for part in pod.args]
    secret = credentials_objects(pod, labels=labels)
    env = container_env(pod, secret)
    if env:
        container["env"] = env
    quantities = _resources(pod)
    if quantities:
        container["resources"] = {"requests": dict(quantities), "limits": dict(quantities)}
    if pod.privileged:
        container["securityContext"] = {"privileged": True}
    host_volumes, host_mounts = host_mount_objects(pod)
    mounts = [{"name": FILES_VOLUME, "mountPath": path, "subPath": f"file-{index}", "readOnly": True}
              for index, (path, _contents) in enumerate(pod.files)]
    mounts += (secret.volume_mounts if secret is not None else []) + host_mounts
    if mounts:
        container["volumeMounts"] = mounts
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "nodeSelector": {**{str(k): str(v) for k, v in pod.node_selector.items()}, NODE_SELECTOR_KEY: pod.node_name},
        "automountServiceAccountToken": False,
        "containers": [container],
    }
    tolerations = [dict(toleration) for toleration in pod.tolerations]
    if pod.gpu > 0:
        tolerations.append({"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"})
    if tolerations:
        spec["tolerations"] = tolerations
    if pod.scheduler_name:
        spec["schedulerName"] = pod.scheduler_name
    if pod.hostname:
        spec["hostname"] = pod.hostname
    if pod.subdomain:
        spec["subdomain"] = pod.subdomain
    if pod.pull_config:
        spec["imagePullSecrets"] = [{"name": pull_secret_name(pod)}]
    if pod.host_network:
        spec["hostNetwork"] = True
        spec["dnsPolicy"] = "ClusterFirstWithHostNet"  # the group's names still resolve
    volumes = [{"name": FILES_VOLUME, "configMap": {"name": kube_pod_name(pod.pod_name), "defaultMode": FILE_MODE}}
               ] if pod.files else []
    volumes += (secret.volumes if secret is not None else []) + host_volumes
    if volumes:
        spec["volumes"] = volumes
    manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": kube_pod_name(pod.pod_name),
            "namespace": pod.namespace,
            "labels": labels,
            "annotations": annotations,
        },
        "spec": spec,
    }
    if pod.runtime_plan:  # run through the task runtime (docs/runtime.md)
        image = runtime_image()
        if not image:
            raise DispatchPermanentError(f"pod {pod.pod_name} has a runtime plan but {RUNTIME_IMAGE_ENV} is not set")
        manifest = wrap_with_runtime(manifest, plan=pod.runtime_plan, image=image, container_name=CONTAINER_NAME)
    return manifest
