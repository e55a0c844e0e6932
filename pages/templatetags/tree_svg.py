"""A constraint tree (``tree_to_json`` form) drawn as an SVG, server-side, like the figures of seed
document 003: the group at the root, one box per (key, group) node, tasks as leaves.

Layout: a layered ("tidy") drawing. Rows are depths (root 0, constraint nodes by depth, every
task on the bottom row); each subtree is as wide as its own box or its children side by side,
whichever is wider, and a parent sits centred over its first and last child, so boxes never
overlap and edges never cross. Required nodes have a
solid border, preferred ones a dashed border, and both say so in words. Pure: no Django.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from html import escape
from typing import Any

from parsing.natural import natural_sorted

MAX_LEAVES = 8  # per node; the rest become one "+N more" leaf
ROW_HEIGHT = 84
BOX_HEIGHT = 46
MIN_LEAF = 104
MIN_NODE = 150
MAX_BOX = 260
GAP = 10
CHAR_WIDTH = 7.2  # ~13px sans-serif, bold
PAD = 12


@dataclass(slots=True)
class _Box:
    kind: str  # root | node | task | more
    lines: list[str]
    title: str
    css: str
    children: list[_Box] = field(default_factory=list)
    depth: int = 0
    x: float = 0.0  # centre
    width: float = 0.0
    span: float = 0.0


def _report_index(report: Sequence[Mapping[str, Any]] | None) -> dict[tuple[tuple[str, str], ...], Mapping[str, Any]]:
    index = {}
    for item in report or ():
        try:
            index[tuple((str(k), str(g)) for k, g in item["path"])] = item
        except (KeyError, TypeError, ValueError):
            continue
    return index


def requirement_text(node: Mapping[str, Any], item: Mapping[str, Any] | None) -> str:
    """"required", "preferred · met", "preferred · met at spine", "preferred · not met"."""
    requirement = str(node.get("requirement", "required"))
    if item is None:
        return requirement
    if item.get("met"):
        return f"{requirement} · met"
    met_key = item.get("met_key")
    return f"{requirement} · met at {met_key}" if met_key else f"{requirement} · not met"


def _task_box(name: str, tasks: Mapping[str, Mapping[str, Any]]) -> _Box:
    info = tasks.get(name) or {}
    node = info.get("node") or ""
    status = str(info.get("status") or "")
    second = node or (status.lower() if status else "task")
    css = f"tree-task st-{info.get('colour', 'none')}"
    title = f"task {name}" + (f" on {node}" if node else "") + (f" ({status})" if status else "")
    return _Box(kind="task", lines=[name, second], title=title, css=css)


def _leaves(names: Sequence[str], tasks: Mapping[str, Mapping[str, Any]]) -> list[_Box]:
    names = natural_sorted(map(str, names))  # trees stored before the builder kept natural order
    if len(names) <= MAX_LEAVES:
        return [_task_box(name, tasks) for name in names]
    shown = [_task_box(name, tasks) for name in names[: MAX_LEAVES - 1]]
    rest = names[MAX_LEAVES - 1:]
    more = _Box(kind="more", lines=[f"+{len(rest)} more tasks", f"{rest[0]} …"], title=", ".join(rest),
                css="tree-task tree-more")
    return [*shown, more]


def _build(tree: Mapping[str, Any], report: Sequence[Mapping[str, Any]] | None,
           tasks: Mapping[str, Mapping[str, Any]]) -> _Box:
    index = _report_index(report)
    total = _count_tasks(tree)
    root = _Box(kind="root", lines=[str(tree.get("group", "group")), f"gang · {total} task{'s' if total != 1 else ''}"],
                title=f"task group {tree.get('group')}: all {total} tasks start together", css="tree-root")

    def node_box(node: Mapping[str, Any]) -> _Box:
        path = tuple((str(k), str(g)) for k, g in node.get("path", ()))
        item = index.get(path)
        requirement = str(node.get("requirement", "required"))
        label = f"{node.get('key')} = {node.get('group')}"
        text = requirement_text(node, item)
        css = "tree-node " + ("tree-required" if requirement == "required" else "tree-preferred")
        if item is not None and not item.get("met"):
            css += " tree-unmet"
        box = _Box(kind="node", lines=[label, text], css=css,
                   title=f"{label} ({text}); path {node.get('display_name') or ''}")
        box.children = [node_box(child) for child in node.get("children", ())]
        box.children += _leaves(node.get("tasks", ()), tasks)
        return box

    root.children = _leaves(tree.get("tasks", ()), tasks)
    root.children += [node_box(child) for child in tree.get("children", ())]
    return root


def _count_tasks(node: Mapping[str, Any]) -> int:
    return len(node.get("tasks", ())) + sum(_count_tasks(child) for child in node.get("children", ()))


def _depths(box: _Box, depth: int = 0) -> int:
    box.depth = depth
    deepest = depth
    for child in box.children:
        if child.kind in ("node", "root"):
            deepest = max(deepest, _depths(child, depth + 1))
    return deepest


def _own_width(box: _Box) -> float:
    longest = max(len(line) for line in box.lines)
    floor = MIN_LEAF if box.kind in ("task", "more") else MIN_NODE
    return min(max(floor, longest * CHAR_WIDTH + 24), MAX_BOX)


def _measure(box: _Box) -> float:
    """The width of the box's subtree: its own box or its children side by side, whichever is wider."""
    box.width = _own_width(box)
    if box.children:
        box.span = max(box.width, sum(_measure(child) for child in box.children) + GAP * (len(box.children) - 1))
    else:
        box.span = box.width
    return box.span


