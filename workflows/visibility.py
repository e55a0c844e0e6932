"""Who may see whose workflow, for rows already read (a page's, a waiting reason's holders): the rule of
:func:`workflows.selectors.workflow_visible_to`, so that nothing names what the API hides."""

from __future__ import annotations

from osmo.types import Viewer


def workflow_owner_visible(user: Viewer, owner_id: int | None) -> bool:
    """Whether ``user`` may see a workflow submitted by ``owner_id``: :func:`workflows.selectors.workflow_visible_to`
    for a row read already (its id, its owner's id), so that no page or reason names what the API hides."""
    return bool(user.is_staff or (owner_id is not None and owner_id == user.pk))
