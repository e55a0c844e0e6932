"""Links to a workflow's pages. Workflow ids count per owner (docs/design.md §7, "Workflow ids"): a
link to a workflow the viewer does not own names its owner (``?user=<owner>``), so that a staff
viewer's link opens that workflow even when another visible workflow shares its id."""

from __future__ import annotations

import re
from collections.abc import Callable
from urllib.parse import urlencode

from django.urls import reverse


def workflow_url(workflow_id: str, owner: str, *, viewer: str, view: str = "workflow-detail") -> str:
    """The URL of ``view`` (``workflow-detail`` or ``workflow-cancel``) of ``owner``'s workflow
    ``workflow_id`` as ``viewer`` (a username) follows it."""
    return _as_viewer(reverse(view, args=[workflow_id]), owner, viewer)


def task_url(workflow_id: str, task: str, owner: str, *, viewer: str) -> str:
    """The URL of the page of task ``task`` of ``owner``'s workflow ``workflow_id`` as ``viewer`` follows it."""
    return _as_viewer(reverse("task-detail", args=[workflow_id, task]), owner, viewer)


def _as_viewer(path: str, owner: str, viewer: str) -> str:
    """``path`` naming ``owner`` unless the viewer is the owner."""
    return path if owner == viewer else f"{path}?{urlencode({'user': owner})}"


_KEPT_AS_IS = re.compile(r"[A-Za-z0-9._~-]+")  # characters a URL path keeps unquoted (RFC 3986 unreserved)


def workflow_urls(*, viewer: str, view: str = "workflow-detail") -> Callable[[str, str], str]:
    """:func:`workflow_url` for the many workflows of one page (a pool page names a thousand): the
    view is reversed once and each id put in its place; an id with any character a URL would quote is
    reversed on its own."""
    marker = "workflow-id-marker"
    prefix, suffix = reverse(view, args=[marker]).split(marker)

    def url(workflow_id: str, owner: str) -> str:
        if not _KEPT_AS_IS.fullmatch(workflow_id):
            return workflow_url(workflow_id, owner, viewer=viewer, view=view)
        return _as_viewer(f"{prefix}{workflow_id}{suffix}", owner, viewer)

    return url
