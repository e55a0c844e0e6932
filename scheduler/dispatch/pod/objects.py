"""The pod builder's parts for a task's credentials and host mounts (docs/kubernetes.md, "Credentials"
and "Objects per workflow"), beside :mod:`scheduler.dispatch.kubernetes`, which calls them. Pure: no
client calls, no Django.

- Credentials: the task's decrypted values (:attr:`PodRequest.credentials`) go into one Opaque Secret
  named as the pod and owned by it (the garbage collector deletes it with the pod, as the files'
  ConfigMap); the pod refers to it by ``secretKeyRef`` environment entries and read-only ``secret``
  volumes (:func:`credentials.secrets.task_secret_objects`). A variable set both by ``environment``
  and by a credential takes the credential's value. No value is ever in the pod manifest.
- Registry credentials: when the submitter holds a registry credential for the image's registry
  (:attr:`PodRequest.pull_config`), a ``kubernetes.io/dockerconfigjson`` Secret named as the pod with
  ``-pull`` appended, owned by it, named in the pod's ``imagePullSecrets``
  (:func:`credentials.secrets.pull_secret_manifest`).
- Host mounts: each ``volumeMounts`` item the task's platform allows (:attr:`PodRequest.host_mounts`,
  checked at submission) is a ``hostPath`` volume mounted at its container path.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from credentials.secrets import SecretObjects, pull_secret_manifest, task_secret_objects
from scheduler.dispatch.pod.naming import kube_pod_name
from scheduler.dispatch.pod.request import PodRequest

HOST_VOLUME_PREFIX = "host-"


def credentials_objects(pod: PodRequest, *, labels: Mapping[str, str],
                        owner: Mapping[str, Any] | None = None) -> SecretObjects | None:
    """The task's credentials Secret and the pod's references to it, or None for a task without
    credentials. ``owner``: the pod's ``ownerReferences`` item (known once the pod exists)."""
    if not pod.credentials:
        return None
    return task_secret_objects(pod.credentials, name=kube_pod_name(pod.pod_name), namespace=pod.namespace,
                               labels=labels, owner=owner)


def pull_secret_name(pod: PodRequest) -> str:
    """The name of the pod's image pull Secret."""
    return f"{kube_pod_name(pod.pod_name)}-pull"


def pull_secret(pod: PodRequest, *, labels: Mapping[str, str],
                owner: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    """The pod's image pull Secret, or None when the submitter has no registry credential for its image."""
    if not pod.pull_config:
        return None
    return pull_secret_manifest(pod.pull_config, name=pull_secret_name(pod), namespace=pod.namespace,
                                labels=labels, owner=owner)


def container_env(pod: PodRequest, secret: SecretObjects | None) -> list[dict[str, Any]]:
    """The task container's ``env``: its environment's values, then the credentials' references (a
    variable in both: the credential's)."""
    from_secret = {entry["name"] for entry in secret.env} if secret is not None else set()
    env: list[dict[str, Any]] = [{"name": str(name), "value": str(value)}
                                 for name, value in sorted(pod.environment.items(), key=lambda item: str(item[0]))
                                 if str(name) not in from_secret]
    return env + (list(secret.env) if secret is not None else [])


def host_mount_objects(pod: PodRequest) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The ``hostPath`` volumes of the task's allowed ``volumeMounts`` and the container's mounts of them."""
    volumes, mounts = [], []
    for index, (host_path, container_path, read_only) in enumerate(pod.host_mounts):
        name = f"{HOST_VOLUME_PREFIX}{index}"
        volumes.append({"name": name, "hostPath": {"path": host_path}})
        mount: dict[str, Any] = {"name": name, "mountPath": container_path}
        if read_only:
            mount["readOnly"] = True
        mounts.append(mount)
    return volumes, mounts


__all__ = ["container_env", "credentials_objects", "host_mount_objects", "pull_secret", "pull_secret_name"]
