"""Problems found in a document, each with the path of the offending value.

A document (a workflow spec, a pool inventory) is checked as a whole: every problem becomes one
:class:`PathError` with the place of the value and a message a user can act on, and the caller raises
them together at the end, so one round trip shows every mistake.

Path syntax (:func:`join_path`): mapping keys are joined with ``.``; a key that is not a plain name
(letters, digits, ``_`` and ``-``) is written ``["key"]`` (JSON-quoted); list items are ``[i]``. The
empty path stands for the whole document (unreadable YAML, not a mapping, too large). Example:
``nodes[3].labels["topology.kubernetes.io/zone"]``.

Invariants: :class:`ErrorList` keeps errors in the order they were found; a
:class:`DocumentInvalidError` always carries at least one error. Errors order naturally by path then
message (``tasks[2]`` before ``tasks[10]``, ``shard2`` before ``shard10``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import total_ordering
from typing import Any

from parsing.natural import NaturalKey, natural_key

#: A key written plain in a path (``a.b``); any other is quoted (``a["b.c"]``).
PLAIN_KEY = r"[A-Za-z0-9_-]+"
_PLAIN_KEY = re.compile(PLAIN_KEY)


@total_ordering
@dataclass(frozen=True, slots=True)
class PathError:
    """One problem in a document: where (``path``) and what to do about it (``message``). Ordered
    naturally by path, then message."""

    path: str
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"path": self.path, "message": self.message}

    def sort_key(self) -> tuple[NaturalKey, NaturalKey]:
        return natural_key(self.path), natural_key(self.message)

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, PathError):
            return NotImplemented
        return self.sort_key() < other.sort_key()


def join_path(path: str, key: object) -> str:
    """Extend ``path`` by a mapping key (``str``) or a list index (``int``)."""
    if isinstance(key, int) and not isinstance(key, bool):
        return f"{path}[{key}]"
    text = key if isinstance(key, str) else repr(key)
    if _PLAIN_KEY.fullmatch(text):
        return f"{path}.{text}" if path else text
    return f"{path}[{json.dumps(text)}]"


class ErrorList:
    """Accumulates errors while a document is walked, in the order they are found."""

    __slots__ = ("errors",)

    def __init__(self) -> None:
        self.errors: list[PathError] = []

    def add(self, path: str, message: str) -> None:
        self.errors.append(PathError(path, message))

    def __bool__(self) -> bool:
        return bool(self.errors)

    def __len__(self) -> int:
        return len(self.errors)

    def to_list(self) -> list[dict[str, str]]:
        """JSON-ready ``[{"path": ..., "message": ...}]``."""
        return [error.to_dict() for error in self.errors]


class DocumentInvalidError(Exception):
    """A document could not be read or is invalid; ``errors`` lists every problem found, in order."""

    default_message = "The document is invalid."

    def __init__(self, errors: Iterable[PathError], message: str | None = None) -> None:
        self.errors: tuple[PathError, ...] = tuple(errors) or (PathError("", "the document is invalid"),)
        self.message = message or self.default_message
        super().__init__(self.message)

    def to_list(self) -> list[dict[str, str]]:
        """JSON-ready ``[{"path": ..., "message": ...}]``, as the API's ``details.errors``."""
        return [error.to_dict() for error in self.errors]


#: Errors with the same message at at least this many paths that differ only in list indices are
#: said once (30 tasks without ``command``: one line, with the count).
COLLAPSE_AT = 3


def errors_collapse(errors: Iterable[Mapping[str, Any]]) -> list[tuple[str, str, list[str]]]:
    """Group ``{"path", "message"}`` errors for people to read: ``(shown path, message, paths)`` in
    first-seen order. Errors with the same message whose paths differ only in list indices become one
    entry once there are :data:`COLLAPSE_AT` of them, shown with the indices they all share kept
    (``groups[0].tasks[*].command``); others stay one entry per path."""
    groups: dict[tuple[str, str], list[str]] = {}
    for error in errors:
        path = str(error.get("path") or "")
        groups.setdefault((re.sub(r"\[\d+\]", "[*]", path), str(error.get("message", ""))), []).append(path)
    out: list[tuple[str, str, list[str]]] = []
    for (_pattern, message), paths in groups.items():
        if len(paths) >= COLLAPSE_AT:
            # keep the indices all of them share (groups[0].tasks[*].command, not groups[*]...)
            columns = zip(*(re.split(r"(\[\d+\])", path) for path in paths), strict=True)
            shown = "".join(parts[0] if len(set(parts)) == 1 else "[*]" for parts in columns)
            out.append((shown, message, paths))
        else:
            out.extend((path, message, [path]) for path in paths)
    return out
