"""A task's ``credentials`` at dispatch (docs/kubernetes.md, "Credentials"; docs/spec.md, "credentials"):
the values the task names, decrypted from its submitter's credential store into its pod request
(:attr:`PodRequest.credentials`, never in a repr). The Kubernetes backend puts them in a Secret owned by
the pod, the local backend in the sandbox's environment and files; the simulated backend runs nothing
and gets none (no decryption at all). On Kubernetes, a task whose image is on a registry the submitter
holds a registry credential for also gets that credential's ``.dockerconfigjson``
(:attr:`PodRequest.pull_config`): the backend puts it in a pull Secret owned by the pod, named in the
pod's ``imagePullSecrets``. The spec does not name registry credentials: as in OSMO, the image's
registry host picks them.

A task run by the runtime also gets the variables its ``osmo`` command logs in with (``OSMO_URL``,
``OSMO_TOKEN``, and ``OSMO_POOL``, its default pool: :func:`with_api_access`), in the same Secret
(Kubernetes) or plan (local), so the token is never in the pod's spec; a variable the task sets itself
(``environment`` or a credential) is its own.

A credential deleted since the submission, or lacking a key the spec maps a variable to, stops the
gang's dispatch: the gang fails FAILED_BACKEND_ERROR with a message naming the credential and the key,
never a value.
"""

from __future__ import annotations

from dataclasses import replace

from credentials.secrets import SecretPayload, image_registry
from credentials.services import (
    CredentialKeyMissingError,
    CredentialNotFoundError,
    registry_pull_configs,
    task_secret_payload,
)
from osmo.types import User
from scheduler.choices import DispatchBackend
from scheduler.dispatch import PodRequest
from workflows.scheduling.pod.podspec import WorkflowPods
from workflows.scheduling.pod.runtime import task_api_env

#: The backends that run a task's process and so give it its credentials.
CREDENTIAL_BACKENDS = frozenset({DispatchBackend.KUBERNETES, DispatchBackend.LOCAL})


def requests_credentials(requests: dict[int, PodRequest], pods: WorkflowPods, *, backend: str,
                         owner_id: int) -> str:
    """Set the credentials of each request (by task id) whose task names some, on a backend that runs
    tasks, and on Kubernetes each request's image pull configuration; "" when done, else why the gang
    cannot be dispatched. One query for the owner and one per task with credentials (none when no
    task names any), and on Kubernetes one for the owner's registry credentials."""
    if backend not in CREDENTIAL_BACKENDS:
        return ""
    refused = _named_credentials(requests, pods, owner_id)
    if not refused and backend == DispatchBackend.KUBERNETES:
        _pull_configs(requests, owner_id)
    return refused


def _named_credentials(requests: dict[int, PodRequest], pods: WorkflowPods, owner_id: int) -> str:
    wanted = {pk: pods.tasks[request.task].credentials for pk, request in requests.items()
              if request.task in pods.tasks and pods.tasks[request.task].credentials}
    if not wanted:
        return ""
    owner = User.objects.filter(pk=owner_id).first()
    if owner is None:  # the submitter is gone (their workflows are protected, so only a race)
        return "the workflow's submitter no longer exists: their credentials cannot be read"
    for pk, refs in sorted(wanted.items()):
        request = requests[pk]
        try:
            payload = task_secret_payload(owner=owner, refs=refs)
        except CredentialNotFoundError as exc:
            return f"pod {request.pod_name}: credential {exc.details['name']!r} was deleted since the submission"
        except CredentialKeyMissingError as exc:
            problem = exc.details["errors"][0]
            return f"pod {request.pod_name}: {problem['path']}: {problem['message']}"
        requests[pk] = replace(request, credentials=payload)
    return ""


def _pull_configs(requests: dict[int, PodRequest], owner_id: int) -> None:
    """Give each request whose image's registry the owner holds a registry credential for its
    ``.dockerconfigjson``."""
    configs = registry_pull_configs(owner_id=owner_id, images={request.image for request in requests.values()})
    for pk, request in requests.items():
        config = configs.get(image_registry(request.image))
        if config:
            requests[pk] = replace(request, pull_config=config)


def with_api_access(request: PodRequest, task_id: int) -> SecretPayload:
    """The request's secret variables with the task's ``osmo`` login added (``OSMO_URL``, ``OSMO_TOKEN``,
    ``OSMO_POOL``), each unless the task sets that variable itself."""
    own = {*request.environment, *request.credentials.env}
    added = {name: value for name, value in task_api_env(task_id, request.pod_name, request.pool).items()
             if name not in own}
    if not added:
        return request.credentials
    return replace(request.credentials, env={**request.credentials.env, **added})


__all__ = ["CREDENTIAL_BACKENDS", "requests_credentials", "with_api_access"]
