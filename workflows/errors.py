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
