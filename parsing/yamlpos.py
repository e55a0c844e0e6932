"""Line numbers of error paths (``workflow.resources.model-1.topology[0].key``) in YAML text, so an
error can say where to look: the CLI's in the user's file, the service's in a rendered template
(:mod:`workflows.spec.template_lines`). Best effort: PyYAML is optional for the CLI and any surprise
gives ``None``. Pure: stdlib and PyYAML."""

from __future__ import annotations

import json
import re
from typing import Any

_SEGMENT = re.compile(r'\[(\d+)\]|\["((?:[^"\\]|\\.)*)"\]|\.?([^.\[\]]+)')


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


def lines_of(text: str, paths: list[str], *, template: bool = True) -> list[int | None]:
    """:func:`line_of` of each of ``paths``, the text composed once for all of them (a spec of 1,000
    tasks has 1,000 errors: one composition each took 0.3 s on 100 KB, five minutes in all). Without
    ``template`` the text is YAML as it is (a rendered spec: a ``{{`` left in it is data, and
    :func:`yaml_shape` would change what a line like ``["{{", "}}"]`` holds)."""
    wanted = [path_segments(path) if path else None for path in paths]
    if not any(wanted):
        return [None] * len(paths)
    try:
        import yaml

        root: Any = yaml.compose(yaml_shape(text) if template else text, Loader=yaml.SafeLoader)
    except Exception:
        return [None] * len(paths)
    if root is None:
        return [None] * len(paths)
    keys: dict[int, dict[str, tuple[Any, Any]]] = {}  # each mapping's keys, indexed on first use

    def entry(node: Any, key: str) -> tuple[Any, Any] | None:
        index = keys.get(id(node))
        if index is None:
            index = {}
            for key_node, value_node in node.value:
                if isinstance(key_node, yaml.ScalarNode):
                    index[key_node.value] = (key_node, value_node)  # the last of a repeated key: the value kept
            keys[id(node)] = index
        return index.get(key)

    def line(segments: list[str | int]) -> int | None:
        node, found, depth = root, None, 0
        for segment in segments:
            child = None
            if isinstance(node, yaml.MappingNode) and isinstance(segment, str):
                child = entry(node, segment)
            elif isinstance(node, yaml.SequenceNode) and isinstance(segment, int) and segment < len(node.value):
                item = node.value[segment]
                child = (item, item)
            if child is None:
                break
            found = child[0].start_mark.line + 1
            node = child[1]
            depth += 1
        return found if depth >= len(segments) - 1 else None

    return [line(segments) if segments else None for segments in wanted]
