"""Errors of the workflows app, each with its API status and code."""

from __future__ import annotations

from osmo.errors import ConflictError, NotFoundError, OsmoError
from workflows.lifecycle.rules import TERMINAL


class WorkflowSpecInvalidError(OsmoError):
    """The spec failed validation; ``details.errors`` lists every problem with its path."""

    http_status = 400
    code = "spec_invalid"
    default_message = "Workflow spec is invalid."

    def __init__(self, errors: list[dict[str, str]], message: str | None = None) -> None:
        super().__init__(message, details={"errors": errors})


class PoolNotFoundError(OsmoError):
    http_status = 400
    code = "pool_not_found"

    def __init__(self, name: str, available: list[str]) -> None:
        message = f"Pool {name!r} does not exist. Available pools: {', '.join(available) or 'none'}."
        super().__init__(message, details={"errors": [{"path": "pool", "message": message}]})


class PoolRequiredError(OsmoError):
    """Neither the request nor the spec (``workflow.pool``) names a pool."""

    http_status = 400
    code = "pool_required"

    def __init__(self) -> None:
        message = "No pool given: name one in the request (pool, --pool) or in the spec (workflow.pool)."
        super().__init__(message, details={"errors": [{"path": "pool", "message": message}]})


class WorkflowNotFoundError(NotFoundError):
    default_message = "Workflow not found."


class WorkflowAmbiguousError(ConflictError):
    """Several workflows the caller may see (none of them the caller's own) have the id asked for:
    ids count per owner (docs/design.md §7, "Workflow ids"). ``?user=<owner>`` picks one."""

    code = "workflow_ambiguous"

    def __init__(self, workflow_id: str, owners: list[str]) -> None:
        message = (f"Several workflows you can see have the id {workflow_id!r} (owners: {', '.join(owners)}): "
                   "name the owner with ?user=<owner> (osmo CLI: <owner>/<id>).")
        super().__init__(message, details={"workflow": workflow_id, "owners": owners,
                                           "errors": [{"path": "user", "message": message}]})


class WorkflowNotCancellableError(ConflictError):
    code = "not_cancellable"

    def __init__(self, workflow_id: str, status: str) -> None:
        super().__init__(f"Workflow {workflow_id} is {status} and can no longer be cancelled.",
                         details={"workflow_id": workflow_id, "status": status})


class IdempotencyKeyReusedError(OsmoError):
    """An ``Idempotency-Key`` already used by this user for a different request."""

    http_status = 422
    code = "idempotency_key_reused"

    def __init__(self, key: str, workflow_id: str) -> None:
        super().__init__(
            f"Idempotency-Key {key!r} was already used with a different request (workflow {workflow_id}).",
            details={"errors": [{"path": "Idempotency-Key", "message": "already used with a different request"}],
                     "idempotency_key": key, "workflow_id": workflow_id},
        )


class ActiveWorkflowLimitError(OsmoError):
    """The submitter already has ``OSMO_MAX_ACTIVE_WORKFLOWS_PER_USER`` workflows that have not ended
    (docs/design.md §7): 429, until some end or are cancelled."""

    http_status = 429
    code = "active_workflow_limit"

    def __init__(self, limit: int) -> None:
        super().__init__(
            f"Your workflows that have not ended are at the limit of {limit} per user; submit again once some "
            f"have ended (osmo workflow list --status PENDING RUNNING shows them, osmo workflow cancel stops "
            f"them).",
            details={"limit": limit},
        )


class WorkflowNeverFitsError(OsmoError):
    """A gang cannot be placed even on the pool's whole inventory as if idle (docs/design.md §11):
    ``details.groups`` carries each such group's structured reason from the solver."""

    http_status = 400
    code = "never_fits"

    def __init__(self, pool: str, groups: list[dict[str, object]]) -> None:
        names = ", ".join(str(g["name"]) for g in groups)
        first = str(groups[0]["message"]) if groups else ""
        super().__init__(
            f"Group(s) {names} can never be placed in pool {pool}, even when nothing else runs: {first}",
            details={"pool": pool, "groups": groups},
        )


