"""Line numbers of error paths (``workflow.resources.model-1.topology[0].key``) in YAML text, so an
error can say where to look: the CLI's in the user's file, the service's in a rendered template
(:mod:`workflows.spec.template_lines`). Best effort: PyYAML is optional for the CLI and any surprise
gives ``None``. Pure: stdlib and PyYAML."""

from __future__ import annotations

import bisect
import json
import re
from typing import Any

from parsing.errors import PLAIN_KEY

# A path as join_path writes it: plain keys, [index], ["quoted key"]; anything else does not parse.
_SEGMENT = re.compile(r'\[(\d+)\]|\["((?:[^"\\]|\\.)*)"\]|\.?(' + PLAIN_KEY + ')')


def path_segments(path: str) -> list[str | int] | None:
    """``a.b[0]["x.y"]`` -> ``["a", "b", 0, "x.y"]``; ``None`` when the path does not parse."""
    segments: list[str | int] = []
    position = 0
    while position < len(path):
        match = _SEGMENT.match(path, position)
        if not match or match.end() == position:
            return None
        index, quoted, plain = match.groups()
        if index is not None:
            segments.append(int(index))
        elif quoted is not None:
            segments.append(json.loads(f'"{quoted}"'))
        else:
            segments.append(plain)
        position = match.end()
    return segments


def yaml_shape(text: str) -> str:
    """``text`` as YAML with the same lines: a template without block tags (``{% ... %}``) has each
    one-line expression replaced by a plain word as wide, so ``url: {{ storage_url }}/out/`` parses
    and the lines of the file are the lines of the spec the service renders from it. Block tags can
    repeat or drop lines, so a template with them is left as it is (its paths need not match it)."""
    if "{{" not in text or "{%" in text:
        return text
    return "\n".join(_words_for_expressions(line) for line in text.split("\n"))


def _words_for_expressions(line: str) -> str:
    """``line`` with each ``{{ ... }}`` (the first ``}}`` after its ``{{``) replaced by as many ``x``.
    Searched with ``str.find``, once per expression: a line of ``{{`` without ``}}`` costs one pass (the
    regex ``\\{\\{.*?\\}\\}`` read to the line's end from each ``{{``: 160 KB of them held a web process
    200 s)."""
    parts: list[str] = []
    position = 0
    while (start := line.find("{{", position)) >= 0:
        end = line.find("}}", start + 2)
        if end < 0:  # no later "{{" on this line has a "}}" after it either
            break
        parts += [line[position:start], "x" * (end + 2 - start)]
        position = end + 2
    parts.append(line[position:])
    return "".join(parts)


def line_of(text: str, path: str) -> int | None:
    """1-based line of ``path`` in the YAML ``text`` (a template: see :func:`yaml_shape`), or of its
    parent when the last part is missing (an error about a key that should be there); ``None``
    otherwise."""
    return lines_of(text, [path])[0]


class ComposedYaml:
    """A YAML document composed once (its root node), with each mapping's keys indexed on first use: a
    spec of 1,000 tasks has 1,000 error paths through the same mappings. The CLI, the template lines
    and the submit page look their paths up here; each composes the text its own way. A key written
    twice is found at its last occurrence, the one whose value the loader keeps."""

    def __init__(self, root: Any, text: str | None = None) -> None:
        self.root = root
        self._keys: dict[int, dict[str, tuple[Any, Any]]] = {}
        # Where each "\n" of the composed text is: PyYAML also breaks lines at "\r", U+0085, U+2028 and
        # U+2029, which an editor (and the template's marks) do not count, so its lines are counted back.
        self._newlines = None if text is None else [m.start() for m in re.finditer("\n", text)]

    def line_at(self, node: Any) -> int:
        """1-based ``\n``-separated line where ``node`` starts (PyYAML's own line without the text)."""
        if self._newlines is None:
            return int(node.start_mark.line) + 1
        return bisect.bisect_left(self._newlines, node.start_mark.index) + 1

    def _entry(self, node: Any, key: str) -> tuple[Any, Any] | None:
        index = self._keys.get(id(node))
        if index is None:
            index = {}
            for key_node, value_node in node.value:
                if isinstance(key_node, _yaml().ScalarNode):
                    index[key_node.value] = (key_node, value_node)  # the last of a repeated key: the value kept
            self._keys[id(node)] = index
        return index.get(key)

    def walk(self, segments: list[str | int]) -> tuple[Any, int]:
        """The element reached along ``segments`` (a mapping entry's key node, a list item) and how many
        segments matched: it stops at the last element that exists (the root when none does)."""
        yaml = _yaml()
        anchor = node = self.root
        consumed = 0
        for segment in segments:
            if isinstance(node, yaml.MappingNode) and isinstance(segment, str):
                found = self._entry(node, segment)
                if found is None:
                    break
                anchor, node = found
            elif isinstance(node, yaml.SequenceNode) and isinstance(segment, int) and 0 <= segment < len(node.value):
                anchor = node = node.value[segment]
            else:
                break
            consumed += 1
        return anchor, consumed

    def line(self, segments: list[str | int]) -> int | None:
        """1-based line of the element, or of its parent when only the last segment is missing."""
        anchor, consumed = self.walk(segments)
        return self.line_at(anchor) if segments and consumed >= max(1, len(segments) - 1) else None


def _yaml() -> Any:
    import yaml  # optional for the CLI: imported where a document is looked at

    return yaml


def lines_of(text: str, paths: list[str], *, template: bool = True) -> list[int | None]:
    """:func:`line_of` of each of ``paths``, the text composed once for all of them (a spec of 1,000
    tasks has 1,000 errors: one composition each took 0.3 s on 100 KB, five minutes in all). Without
    ``template`` the text is YAML as it is (a rendered spec: a ``{{`` left in it is data, and
    :func:`yaml_shape` would change what a line like ``["{{", "}}"]`` holds)."""
    wanted = [path_segments(path) if path else None for path in paths]
    if not any(wanted):
        return [None] * len(paths)
    shaped = yaml_shape(text) if template else text
    try:
        root: Any = _yaml().compose(shaped, Loader=_yaml().SafeLoader)
    except Exception:
        return [None] * len(paths)
    if root is None:
        return [None] * len(paths)
    composed = ComposedYaml(root, shaped)
    return [composed.line(segments) if segments else None for segments in wanted]
