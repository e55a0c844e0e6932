"""Template filters and tags of the status pages: status colours, the constraint tree SVG, reasons
and placement reports in plain words, sortable column headers, units."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from django import template
from django.http import QueryDict
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe
from django.utils.timesince import timesince

from pages import links
from pages.templatetags.tree_svg import tree_svg
from pages.viewmodels.common import percent as _percent
from pages.viewmodels.common import status_colour
from workflows.choices import WAIT_ENDS

register = template.Library()
register.filter("status_colour", status_colour)


@register.simple_tag(takes_context=True)
def workflow_url(context: template.Context, workflow: Any, view: str = "workflow-detail") -> str:
    """The link to ``workflow``'s page as the request's user follows it (:func:`pages.links.workflow_url`)."""
    request = context.get("request")
    viewer = request.user.get_username() if request is not None else ""
    return links.workflow_url(workflow.workflow_id, workflow.submitted_by.get_username(), viewer=viewer, view=view)


@register.simple_tag(takes_context=True)
def task_url(context: template.Context, workflow: Any, task: Any) -> str:
    """The link to ``task``'s page (of ``workflow``) as the request's user follows it."""
    request = context.get("request")
    viewer = request.user.get_username() if request is not None else ""
    return links.task_url(workflow.workflow_id, task.name, workflow.submitted_by.get_username(), viewer=viewer)


@register.simple_tag
def status_badge(status: str | None) -> SafeString:
    return format_html('<span class="badge st-{}">{}</span>', status_colour(status), status or "—")


@register.simple_tag
def constraint_tree(tree: Mapping[str, Any] | None, report: Sequence[Mapping[str, Any]] | None = None,
                    tasks: Mapping[str, Mapping[str, Any]] | None = None, svg_id: str = "") -> SafeString:
    return mark_safe(tree_svg(tree, report=report, tasks=tasks, svg_id=svg_id))  # noqa: S308 - every text escaped


@register.filter
def human_bytes(value: int | None) -> str:
    value = int(value or 0)
    for unit, size in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
        if value >= size:
            amount = value / size
            return f"{amount:.0f}{unit}" if amount == int(amount) else f"{amount:.1f}{unit}"
    return f"{value}B"


@register.filter
def cpu_cores(millis: int | None) -> str:
    millis = int(millis or 0)
    return f"{millis // 1000}" if millis % 1000 == 0 else f"{millis / 1000:g}"


@register.filter
def get_item(mapping: Mapping[str, Any] | None, key: str) -> Any:
    return (mapping or {}).get(key, "")


# ------------------------------------------------------------------------------------------------
# Plain words
# ------------------------------------------------------------------------------------------------
def _node_label(node: Mapping[str, Any] | None) -> str:
    if not node:
        return "the task group"
    path = node.get("path") or []
    groups = "/".join(str(group) for _key, group in path) if path else node.get("group", "")
    return f"the {node.get('requirement', 'required')} {node.get('key')} constraint “{groups}”"


def _excluded_words(excluded: Mapping[str, int] | None) -> str:
    if not excluded:
        return ""
    words = {
        "cordoned": "cordoned",
        "nodes_excluded": "listed in nodesExcluded",
        "missing_label": "missing a topology label this constraint needs",
        "too_small": "without enough free capacity for one task",
    }
    parts = [f"{count} {words.get(name, name)}" for name, count in excluded.items() if count]
    return ("Machines that could not be used: " + ", ".join(parts) + ".") if parts else ""


def reason_sentences(reason: Mapping[str, Any] | None) -> list[str]:
    """A group's ``unschedulable_reason`` (the placement result, or a waiting notice) in sentences."""
    if not reason:
        return []
    detail: Mapping[str, Any] = reason.get("reason") or reason
    code = detail.get("code") or reason.get("code") or ""
    message = reason.get("message") or detail.get("message") or ""
    sentences: list[str] = []
    needed = detail.get("tasks_needed")
    key = detail.get("key")
    best = detail.get("best_domain") or {}
    best_path = "/".join(str(v) for v in (best.get("path") or []))
    if code == "no_domain":
        fits = best.get("fits", 0)
        sentences.append(
            f"It needs all {needed} tasks under {_node_label(detail.get('node'))} in one {key}, "
            f"but no {key} has that much free room right now: the best one"
            + (f" ({best_path})" if best_path else "")
            + f" fits {fits} of {needed}."
        )
    elif code == "no_room_for_groups":
        sentences.append(
            f"{_node_label(detail.get('node')).capitalize()} needs room for {detail.get('groups_needed')} "
            f"groups ({needed} tasks) in one {key}; the best {key}"
            + (f" ({best_path})" if best_path else "")
            + f" has room for {best.get('groups', 0)}."
        )
    elif code == "insufficient_capacity":
        sentences.append(
            f"The pool does not have enough free capacity for the whole gang: its free machines fit "
            f"{best.get('fits', 0)} of {needed} tasks."
        )
    elif code == "combination":
        sentences.append(
            "Each required constraint fits on its own, but no placement meets all of them at once right now."
        )
    elif code == "undecided":
        sentences.append("The scheduler's search ran out of its step budget before deciding; it will try again.")
    elif message:
        sentences.append(message[:1].upper() + message[1:] + ("" if message.endswith(".") else "."))
    excluded = _excluded_words(detail.get("excluded"))
    if excluded:
        sentences.append(excluded)
    totals = detail.get("totals") or {}
    requested = totals.get("requested") or {}
    free = totals.get("free_usable") or {}
    if requested.get("gpu") is not None and free.get("gpu") is not None:
        sentences.append(f"The gang asks for {requested['gpu']} GPUs; {free['gpu']} GPUs are free on usable machines.")
    status = reason.get("status") or detail.get("status")
    if code in WAIT_ENDS:
        sentences.append(WAIT_ENDS[code])
    elif status in ("unschedulable", "undecided") and code not in ("pool_keys_changed", "unknown_key"):
        sentences.append("It stays queued and is placed automatically as soon as enough capacity frees up.")
    return sentences


