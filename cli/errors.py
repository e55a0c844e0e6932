"""Errors the CLI expects: printed as one summary line (plus detail lines) on stderr, never as a traceback.

Exit codes: 2 for the user's input (usage, an invalid spec or filter: HTTP 400), 1 for everything
else (not logged in, not found, conflicts, the server unreachable, a workflow that failed).
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

LOGIN_HINT = "run: osmo login URL --token TOKEN (or set OSMO_URL and OSMO_TOKEN)"


class CliError(Exception):
    """An expected failure. ``details`` are printed one per line under ``message``; ``hint`` last."""

    def __init__(self, message: str, *, exit_code: int = EXIT_ERROR, details: list[str] | None = None,
                 hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code
        self.details = details or []
        self.hint = hint

    def lines(self) -> list[str]:
        out = [f"error: {self.message}"]
        out.extend(f"  {line}" for line in self.details)
        if self.hint:
            out.append(self.hint)
        return out


class NotLoggedInError(CliError):
    def __init__(self, message: str) -> None:
        super().__init__(message, hint=LOGIN_HINT)


class ApiError(CliError):
    """The server answered with an error status. ``code``/``errors`` are the API envelope's."""

    def __init__(self, message: str, *, status: int, code: str = "", errors: list[dict[str, str]] | None = None,
                 exit_code: int = EXIT_ERROR, details: list[str] | None = None, hint: str | None = None) -> None:
        super().__init__(message, exit_code=exit_code, details=details, hint=hint)
        self.status = status
        self.code = code
        self.errors = errors or []


def one_line(exc: ApiError) -> CliError:
    """A refusal naming one field said on one line (``error: label: ...``), as OSMO's CLI says it."""
    if len(exc.errors) != 1:
        return exc
    error = exc.errors[0]
    return CliError(f"{error.get('path') or 'request'}: {error.get('message', '')}", exit_code=exc.exit_code)
