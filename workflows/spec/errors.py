"""Validation errors of the spec package (design §3).

Every problem found in a spec becomes one :class:`SpecError` with the dotted path of the offending
value (``workflow.resources.model-1.topology[0].key``) and a message a user can act on. The parser
collects all of them and raises a single :class:`SpecInvalidError`; nothing else escapes
:func:`workflows.spec.parse_workflow` for any input.

Path syntax: mapping keys are joined with ``.``; a key that is not a plain name (letters, digits,
``_`` and ``-``) is written as ``["key"]`` (JSON-quoted); list items are ``[i]``. The empty path
stands for the whole document (unreadable YAML, not a mapping, too large).

Invariant: ``SpecInvalidError.errors`` is non-empty, free of duplicates, sorted by (path, message).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass

_PLAIN_KEY = re.compile(r"[A-Za-z0-9_-]+")


@dataclass(frozen=True, slots=True, order=True)
class SpecError:
    """One problem in a spec: where (``path``) and what to do about it (``message``)."""

    path: str
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"path": self.path, "message": self.message}


class SpecInvalidError(Exception):
    """The spec is invalid; ``errors`` lists every problem found, sorted by path then message."""

    code = "spec_invalid"

    def __init__(self, errors: Iterable[SpecError]) -> None:
        unique = tuple(sorted(set(errors)))
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


def join_path(path: str, key: object) -> str:
    """Extend ``path`` by a mapping key (``str``) or a list index (``int``)."""
    if isinstance(key, int) and not isinstance(key, bool):
        return f"{path}[{key}]"
    text = key if isinstance(key, str) else repr(key)
    if _PLAIN_KEY.fullmatch(text):
        return f"{path}.{text}" if path else text
    return f"{path}[{json.dumps(text)}]"


class ErrorList:
    """Accumulates errors while a spec is walked; ``raise_if_any`` turns them into one exception."""

    __slots__ = ("errors",)

    def __init__(self) -> None:
        self.errors: list[SpecError] = []

    def add(self, path: str, message: str) -> None:
        self.errors.append(SpecError(path, message))

    def __bool__(self) -> bool:
        return bool(self.errors)

    def __len__(self) -> int:
        return len(self.errors)

    def raise_if_any(self) -> None:
        if self.errors:
            raise SpecInvalidError(self.errors)
