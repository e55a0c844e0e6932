"""The domain boxes of the pool heat map and the workflow placement map, rendered in Python.

A 20,000-node pool has ~2,300 domains; one ``{% include %}`` per box made the pool page spend
~300 ms in the template engine. This renders the same markup (the former ``partials/domain.html``)
directly: ``{% domain_boxes box mode %}``.
"""

from __future__ import annotations

from django import template
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from pages.viewmodels.domains import DomainBox, NodeCell

register = template.Library()


def _s(n: int) -> str:
    return "" if n == 1 else "s"


def _cells(nodes: list[NodeCell], mode: str, out: list[str]) -> None:
    out.append('\n<div class="cells">\n')
    for cell in nodes:
        name = escape(cell.name)
        cordoned = "" if cell.schedulable else " cordoned"
        if mode == "workflow":
            out.append(
                f'<div class="cell{" ours" if cell.tasks else ""}{cordoned}" data-node="{name}" '
                f'title="{name}: {cell.gpu} GPUs, {cell.ours} this workflow, {cell.others} other usage, '
                f'{cell.free} free{", cordoned" if not cell.schedulable else ""}">\n<div class="nm">{name}</div>\n'
            )
            out.extend(f'<div class="tk" title="{escape(task.name)}">{escape(task.name)}</div>' for task in cell.tasks)
            out.append(f'\n<div class="fill"><span class="o" style="width:{cell.ours_percent}%"></span>'
                       f'<span class="x" style="width:{cell.others_percent}%"></span></div>\n</div>\n')
        else:
            out.append(
                f'<div class="cell heat-{cell.heat}{cordoned}" data-node="{name}" title="{name}: {cell.gpu} GPUs, '
                f'{cell.in_use} in use, {cell.free} free{", cordoned" if not cell.schedulable else ""}"></div>\n'
            )
    out.append("</div>\n")


def _labels(labels: list[tuple[str, str]]) -> str:
    """``rack r1 · gpu-clique z1-s1-r1``: a separator only between labels that are there, kept with the
    label after it so a wrapped header never starts or ends with a lone dot; an empty label value
    (Kubernetes allows ``rack: ""``) is said, not left blank."""
    parts: list[str] = []
    for key, value in labels:
        if not key and not value:
            continue
        shown = escape(value) if value else '<span class="muted">(empty)</span>'
        sep = '<span class="muted">· </span>' if parts else ""
        parts.append(
            f'<span class="lbl">{sep}<span class="k">{escape(key)}</span> <span class="v">{shown}</span></span>'
        )
    return " ".join(parts)  # flex items: the spaces only keep the text readable when copied


def _box(box: DomainBox, mode: str, out: list[str]) -> None:
    classes = "dom" + (" touched" if box.touched else "") + (" compact" if box.compact else "")
    out.append(
        f'<div class="{classes}" data-domain="{escape(box.dom_id)}" data-key="{escape(box.key)}">\n'
        f'<div class="dom-head heat-{box.heat}" title="{box.node_count} nodes · {box.capacity} GPUs · '
        f'{box.in_use} in use · {box.free} free">\n'
    )
    out.append(_labels(box.labels))
    out.append("\n")
    if mode == "workflow" and box.ours_tasks:
        out.append(f'<span class="tag" style="background:var(--ours);color:#fff">{box.ours_tasks} '
                   f'task{_s(box.ours_tasks)}</span>')
    out.append(f'\n<span class="cap"><strong>{box.free}</strong>/{box.capacity} GPU free · {box.node_count} '
               f'node{_s(box.node_count)}</span>\n</div>\n')
    if mode == "pool" and box.occupants:
        out.append('\n<div class="occupants">')
        for occ in box.occupants:
            if not occ.visible:  # other users' workflows, summed: no ids, no owners (the API's rule)
                out.append(f'<span class="occ others" data-others="{occ.others}" title="{occ.tasks} '
                           f'task{_s(occ.tasks)}">{occ.others} workflow{_s(occ.others)} of other users · '
                           f'{occ.gpu} GPU</span>')
                continue
            wid = escape(occ.workflow_id)
            out.append(f'<span class="occ" data-occupant="{wid}" title="{occ.tasks} task{_s(occ.tasks)} of '
                       f'{escape(occ.username)}"><a href="{escape(occ.url)}">{wid}</a> · {occ.gpu} GPU</span>')
        if box.occupants_more > 0:
            out.append(f'<span class="occ more" data-occupants-more="{box.occupants_more}">+{box.occupants_more} '
                       f'more workflow{_s(box.occupants_more)}</span>')
        out.append("</div>\n")
    if box.children or box.hidden_count:
        out.append('\n<div class="dom-children">\n')
        for child in box.children:
            _box(child, mode, out)
        if box.hidden_count:
            out.append(f'<div class="more" data-hidden="{box.hidden_count}">+{box.hidden_count} other '
                       f'{escape(box.hidden_key)}{_s(box.hidden_count)} · {box.hidden_free}/{box.hidden_capacity} '
                       f'GPU free</div>')
        out.append("\n</div>\n")
    if box.nodes:
        _cells(box.nodes, mode, out)
    out.append("\n</div>\n")


@register.simple_tag
def domain_boxes(box: DomainBox, mode: str) -> SafeString:
    """The box and everything under it (``mode``: "pool" or "workflow")."""
    out: list[str] = []
    _box(box, mode, out)
    return mark_safe("".join(out))  # every interpolated value above is escaped or a number
