"""Line numbers of error paths (``workflow.resources.model-1.topology[0].key``) in YAML text, so an
error can say where to look: the CLI's in the user's file, the service's in a rendered template
(:mod:`workflows.spec.template_lines`). Best effort: PyYAML is optional for the CLI and any surprise
gives ``None``. Pure: stdlib and PyYAML."""

from __future__ import annotations

import json
import re
from typing import Any

_SEGMENT = re.compile(r'\[(\d+)\]|\["((?:[^"\\]|\\.)*)"\]|\.?([^.\[\]]+)')
# A Jinja expression within one line: ``{{ storage_url }}``, ``{{output}}``.
_EXPRESSION = re.compile(r"\{\{.*?\}\}")


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
    return _EXPRESSION.sub(lambda match: "x" * len(match.group(0)), text)


def line_of(text: str, path: str) -> int | None:
    """1-based line of ``path`` in the YAML ``text`` (a template: see :func:`yaml_shape`), or of its
    parent when the last part is missing (an error about a key that should be there); ``None``
    otherwise."""
    segments = path_segments(path)
    if not segments:
        return None
    try:
        import yaml

        node: Any = yaml.compose(yaml_shape(text), Loader=yaml.SafeLoader)
    except Exception:
        return None
    if node is None:
        return None
    found = None
    depth = 0
    for segment in segments:
        child = None
        if isinstance(node, yaml.MappingNode) and isinstance(segment, str):
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode) and key.value == segment:
                    child = (key, value)
                    break
        elif isinstance(node, yaml.SequenceNode) and isinstance(segment, int) and segment < len(node.value):
            item = node.value[segment]
            child = (item, item)
        if child is None:
            break
        found = child[0].start_mark.line + 1
        node = child[1]
        depth += 1
    return found if depth >= len(segments) - 1 else None
