"""A task's ``credentials`` at dispatch (docs/kubernetes.md, "Credentials"; docs/spec.md, "credentials"):
the values the task names, decrypted from its submitter's credential store into its pod request
(:attr:`PodRequest.credentials`, never in a repr). The Kubernetes backend puts them in a Secret owned by
the pod, the local backend in the sandbox's environment and files; the simulated backend runs nothing
and gets none (no decryption at all).

A credential deleted since the submission, or lacking a key the spec maps a variable to, stops the
gang's dispatch: the gang fails FAILED_BACKEND_ERROR with a message naming the credential and the key,
never a value.
"""

from __future__ import annotations

from dataclasses import replace

from credentials.services import CredentialKeyMissingError, CredentialNotFoundError, task_secret_payload
from osmo.types import User
from scheduler.choices import DispatchBackend
from scheduler.dispatch import PodRequest
from workflows.scheduling.podspec import WorkflowPods

#: The backends that run a task's process and so give it its credentials.
CREDENTIAL_BACKENDS = frozenset({DispatchBackend.KUBERNETES, DispatchBackend.LOCAL})


def requests_credentials(requests: dict[int, PodRequest], pods: WorkflowPods, *, backend: str,
                         owner_id: int) -> str:
    """Set the credentials of each request (by task id) whose task names some, on a backend that runs
    tasks; "" when done, else why the gang cannot be dispatched. One query for the owner and one per
    task with credentials; none when no task names any."""
    if backend not in CREDENTIAL_BACKENDS:
        return ""
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


__all__ = ["CREDENTIAL_BACKENDS", "requests_credentials"]
