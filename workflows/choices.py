"""Statuses after OSMO (design §6) and priorities."""

from django.db import models


class TaskStatus(models.TextChoices):
    """Status of a task and of a task group (a group moves as one gang)."""

    WAITING = "WAITING"
    SCHEDULING = "SCHEDULING"
    INITIALIZING = "INITIALIZING"
    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    FAILED_CANCELED = "FAILED_CANCELED"
    FAILED_BACKEND_ERROR = "FAILED_BACKEND_ERROR"
    FAILED_QUEUE_TIMEOUT = "FAILED_QUEUE_TIMEOUT"
    FAILED_UPSTREAM = "FAILED_UPSTREAM"
    FAILED_SERVER_ERROR = "FAILED_SERVER_ERROR"


class WorkflowStatus(models.TextChoices):
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    FAILED_CANCELED = "FAILED_CANCELED"
    FAILED_BACKEND_ERROR = "FAILED_BACKEND_ERROR"
    FAILED_QUEUE_TIMEOUT = "FAILED_QUEUE_TIMEOUT"
    FAILED_UPSTREAM = "FAILED_UPSTREAM"
    FAILED_SERVER_ERROR = "FAILED_SERVER_ERROR"


class Priority(models.TextChoices):
    LOW = "LOW"
    NORMAL = "NORMAL"
    HIGH = "HIGH"


PRIORITY_RANK = {Priority.HIGH: 0, Priority.NORMAL: 1, Priority.LOW: 2}

TASK_TERMINAL_STATUSES = frozenset(
    {
        TaskStatus.COMPLETED,
        TaskStatus.FAILED,
        TaskStatus.FAILED_CANCELED,
        TaskStatus.FAILED_BACKEND_ERROR,
        TaskStatus.FAILED_QUEUE_TIMEOUT,
        TaskStatus.FAILED_UPSTREAM,
        TaskStatus.FAILED_SERVER_ERROR,
    }
)
TASK_FAILED_STATUSES = TASK_TERMINAL_STATUSES - {TaskStatus.COMPLETED}
TASK_ACTIVE_STATUSES = frozenset({TaskStatus.INITIALIZING, TaskStatus.RUNNING})  # holding capacity
WORKFLOW_TERMINAL_STATUSES = frozenset(
    {s for s in WorkflowStatus if s not in (WorkflowStatus.PENDING, WorkflowStatus.RUNNING)}
)

STATUS_COLOURS = {
    "WAITING": "grey",
    "PENDING": "grey",
    "SCHEDULING": "amber",
    "INITIALIZING": "blue",
    "RUNNING": "blue",
    "COMPLETED": "green",
}  # every FAILED* status is red
