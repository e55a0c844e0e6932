"""The backend-neutral pod: :class:`PodRequest`, everything a backend needs to run one task as a pod
(built by :mod:`workflows.scheduling.pod.request`, sent through :class:`scheduler.dispatch.base.PodBackend`).
Imports nothing from Django."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from credentials.secrets import SecretPayload


@dataclass(frozen=True, slots=True)
class PodRequest:
    """Everything needed to run one task as a pod on its chosen node."""

    pod_name: str
    namespace: str
    node_name: str
    # The workflow's global id (unique across users; ``workflow_id`` as users see it is unique per
    # owner only, docs/design.md §7, "Workflow ids"): labels, selectors, Service names and local
    # folders are built from it.
    workflow_id: str
    group: str
    task: str
    pool: str
    image: str
    # The workflow's and its submitter's database ids: the local backend's sandbox user and group.
    workflow_pk: int = 0
    owner_pk: int = 0
    command: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    environment: Mapping[str, str] = field(default_factory=dict)
    gpu: int = 0
    cpu_millis: int = 0
    memory_bytes: int = 0
    storage_bytes: int = 0
    dispatched_at: datetime | None = None  # set once the pod was created (simulated backend uses it)
    sim_seconds: float = 10.0  # simulated backend: run time (from the pool, overridable per task)
    # The task runtime's plan (``runtime.TaskPlan`` as JSON; docs/runtime.md): set, the backend runs the
    # task through the runtime (local: always; Kubernetes: an init container copies it into the pod).
    runtime_plan: str = ""
    workflow_label: str = ""  # the workflow's id as its owner sees it (``{{workflow_id}}``, the simulated log)
    # OSMO's pod fields (docs/kubernetes.md, "Objects per workflow"). Tokens are already resolved here.
    hostname: str = ""  # the pod's host name (a DNS label), unique in its group
    subdomain: str = ""  # the group's headless Service; set, the backend makes sure the Service exists
    files: tuple[tuple[str, str], ...] = ()  # (path, contents) of the task's ``files`` (a ConfigMap)
    labels: Mapping[str, str] = field(default_factory=dict)  # the workflow's ``labels``
    node_selector: Mapping[str, str] = field(default_factory=dict)  # the task's platform's node labels
    tolerations: tuple[Mapping[str, Any], ...] = ()  # the task's platform's tolerations
    privileged: bool = False  # allowed by the platform (checked at submission)
    host_network: bool = False  # allowed by the platform (checked at submission)
    # ``volumeMounts`` the platform allows: (host path, container path, read only), as hostPath volumes.
    host_mounts: tuple[tuple[str, str, bool], ...] = ()
    # The decrypted values of the task's ``credentials`` (a Secret on Kubernetes); never in a repr.
    credentials: SecretPayload = field(default_factory=SecretPayload, repr=False)
    # The ``.dockerconfigjson`` of the submitter's registry credential for the image's registry, or ""
    # (Kubernetes: a pull Secret owned by the pod, in ``imagePullSecrets``); never in a repr.
    pull_config: str = field(default="", repr=False)
    # The pool's backend's ``schedulerName`` for the pod ("" : the cluster's default scheduler).
    scheduler_name: str = ""
