"""The workflows' side of a reservation: which task, gang and workflow hold it.

A :class:`scheduler.models.Reservation` names its task by id only (the cluster side keeps the facts
it needs on its own rows and never reads this app's tables). Reads of this app that group
reservations by their workflow or gang annotate them with :func:`held_by`.
"""

from __future__ import annotations

from django.db.models import OuterRef, Subquery

from workflows.models import Task


def held_by(lookup: str) -> Subquery:
    """``lookup`` of the task holding a reservation (a path from :class:`~workflows.models.Task`,
    e.g. ``"group_id"`` or ``"workflow__workflow_id"``), as an annotation of reservations (the task
    found by its primary key)."""
    return Subquery(Task.objects.filter(pk=OuterRef("task_id")).values(lookup)[:1])
