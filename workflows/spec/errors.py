"""Validation errors of the spec package (docs/design.md §3).

Every problem found in a spec becomes one :class:`SpecError` with the path of the offending value
(``workflow.resources.model-1.topology[0].key``, syntax of :func:`parsing.errors.join_path`) and a
message a user can act on. The parser collects all of them and raises a single
:class:`SpecInvalidError`; nothing else escapes :func:`workflows.spec.parse_workflow` for any input.

Invariant: ``SpecInvalidError.errors`` is non-empty, free of duplicates, sorted by (path, message).
"""

from __future__ import annotations

from collections.abc import Iterable

from parsing.errors import ErrorList as _ErrorList
from parsing.errors import PathError, join_path

#: One problem in a spec: where (``path``) and what to do about it (``message``). The spec package's
#: name for :class:`parsing.errors.PathError`, so loader errors and parser errors sort together.
SpecError = PathError

__all__ = ["ErrorList", "SpecError", "SpecInvalidError", "join_path"]


class SpecInvalidError(Exception):
    """The spec is invalid; ``errors`` lists every problem found, sorted by path then message."""

    code = "spec_invalid"

    def __init__(self, errors: Iterable[SpecError]) -> None:
        # a key per error, not two per comparison: 46,000 errors took 8 s to sort through __lt__
        unique = tuple(sorted(set(errors), key=PathError.sort_key))
        if not unique:
            unique = (SpecError("", "the spec is invalid"),)
        self.errors: tuple[SpecError, ...] = unique
        first = unique[0]
        where = f"{first.path}: " if first.path else ""
        more = f" (and {len(unique) - 1} more)" if len(unique) > 1 else ""
        super().__init__(f"Workflow spec is invalid: {where}{first.message}{more}")

    def to_list(self) -> list[dict[str, str]]:
        """JSON-ready ``[{"path": ..., "message": ...}]``, as the API's ``details.errors``."""
        return [error.to_dict() for error in self.errors]


class ErrorList(_ErrorList):
    """Accumulates errors while a spec is walked; ``raise_if_any`` turns them into one exception."""

    __slots__ = ()

    def raise_if_any(self) -> None:
        if self.errors:
            raise SpecInvalidError(self.errors)
