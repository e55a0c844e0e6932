"""Statuses after OSMO (docs/design.md §6) and priorities, as Django choices.

The status vocabulary and the sets derived from it are defined once, in the pure rules module
:mod:`workflows.lifecycle.rules`; these classes give them to model fields and forms.
"""

from django.db import models

from scheduler.placement import ReasonCode
from workflows.lifecycle import rules


class TaskStatus(models.TextChoices):
    """Status of a task and of a task group (a group moves as one gang)."""

    WAITING = rules.WAITING
    SCHEDULING = rules.SCHEDULING
    INITIALIZING = rules.INITIALIZING
    RUNNING = rules.RUNNING
    COMPLETED = rules.COMPLETED
    FAILED = rules.FAILED
    FAILED_CANCELED = rules.FAILED_CANCELED
    FAILED_BACKEND_ERROR = rules.FAILED_BACKEND_ERROR
    FAILED_QUEUE_TIMEOUT = rules.FAILED_QUEUE_TIMEOUT
    FAILED_UPSTREAM = rules.FAILED_UPSTREAM
    FAILED_SERVER_ERROR = rules.FAILED_SERVER_ERROR
    FAILED_PREEMPTED = rules.FAILED_PREEMPTED
    FAILED_EVICTED = rules.FAILED_EVICTED
    FAILED_IMAGE_PULL = rules.FAILED_IMAGE_PULL
    FAILED_START_ERROR = rules.FAILED_START_ERROR
    FAILED_START_TIMEOUT = rules.FAILED_START_TIMEOUT
    FAILED_EXEC_TIMEOUT = rules.FAILED_EXEC_TIMEOUT
    RESCHEDULED = rules.RESCHEDULED


class WorkflowStatus(models.TextChoices):
    PENDING = rules.PENDING
    RUNNING = rules.RUNNING
    COMPLETED = rules.COMPLETED
    FAILED = rules.FAILED
    FAILED_CANCELED = rules.FAILED_CANCELED
    FAILED_BACKEND_ERROR = rules.FAILED_BACKEND_ERROR
    FAILED_QUEUE_TIMEOUT = rules.FAILED_QUEUE_TIMEOUT
    FAILED_UPSTREAM = rules.FAILED_UPSTREAM
    FAILED_SERVER_ERROR = rules.FAILED_SERVER_ERROR
    FAILED_PREEMPTED = rules.FAILED_PREEMPTED
    FAILED_EVICTED = rules.FAILED_EVICTED
    FAILED_IMAGE_PULL = rules.FAILED_IMAGE_PULL
    FAILED_START_ERROR = rules.FAILED_START_ERROR
    FAILED_START_TIMEOUT = rules.FAILED_START_TIMEOUT
    FAILED_EXEC_TIMEOUT = rules.FAILED_EXEC_TIMEOUT


class Priority(models.TextChoices):
    LOW = "LOW"
    NORMAL = "NORMAL"
    HIGH = "HIGH"


PRIORITY_RANK = {Priority.HIGH: 0, Priority.NORMAL: 1, Priority.LOW: 2}

# What ends a queued gang's wait, by reason code, for the reasons capacity freeing up does not end
# (the API's waiting lines, the CLI and the pages say it in these words).
WAIT_ENDS = {
    ReasonCode.POOL_NOT_ONLINE.value: "It stays queued and is placed once an administrator sets the pool ONLINE "
                                      "again.",
    ReasonCode.BACKEND_NOT_ONLINE.value: "It stays queued and is placed once the pool's backend answers again "
                                         "(its next successful sync) or an administrator ends its maintenance.",
    ReasonCode.QUOTA_EXCEEDED.value: "It stays queued and is placed once its team's HIGH and NORMAL work in "
                                     "the pool leaves room in the quota (or the quota grows).",
    ReasonCode.CLUSTER_REFUSED.value: "The cluster refused to schedule its pods: it is placed again once its "
                                      "nodes were read anew (a bounded number of times, then it fails).",
    ReasonCode.POOL_KEYS_CHANGED.value: "It is not placed while the pool's keys differ from those it was "
                                        "submitted under: cancel it and submit the spec again.",
}

TASK_TERMINAL_STATUSES = frozenset(TaskStatus(s) for s in rules.TERMINAL)
TASK_FAILED_STATUSES = frozenset(TaskStatus(s) for s in rules.FAILURES)
TASK_ACTIVE_STATUSES = frozenset(TaskStatus(s) for s in rules.ACTIVE)  # holding capacity
WORKFLOW_TERMINAL_STATUSES = frozenset(WorkflowStatus(s) for s in rules.WORKFLOW_TERMINAL)
WORKFLOW_ACTIVE_STATUSES = frozenset(WorkflowStatus) - WORKFLOW_TERMINAL_STATUSES  # not ended: PENDING, RUNNING

STATUS_COLOURS = {
    "WAITING": "grey",
    "PENDING": "grey",
    "SCHEDULING": "amber",
    "INITIALIZING": "blue",
    "RUNNING": "blue",
    "RESCHEDULED": "amber",
    "COMPLETED": "green",
}  # every FAILED* status is red
