"""An app's parameters and its names, read from the spec's text. Pure: PyYAML, the spec package, stdlib.

An app (OSMO's stored, parameterised workflow template) documents its parameters in its spec's
``default-values:`` section: each key is a parameter, its value the default, and the comment on its
line (or the comment lines just above it) says what it is for::

    default-values:
      # The image every task runs
      image: ubuntu
      steps: 100   # how many training steps

:func:`parameters` reads them in the order written. The values come from the spec package's own
reading of the section (:func:`workflows.spec.template.default_values`); the comments from PyYAML's
scanner, which says where each key's tokens end on its line (a ``#`` inside a quoted value is no
comment).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from workflows.spec.errors import SpecError, SpecInvalidError
from workflows.spec.loader import SpecLimits
from workflows.spec.model import ScalarValue
from workflows.spec.template import VALUES_PATH, cast_value, default_values, split_default_values

# OSMO's app names: letters, digits, '-' and '_' (APP_NAME_REGEX); a version is NAME:VERSION.
NAME = re.compile(r"[A-Za-z0-9_-]+")
NAME_MAX = 63
DESCRIPTION_MAX = 1000
_REF = re.compile(r"(?P<name>[^:]*)(:(?P<version>[^:]*))?")


@dataclass(frozen=True, slots=True)
class Parameter:
    """One ``default-values`` entry: its name, its default (any YAML value) and its comment ("" if none)."""

    name: str
    default: Any
    comment: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "default": self.default, "comment": self.comment}


def name_problems(name: object, *, path: str = "name") -> list[tuple[str, str]]:
    """What is wrong with ``name`` as an app name, as ``(path, message)`` pairs (none: it is fine)."""
    if not isinstance(name, str) or not name:
        return [(path, "required: letters, digits, '-' and '_'")]
    if len(name) > NAME_MAX:
        return [(path, f"at most {NAME_MAX} characters")]
    if not NAME.fullmatch(name):
        return [(path, f"{name[:80]!r}: an app name has only letters, digits, '-' and '_'")]
    return []


def ref_parse(ref: str) -> tuple[str, int | None]:
    """``"name"`` -> ``("name", None)``, ``"name:3"`` -> ``("name", 3)`` (OSMO's ``<app>:<version>``).
    Raises ValueError naming what is wrong."""
    match = _REF.fullmatch(ref)
    if match is None or not match.group("name"):
        raise ValueError(f"{ref[:80]!r}: expected NAME or NAME:VERSION")
    version = match.group("version")
    if version is None:
        return match.group("name"), None
    if not version.isdigit() or int(version) < 1:
        raise ValueError(f"{ref[:80]!r}: the version after ':' is a number from 1")
    return match.group("name"), int(version)


# Tokens without text of their own (their marks may sit at the end of a line that has a comment).
_NO_TEXT = (yaml.StreamStartToken, yaml.StreamEndToken, yaml.BlockEndToken, yaml.BlockMappingStartToken,
            yaml.BlockSequenceStartToken)


def _comment_after(line: str, column: int) -> str:
    rest = line[column:].strip()
    return rest[1:].strip() if rest.startswith("#") else ""


def _comments(block: str) -> dict[str, str]:
    """The comment of each top-level key of the ``default-values`` block: on its line after its value,
    else the comment lines right above it."""
    lines = block.splitlines()
    # Where the tokens of each line end, by line (the scanner drops comments, so what follows is one).
    ends: dict[int, int] = {}
    keys: list[tuple[int, str]] = []  # (line, key) of the block mapping's keys
    depth = 0
    expect_key = False
    try:
        for token in yaml.scan(block, Loader=yaml.SafeLoader):
            if isinstance(token, yaml.BlockMappingStartToken | yaml.BlockSequenceStartToken
                          | yaml.FlowMappingStartToken | yaml.FlowSequenceStartToken):
                depth += 1
            elif isinstance(token, yaml.BlockEndToken | yaml.FlowMappingEndToken | yaml.FlowSequenceEndToken):
                depth -= 1
            if isinstance(token, yaml.KeyToken):
                expect_key = depth == 2  # the section's own mapping is depth 1, its values' mapping depth 2
            elif isinstance(token, yaml.ScalarToken) and expect_key:
                keys.append((token.start_mark.line, str(token.value)))
                expect_key = False
            if isinstance(token, _NO_TEXT):
                continue
            line = token.end_mark.line  # a value over several lines: its last line ends where the token does
            ends[line] = max(ends.get(line, 0), token.end_mark.column)
    except yaml.YAMLError:
        return {}
    found: dict[str, str] = {}
    for line_no, key in keys:
        text = _comment_after(lines[line_no], ends.get(line_no, 0)) if line_no < len(lines) else ""
        if not text:
            above: list[str] = []
            index = line_no - 1
            while index > 0 and lines[index].strip().startswith("#"):
                above.insert(0, lines[index].strip()[1:].strip())
                index -= 1
            text = " ".join(part for part in above if part)
        found[key] = text
    return found


def parameters(text: str, limits: SpecLimits | None = None) -> list[Parameter]:
    """The parameters of a spec's ``default-values`` section, in the order written, each with its
    default and its comment. Raises :class:`SpecInvalidError` (path ``default-values``) when the section
    is not a mapping of plain values."""
    text = text.removeprefix("\ufeff")
    values = default_values(text, limits or SpecLimits())
    block = split_default_values(text)
    comments = _comments(block) if block else {}
    return [Parameter(str(name), value, comments.get(str(name), "")) for name, value in values.items()]


def value_from_text(text: str) -> ScalarValue:
    """A parameter's value typed as text (the app page's form): an int or a float when the text is one,
    as ``--set`` casts it, else the text."""
    return cast_value(text)


def unknown_values(values: Mapping[str, Any], known: list[Parameter], *, path: str = "set") -> list[SpecError]:
    """An error for each of ``values`` that is no parameter of the app, naming the ones it has."""
    names = [parameter.name for parameter in known]
    offered = ", ".join(names) if names else "none (the spec has no default-values)"
    return [SpecError(f"{path}.{name}", f"{name[:80]!r} is not a parameter of this app; its parameters: {offered}")
            for name in values if name not in names]


def parameters_or_errors(text: str) -> tuple[list[Parameter], list[SpecError]]:
    """:func:`parameters`, or the errors that say why the section cannot be read."""
    try:
        return parameters(text), []
    except SpecInvalidError as exc:
        return [], list(exc.errors) or [SpecError(VALUES_PATH, "cannot be read")]
