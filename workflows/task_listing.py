"""Tasks across the workflows a user may see (``GET /api/tasks/``, ``osmo task list``): OSMO's task list,
filtered by status, pool, workflow, node and submitter. Visibility is the workflow list's
(:func:`workflows.selectors.workflow_visible_to`): a task is listed only when its workflow would be."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, time
from typing import Any

from django.db.models import Count, F, QuerySet, Sum
from django.db.models.functions import Coalesce
from django.utils import timezone

from osmo.errors import ValidationFailedError
from osmo.types import Viewer
from workflows.choices import Priority, TaskStatus
from workflows.models import Task
from workflows.selectors import workflow_visible_to

#: OSMO's default: what is under way (its PROCESSING has no counterpart here).
DEFAULT_STATUSES = (TaskStatus.SCHEDULING, TaskStatus.INITIALIZING, TaskStatus.RUNNING)
ORDERS = ("asc", "desc")
MAX_VALUES = 100  # values of one filter


@dataclass(frozen=True)
class TaskFilters:
    statuses: tuple[str, ...] = ()
    pools: tuple[str, ...] = ()
    nodes: tuple[str, ...] = ()
    users: tuple[str, ...] = ()
    workflow: str = ""
    all_users: bool = False
    order: str = "asc"
    priorities: tuple[str, ...] = ()
    started_after: datetime | None = None  # inclusive
    started_before: datetime | None = None  # exclusive


def _day(value: str | None, name: str, problems: list[dict[str, str]]) -> datetime | None:
    """The start (in the service's time zone) of the day ``value`` (YYYY-MM-DD); None when absent, or when it
    is not a date (a problem noted: an empty value too)."""
    if value is None:
        return None
    try:
        return timezone.make_aware(datetime.combine(date.fromisoformat(value), time.min))
    except ValueError:
        problems.append({"path": name, "message": f"must be a date YYYY-MM-DD, not {value[:40]!r}"})
        return None


def task_filters(*, statuses: Sequence[str], pools: Sequence[str], nodes: Sequence[str], users: Sequence[str],
                 workflow: str, all_users: bool, order: str, priorities: Sequence[str] = (),
                 started_after: str | None = None, started_before: str | None = None) -> TaskFilters:
    """The filters checked: every problem names its parameter (400, nothing else read)."""
    problems: list[dict[str, str]] = []
    known = set(TaskStatus.values)
    wrong = [status for status in statuses if status.upper() not in known]
    if wrong:
        problems.append({"path": "status", "message": f"unknown status {wrong[0][:40]!r}; one of "
                                                      f"{', '.join(TaskStatus.values)}"})
    wrong = [priority for priority in priorities if priority.upper() not in Priority.values]
    if wrong:
        problems.append({"path": "priority", "message": f"unknown priority {wrong[0][:40]!r}; one of "
                                                        f"{', '.join(Priority.values)}"})
    after, before = _day(started_after, "started_after", problems), _day(started_before, "started_before", problems)
    if after and before and after > before:
        problems.append({"path": "started_before", "message": "must not be before started_after"})
    for name, values in (("status", statuses), ("pool", pools), ("node", nodes), ("user", users)):
        if len(values) > MAX_VALUES:
            problems.append({"path": name, "message": f"at most {MAX_VALUES} values, got {len(values)}"})
        if any("\x00" in value for value in values):
            problems.append({"path": name, "message": "a value holds a NUL character"})
    if "\x00" in workflow:
        problems.append({"path": "workflow", "message": "holds a NUL character"})
    if order.lower() not in ORDERS:
        problems.append({"path": "order", "message": f"must be asc or desc, not {order[:40]!r}"})
    if users and all_users:
        problems.append({"path": "all_users", "message": "give either user or all_users, not both"})
    if problems:
        raise ValidationFailedError(problems, "A filter of the task list is invalid.")
    return TaskFilters(statuses=tuple(s.upper() for s in statuses), pools=tuple(pools), nodes=tuple(nodes),
                       users=tuple(users), workflow=workflow, all_users=all_users, order=order.lower(),
                       priorities=tuple(p.upper() for p in priorities), started_after=after, started_before=before)


def _matching(*, user: Viewer, filters: TaskFilters) -> QuerySet[Task]:
    """The tasks ``user`` may see that match ``filters``, unordered. Without ``users`` or ``all_users``, the
    user's own (OSMO's default)."""
    workflows = workflow_visible_to(user)
    if filters.users:
        workflows = workflows.filter(submitted_by__username__in=filters.users)
    elif not filters.all_users:
        workflows = workflows.filter(submitted_by_id=user.pk)
    if filters.pools:
        workflows = workflows.filter(pool__name__in=filters.pools)
    if filters.workflow:
        workflows = workflows.filter(workflow_id__icontains=filters.workflow)
    if filters.priorities:
        workflows = workflows.filter(priority__in=filters.priorities)
    tasks = Task.objects.filter(workflow__in=workflows.values("pk"))
    if filters.statuses:
        tasks = tasks.filter(status__in=filters.statuses)
    if filters.nodes:
        tasks = tasks.filter(node_name__in=filters.nodes)
    if filters.started_after:
        tasks = tasks.filter(started_at__gte=filters.started_after)
    if filters.started_before:
        tasks = tasks.filter(started_at__lt=filters.started_before)
    return tasks


def task_list(*, user: Viewer, filters: TaskFilters) -> QuerySet[Task]:
    """The tasks ``user`` may see that match ``filters``, by start time (``asc``: the latest last, tasks not
    started yet after them). Without ``users`` or ``all_users``, the user's own (OSMO's default)."""
    tasks = _matching(user=user, filters=filters)
    started = F("started_at").asc(nulls_last=True) if filters.order == "asc" else F("started_at").desc(nulls_last=True)
    return (tasks.select_related("workflow", "workflow__pool", "workflow__submitted_by", "node")
            .defer("workflow__spec_text", "workflow__pool_keys", "environment", "command", "args")
            .order_by(started, "workflow_id", "position", "pk"))


#: What a summary row adds up (each the sum of its tasks' requests, base units), as ``<name>_sum``.
SUMMED = ("gpu", "cpu_millis", "memory_bytes", "storage_bytes")
#: A summary row's keys (aliases: the task's own field names may not be reused).
SUMMARY_KEYS = {"owner": "workflow__submitted_by__username", "pool_name": "workflow__pool__name",
                "workflow_priority": "workflow__priority"}


def task_summary(*, user: Viewer, filters: TaskFilters, by_workflow: bool = False) -> QuerySet[Any]:
    """OSMO's ``task list --summary`` (``by_workflow``: ``--aggregate-by-workflow``): the tasks
    :func:`task_list` would list, one row per submitter, pool and priority (and workflow), with how many
    tasks (``task_count``) and the sum of their requests (``<name>_sum``, :data:`SUMMED`); by user, pool,
    priority (and workflow id). Rows are dicts keyed by :data:`SUMMARY_KEYS` (and ``workflow``)."""
    keys = {alias: F(path) for alias, path in SUMMARY_KEYS.items()}
    if by_workflow:
        keys["workflow_name"] = F("workflow__workflow_id")
    rows = (_matching(user=user, filters=filters).order_by().values(**keys)
            .annotate(task_count=Count("pk"), **{f"{name}_sum": Coalesce(Sum(name), 0) for name in SUMMED}))
    return rows.order_by(*keys)


__all__ = ["DEFAULT_STATUSES", "SUMMARY_KEYS", "SUMMED", "TaskFilters", "task_filters", "task_list", "task_summary"]
