"""The template lines of errors found in a rendered spec (docs/spec.md, "Templates"). Pure: stdlib,
Jinja2 (through :mod:`workflows.spec.template`) and PyYAML.

A spec's errors are found in the rendered document, by path; a user reads the template. The line of
a path in the template is found by rendering the template once more with each line marked:

1. Append ``#@osmo-line:<n>`` (before a CRLF file's ``\r``) to every line ``n`` of the template that
   holds text and no template code other than whole ``{{ ... }}`` expressions (a line with a block
   tag, a comment, or within a tag spanning lines is left as it is: a mark there would change what
   the tag does).
2. Render that text with the same values and limits as the spec was rendered with.
3. Check the result is the rendered spec line for line once the marks are taken off; else give up
   (nothing is guessed).
4. Each path's line in the rendered spec (:func:`parsing.yamlpos.lines_of`, composed once, in the
   rendering's ``\n``-separated lines) carries the mark of the template line it came
   from; a line without a mark (the output of a tag) gives no line.

A loop's lines all come from its body, so every task a loop writes has the line of the body's text.
Used only when a rendered spec is refused: one more rendering, under the same limits.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from parsing.yamlpos import lines_of
from workflows.spec.errors import SpecInvalidError
from workflows.spec.template import TemplateLimits, keep_inline_indentation, render_text
from workflows.spec.tokens import protect_tokens

_MARK = " #@osmo-line:"
_MARKED = re.compile(re.escape(_MARK) + r"(\d+)$")
_DELIMITER = re.compile(r"\{\{|\}\}|\{%|%\}|\{#|#\}")


def _markable(lines: list[str]) -> list[bool]:
    """Per line: whether a mark may be appended (text, no block tag or comment, no tag left open)."""
    result = []
    open_tag: str | None = None
    for line in lines:
        started_open = open_tag is not None
        has_block = False
        for match in _DELIMITER.finditer(line):
            delimiter = match.group(0)
            if delimiter in ("{%", "{#", "%}", "#}"):
                has_block = True
            if open_tag is None and delimiter in ("{{", "{%", "{#"):
                open_tag = delimiter
            elif open_tag is not None and delimiter == {"{{": "}}", "{%": "%}", "{#": "#}"}[open_tag]:
                open_tag = None
        result.append(bool(line.strip()) and not started_open and open_tag is None and not has_block)
    return result


def template_lines(text: str, values: Mapping[str, Any], rendered: str, paths: Iterable[str],
                   limits: TemplateLimits) -> dict[str, int]:
    """Template line (1-based) of each of ``paths`` of the spec ``rendered`` from ``text`` with
    ``values`` (the merged template values); paths whose line is not known are left out."""
    text = text.removeprefix("\ufeff")
    lines = text.split("\n")
    marked = "\n".join(_marked(line, number) if markable else line
                       for number, (line, markable) in enumerate(zip(lines, _markable(lines), strict=True),
                                                                 start=1))
    try:
        output = render_text(keep_inline_indentation(protect_tokens(marked)), dict(values), limits)
    except SpecInvalidError:
        return {}
    output_lines = output.split("\n")
    rendered_lines = rendered.split("\n")
    if len(output_lines) != len(rendered_lines):
        return {}
    origins: list[int | None] = []
    for got, want in zip(output_lines, rendered_lines, strict=True):
        match = _MARKED.search(got)
        if (got[:match.start()] if match else got) != want:
            return {}
        origins.append(int(match.group(1)) if match else None)
    paths = list(paths)
    found = {}
    for path, line in zip(paths, lines_of(rendered, paths, template=False), strict=True):
        origin = origins[line - 1] if line is not None and line <= len(origins) else None
        if origin is not None:
            found[path] = origin
    return found


def _marked(line: str, number: int) -> str:
    """``line`` with its mark, before a CRLF file's ``\r``: Jinja renders a line end ``\r\n`` as
    ``\n``, and a mark after the ``\r`` would be a line of its own."""
    if line.endswith("\r"):
        return f"{line[:-1]}{_MARK}{number}\r"
    return f"{line}{_MARK}{number}"
