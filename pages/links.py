"""Links to a workflow's pages. Workflow ids count per owner (docs/design.md §7, "Workflow ids"): a
link to a workflow the viewer does not own names its owner (``?user=<owner>``), so that a staff
viewer's link opens that workflow even when another visible workflow shares its id."""

from __future__ import annotations

from urllib.parse import urlencode

from django.urls import reverse


def workflow_url(workflow_id: str, owner: str, *, viewer: str, view: str = "workflow-detail") -> str:
    """The URL of ``view`` (``workflow-detail`` or ``workflow-cancel``) of ``owner``'s workflow
    ``workflow_id`` as ``viewer`` (a username) follows it."""
    url = reverse(view, args=[workflow_id])
    return url if owner == viewer else f"{url}?{urlencode({'user': owner})}"
