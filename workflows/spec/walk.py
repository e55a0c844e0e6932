"""The generic part of walking a spec document (docs/design.md §3): typed reads that record an
error at the value's path and answer None instead of raising, so that one walk reports every problem."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from workflows.spec.checks import CrossChecks
from workflows.spec.errors import join_path

NAME_PATTERN = re.compile(r"[a-zA-Z]([a-zA-Z0-9_-]*[a-zA-Z0-9])?")
NAME_MAX_LENGTH = 63


def type_name(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list | tuple):
        return "a list"
    return type(value).__name__


class SpecWalker(CrossChecks):
    """Typed reads of document values; mixed into the parser (which sets ``errors``)."""

    # -- generic helpers ------------------------------------------------------------------------

    def mapping(
        self, value: object, path: str, allowed: Sequence[str], required: Sequence[str] = ()
    ) -> Mapping[str, Any] | None:
        """``value`` as a mapping after reporting unknown and missing fields; None if not a mapping."""
        if not isinstance(value, Mapping):
            self.error(path, f"must be a mapping, got {type_name(value)}")
            return None
        for key in value:
            if key not in allowed:
                self.error(
                    join_path(path, key), f"unknown field {key!r}; expected one of: {', '.join(sorted(allowed))}"
                )
        for key in required:
            if key not in value:
                self.error(join_path(path, key), "this field is required")
        return value

    def string(self, value: object, path: str, *, non_empty: bool = True) -> str | None:
        if not isinstance(value, str):
            self.error(path, f"must be a string, got {type_name(value)}")
            return None
        if non_empty and not value.strip():
            self.error(path, "must not be empty")
            return None
        return value

    def name(self, value: object, path: str, what: str) -> str | None:
        text = self.string(value, path)
        if text is None:
            return None
        if len(text) > NAME_MAX_LENGTH or not NAME_PATTERN.fullmatch(text):
            self.error(
                path,
                f"invalid {what} {text[:80]!r}: use letters, digits, '-' and '_', start with a letter, "
                f"end with a letter or digit, at most {NAME_MAX_LENGTH} characters",
            )
            return None
        return text

    def text_value(self, value: object, path: str) -> str | None:
        """A scalar rendered as text (numbers as written, booleans as ``true``/``false``, null as '')."""
        if value is None:
            return ""
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, str | int | float):
            return str(value)
        self.error(path, f"must be a string, got {type_name(value)}")
        return None

    def string_list(self, value: object, path: str, *, non_empty: bool) -> tuple[str, ...] | None:
        if not isinstance(value, list | tuple):
            self.error(path, f"must be a list of strings, got {type_name(value)}")
            return None
        if non_empty and not value:
            self.error(path, "must not be empty")
            return None
        items = [self.text_value(item, join_path(path, index)) for index, item in enumerate(value)]
        if any(item is None for item in items):
            return None
        return tuple(item for item in items if item is not None)

    def text_map(self, value: object, path: str, key_pattern: re.Pattern[str] | None) -> tuple[tuple[str, str], ...]:
        if value is None:
            return ()
        if not isinstance(value, Mapping):
            self.error(path, f"must be a mapping, got {type_name(value)}")
            return ()
        pairs: list[tuple[str, str]] = []
        for key, item in value.items():
            item_path = join_path(path, key)
            if key_pattern is not None and not key_pattern.fullmatch(key):
                self.error(item_path, f"invalid name {key!r}")
                continue
            if not key:
                self.error(item_path, "names must not be empty")
                continue
            text = self.text_value(item, item_path)
            if text is not None:
                pairs.append((key, text))
        return tuple(sorted(pairs))

