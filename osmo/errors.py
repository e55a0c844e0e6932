"""Domain errors. Each carries its HTTP status and a stable snake_case ``code`` for the API envelope."""

from __future__ import annotations

from typing import Any


class OsmoError(Exception):
    """Base of every error the API turns into ``{"code", "message", "details"}``."""

    http_status: int = 400
    code: str = "error"
    default_message: str = "The request could not be processed."

    def __init__(self, message: str | None = None, *, details: dict[str, Any] | None = None) -> None:
        self.message = message or self.default_message
        self.details = details or {}
        super().__init__(self.message)


class ValidationFailedError(OsmoError):
    """Input failed validation; ``details.errors`` lists ``{"path", "message"}`` items."""

    http_status = 400
    code = "validation_error"
    default_message = "The request is invalid."

    def __init__(self, errors: list[dict[str, str]], message: str | None = None) -> None:
        super().__init__(message, details={"errors": errors})


class NameTakenError(ValidationFailedError):
    """A create or rename to a name another row has: 409, ``details.errors`` naming the field."""

    http_status = 409
    code = "conflict"
    default_message = "The name is taken."


class NotFoundError(OsmoError):
    http_status = 404
    code = "not_found"
    default_message = "Not found."


class ConflictError(OsmoError):
    http_status = 409
    code = "conflict"
    default_message = "The request conflicts with the current state."


class LockBusyError(ConflictError):
    code = "lock_busy"
    default_message = "Another operation holds this resource; retry shortly."
    retry_after_seconds = 2
