"""Errors of the workflows app, each with its API status and code."""

from __future__ import annotations

from osmo.errors import ConflictError, NotFoundError, OsmoError


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


class WorkflowNotFoundError(NotFoundError):
    default_message = "Workflow not found."


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