class TaskNotDispatchedError(ConflictError):
    """The task has no pod (not placed yet, its pod not created yet, or it ended before it was
    started): nothing to read a log from."""

    code = "not_dispatched"

    def __init__(self, workflow_id: str, task: str, status: str) -> None:
        if status in TERMINAL:
            message = f"Task {task} of workflow {workflow_id} has no pod: it ended {status} before it was started."
        else:
            message = f"Task {task} of workflow {workflow_id} has no pod yet (it is {status})."
        super().__init__(message, details={"workflow": workflow_id, "task": task, "status": status})


class LogUnavailableError(ConflictError):
    """The backend has no log for the pod (it has not started, or it was deleted after its retention)."""

    code = "log_unavailable"

    def __init__(self, workflow_id: str, task: str, pod: str, reason: str) -> None:
        super().__init__(f"No log for task {task} of workflow {workflow_id} (pod {pod}): {reason}",
                         details={"workflow": workflow_id, "task": task, "pod": pod, "reason": reason})


class BackendUnavailableError(OsmoError):
    """The pool's dispatch backend (the Kubernetes API) cannot be reached right now."""

    http_status = 503
    code = "backend_unavailable"
    default_message = "The pool's backend cannot be reached; retry shortly."

    def __init__(self, pool: str, reason: str) -> None:
        super().__init__(f"The backend of pool {pool} cannot be reached; retry shortly: {reason}",
                         details={"pool": pool, "reason": reason})


# -- sessions into running tasks (workflows.sessions) ----------------------------------------------
class TaskNotRunningError(ConflictError):
    """A session into a task that is not RUNNING (not started yet, or ended)."""

    code = "task_not_running"

    def __init__(self, workflow_id: str, task: str, status: str) -> None:
        super().__init__(f"Task {task} of workflow {workflow_id} is {status}, not RUNNING: exec and port-forward "
                         "reach running tasks only.", details={"workflow": workflow_id, "task": task, "status": status})


class SessionsUnsupportedError(ConflictError):
    """The pool's backend opens no sessions (simulated; Kubernetes for now)."""

    code = "sessions_unsupported"

    def __init__(self, pool: str, backend: str, reason: str) -> None:
        super().__init__(f"Pool {pool} runs its tasks on the {backend} backend: {reason}.",
                         details={"pool": pool, "backend": backend})


class PortNotListeningError(ConflictError):
    code = "port_not_listening"

    def __init__(self, task: str, port: int, reason: str) -> None:
        super().__init__(f"Cannot forward to port {port} of task {task}: {reason}.",
                         details={"task": task, "port": port, "errors": [{"path": "port", "message": reason}]})


class SessionForbiddenError(OsmoError):
    http_status = 403
    code = "session_forbidden"


class BrowserForwardingOffError(OsmoError):
    http_status = 403
    code = "browser_forwarding_off"

    def __init__(self, pool: str) -> None:
        super().__init__(f"An administrator turned browser forwarding off in pool {pool}: its tasks' ports open "
                         "only through the CLI (osmo workflow port-forward).", details={"pool": pool})


class SessionTicketInvalidError(NotFoundError):
    code = "session_ticket_invalid"
    default_message = ("This session ticket is unknown, already used, expired, or not yours: ask for a new one "
                       "(POST /api/workflows/{id}/tasks/{task}/sessions/).")


class TagUnknownError(OsmoError):
    """A tag no admin defined (``osmo workflow tag``, ``?tag=``)."""

    http_status = 400
    code = "tag_unknown"

    def __init__(self, field: str, unknown: list[str], defined: list[str]) -> None:
        message = (f"Unknown tag{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}: tags an admin defined: "
                   f"{', '.join(defined) or 'none'}.")
        super().__init__(message, details={"errors": [{"path": field, "message": message}]})


class WorkflowTagForbiddenError(OsmoError):
    """Only a workflow's owner (or staff) changes its tags."""

    http_status = 403
    code = "tag_forbidden"

    def __init__(self, workflow_id: str) -> None:
        super().__init__(f"Only the owner of {workflow_id} (or staff) may change its tags.")