def _place(box: _Box, left: float, leaf_row: int) -> None:
    """Tidy layout: children side by side under their parent, the parent centred over them."""
    if box.kind in ("task", "more"):
        box.depth = leaf_row
    if not box.children:
        box.x = left + box.span / 2
        return
    total = sum(child.span for child in box.children) + GAP * (len(box.children) - 1)
    cursor = left + (box.span - total) / 2
    for child in box.children:
        _place(child, cursor, leaf_row)
        cursor += child.span + GAP
    box.x = (box.children[0].x + box.children[-1].x) / 2


def _walk(box: _Box):
    yield box
    for child in box.children:
        yield from _walk(child)


def _fit(text: str, width: float) -> str:
    limit = max(int((width - 16) / CHAR_WIDTH), 4)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def tree_svg(tree: Mapping[str, Any] | None, *, report: Sequence[Mapping[str, Any]] | None = None,
             tasks: Mapping[str, Mapping[str, Any]] | None = None, svg_id: str = "") -> str:
    """The tree as an ``<svg>`` element (a string of safe markup; every text is escaped)."""
    if not tree:
        return '<p class="muted">No constraint tree.</p>'
    root = _build(tree, report, tasks or {})
    deepest = _depths(root)
    has_leaves = any(box.kind in ("task", "more") for box in _walk(root))
    leaf_row = deepest + 1 if has_leaves else deepest
    _measure(root)
    _place(root, PAD, leaf_row)
    boxes = list(_walk(root))
    width = root.span + 2 * PAD
    height = (leaf_row + 1) * ROW_HEIGHT - (ROW_HEIGHT - BOX_HEIGHT) + 2 * PAD

    def centre_x(box: _Box) -> float:
        return box.x

    def top_y(box: _Box) -> float:
        return PAD + box.depth * ROW_HEIGHT

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="tree-svg" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" role="img" aria-label="constraint tree of {escape(root.lines[0])}"'
        + (f' id="{escape(svg_id)}"' if svg_id else "")
        + ">"
    ]
    for box in boxes:  # edges first, under the boxes
        for child in box.children:
            x1, y1 = centre_x(box), top_y(box) + BOX_HEIGHT
            x2, y2 = centre_x(child), top_y(child)
            mid = y1 + (ROW_HEIGHT - BOX_HEIGHT) / 2
            dashed = ' stroke-dasharray="5 4"' if "tree-preferred" in child.css else ""
            parts.append(
                f'<path class="tree-edge" d="M{x1:.1f},{y1:.1f} V{mid:.1f} H{x2:.1f} V{y2:.1f}" fill="none"{dashed}/>'
            )
    for box in boxes:
        box_width = box.width
        x = centre_x(box) - box_width / 2
        y = top_y(box)
        dashed = ' stroke-dasharray="6 4"' if "tree-preferred" in box.css else ""
        parts.append(f'<g class="{escape(box.css)}" data-kind="{box.kind}"><title>{escape(box.title)}</title>')
        parts.append(
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{box_width:.1f}" height="{BOX_HEIGHT}" rx="6"{dashed}/>'
        )
        first, second = box.lines[0], box.lines[1] if len(box.lines) > 1 else ""
        parts.append(
            f'<text class="l1" x="{centre_x(box):.1f}" y="{y + 19:.1f}" text-anchor="middle">'
            f"{escape(_fit(first, box_width))}</text>"
        )
        if second:
            parts.append(
                f'<text class="l2" x="{centre_x(box):.1f}" y="{y + 36:.1f}" text-anchor="middle">'
                f"{escape(_fit(second, box_width))}</text>"
            )
        parts.append("</g>")
    parts.append("</svg>")
    return "".join(parts)