@register.filter
def reason_plain(reason: Mapping[str, Any] | None) -> list[str]:
    return reason_sentences(reason)


@register.filter
def reason_message(reason: Mapping[str, Any] | None) -> str:
    if not reason:
        return ""
    return str(reason.get("message") or (reason.get("reason") or {}).get("message") or "")


@register.filter
def report_plain(item: Mapping[str, Any]) -> str:
    """One placement report entry: whether the constraint was met, and at which level."""
    key = item.get("key")
    domains = item.get("domains") or []
    where = ", ".join("/".join(str(v) for v in d) for d in domains[:4]) + (" …" if len(domains) > 4 else "")
    if item.get("met"):
        return f"met: all its tasks share one {key}" + (f" ({where})" if where else "")
    met_key = item.get("met_key")
    spread = f"its tasks are spread over {len(domains)} {key}s" if domains else f"not in one {key}"
    if met_key:
        return f"not met at {key} ({spread}); they do share one {met_key} (met at {met_key})"
    return f"not met ({spread}; no common domain at any level)"


# ------------------------------------------------------------------------------------------------
# Sortable headers
# ------------------------------------------------------------------------------------------------
@register.simple_tag(takes_context=True)
def sort_header(context: template.Context, column: str, label: str) -> SafeString:
    request = context["request"]
    params: QueryDict = request.GET.copy()
    current = params.get("sort", "")
    params.pop("page", None)
    params.pop("partial", None)
    if current == column:
        params["sort"] = f"-{column}"
        arrow, aria = " ▲", "ascending"
    elif current == f"-{column}":
        params["sort"] = column
        arrow, aria = " ▼", "descending"
    else:
        params["sort"] = column
        arrow, aria = "", "none"
    return format_html('<a class="sort" href="?{}" aria-sort="{}" data-sort="{}">{}{}</a>', params.urlencode(), aria,
                       column, label, arrow)


@register.filter
def since(value: datetime | None) -> str:
    """How long ago, for people: "just now" under a minute (Django's timesince says "0 minutes")."""
    if value is None:
        return ""
    if (timezone.now() - value).total_seconds() < 60:
        return "just now"
    return f"{timesince(value)} ago"


@register.filter
def percent(part: int | None, whole: int | None) -> int:
    return _percent(int(part or 0), int(whole or 0))
