"""Workflows, their task groups (gangs) and tasks, and the record of every status transition."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import Q

from workflows.choices import (
    TASK_TERMINAL_STATUSES,
    WORKFLOW_TERMINAL_STATUSES,
    Priority,
    TaskStatus,
    WorkflowStatus,
)
from workflows.spec.parser import IMAGE_MAX_LENGTH


def workflow_global_id(workflow_id: str, owner_pk: int) -> str:
    """The name a new workflow carries outside the database (docs/design.md §7, "Workflow ids"):
    unique across users, since ``workflow_id`` is unique only among its owner's workflows. Pod,
    Service and ConfigMap names, pod labels, artifact and sandbox folders are built from it (see
    :attr:`Workflow.global_id`), never from ``workflow_id``. ``<workflow_id>-u<owner pk>``: distinct
    for two owners, and never equal to an id of the earlier form ``<name>-<n>`` (which ends in digits
    after its last dash), which workflows stored before keep as theirs."""
    return f"{workflow_id}-u{owner_pk}"


def list_all_keys() -> list[str]:
    """Every label onto the pods (the label policy's default)."""
    return ["*"]


class Workflow(models.Model):
    """A submitted spec. ``workflow_id`` is ``<name>-<n>``, n counting up per owner and name: unique
    among its owner's workflows only, so that it says nothing about other users' workflows."""

    # Filled by workflows.selectors.workflow_detail_queryset (its prefetches) or by the submission that
    # created the rows: the groups by position, and the history by time (not fields).
    groups_in_order: list[TaskGroup]
    history_in_order: list[StatusTransition]
    tags_in_order: list[Tag]  # likewise (workflows.selectors), by name

    workflow_id = models.CharField(max_length=100, db_index=True)
    global_id = models.CharField(
        max_length=120, unique=True,
        help_text="Unique across users: what pod names, labels and artifact folders are built from.",
    )
    name = models.CharField(max_length=80, db_index=True)
    seq = models.PositiveIntegerField()
    pool = models.ForeignKey("scheduler.Pool", on_delete=models.PROTECT, related_name="workflows")
    pool_keys_version = models.PositiveIntegerField(default=1)
    pool_keys = models.JSONField(
        default=list, blank=True, help_text="The pool's [key, label] pairs at submission, coarsest first."
    )
    status = models.CharField(max_length=32, choices=WorkflowStatus.choices, default=WorkflowStatus.PENDING)
    priority = models.CharField(max_length=8, choices=Priority.choices, default=Priority.NORMAL)
    submitted_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="workflows")
    team = models.ForeignKey(
        "auth.Group", null=True, blank=True, on_delete=models.SET_NULL, related_name="workflows",
        help_text="The team whose quota in the pool this workflow's HIGH and NORMAL work counts against.",
    )
    submitted_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    failure_message = models.TextField(blank=True)
    spec_text = models.TextField(blank=True, help_text="The spec as rendered (templates filled in).")
    template_values = models.JSONField(
        default=dict, blank=True,
        help_text="The values the spec template was rendered with: default-values, then the submission's.",
    )
    labels = models.JSONField(default=dict, blank=True)
    # The app it was started from (osmo app submit), as facts: no relation into the catalog app.
    app_uuid = models.UUIDField(null=True, blank=True, db_index=True,
                                help_text="The app it was started from (kept when the app is renamed).")
    app_name = models.CharField(max_length=63, blank=True, default="", help_text="The app's name at submission.")
    app_version = models.PositiveIntegerField(null=True, blank=True, help_text="The app version it was started from.")
    # The labels its pods carry, as the label policy said at submission (docs/spec.md, "Labels").
    pod_labels = models.JSONField(default=dict, blank=True, editable=False)
    tags = models.ManyToManyField("workflows.Tag", blank=True, related_name="workflows")
    queue_timeout_s = models.PositiveIntegerField(null=True, blank=True)
    exec_timeout_s = models.PositiveIntegerField(null=True, blank=True)
    idempotency_key = models.CharField(max_length=255, null=True, blank=True)
    idempotency_hash = models.CharField(
        max_length=64, blank=True, default="",
        help_text="SHA-256 of the request (pool, priority, spec) that used the idempotency key.",
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-submitted_at", "-pk"]
        constraints = [
            models.UniqueConstraint(fields=["submitted_by", "name", "seq"], name="workflow_unique_owner_name_seq"),
            models.UniqueConstraint(fields=["submitted_by", "workflow_id"], name="workflow_unique_owner_id"),
            models.UniqueConstraint(
                fields=["submitted_by", "idempotency_key"],
                condition=Q(idempotency_key__isnull=False),
                name="workflow_unique_idempotency_key",
            ),
        ]
        indexes = [models.Index(fields=["status", "pool"], name="workflow_status_pool"),
                   models.Index(fields=["submitted_by", "status"], name="workflow_owner_status"),
                   # the list's order, for its first page without sorting every row (a user's; staff's all)
                   models.Index(fields=["submitted_by", "-submitted_at", "-id"], name="workflow_owner_newest"),
                   models.Index(fields=["-submitted_at", "-id"], name="workflow_newest")]

    def __str__(self) -> str:
        return self.workflow_id

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self.global_id:
            self.global_id = workflow_global_id(self.workflow_id, self.submitted_by_id)
        super().save(*args, **kwargs)

    @property
    def is_terminal(self) -> bool:
        return self.status in WORKFLOW_TERMINAL_STATUSES

    def can_cancel(self) -> bool:
        return not self.is_terminal


class RunState(models.Model):
    """What groups and tasks share: a status of :class:`TaskStatus` and the times around it."""

    status = models.CharField(max_length=32, choices=TaskStatus.choices, default=TaskStatus.WAITING)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    failure_message = models.TextField(blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True

    @property
    def is_terminal(self) -> bool:
        return self.status in TASK_TERMINAL_STATUSES


class TaskGroup(RunState):
    """A gang: all its tasks are placed and started together. Carries its constraint tree."""

    # Filled like Workflow.groups_in_order: the group's tasks by position (not a field).
    tasks_in_order: list[Task]

    workflow = models.ForeignKey(Workflow, on_delete=models.CASCADE, related_name="groups")
    name = models.CharField(max_length=128)
    position = models.PositiveIntegerField(default=0)
    upstream = models.JSONField(default=list, blank=True, help_text="Names of groups this one waits for.")
    constraint_tree = models.JSONField(default=dict, blank=True)
    unschedulable_reason = models.JSONField(null=True, blank=True)
    placement_report = models.JSONField(null=True, blank=True)
    scheduling_since = models.DateTimeField(null=True, blank=True)
    placed_at = models.DateTimeField(null=True, blank=True)
    dispatch_requested_at = models.DateTimeField(
        null=True, blank=True, help_text="When pod creation was last requested (placement or re-dispatch)."
    )
    # db_default: processes of the previous release, still running during a rollout, insert groups without it.
    dispatch_error = models.TextField(
        blank=True, default="", db_default="",
        help_text="Why the backend could not create the gang's pods at the last try (a transient error: retried "
        "until OSMO_DISPATCH_DEADLINE_SECONDS); empty once they are created.")
    # The solver's input, stored at submission so a placement cycle needs no task rows to solve
    # (docs/design.md §8): each task as [name, gpu, cpu_millis, memory_bytes, storage_bytes, [excluded]].
    task_requests = models.JSONField(null=True, blank=True, editable=False)
    signature = models.CharField(max_length=64, blank=True, default="", editable=False,
                                 help_text="Equal for gangs that are the same placement problem.")
    proof_epoch = models.BigIntegerField(
        null=True, blank=True, editable=False,
        help_text="The pool's capacity epoch at which this gang was proven unschedulable.",
    )
    reason_code = models.CharField(max_length=40, blank=True, default="", editable=False)
    reason_digest = models.CharField(max_length=16, blank=True, default="", editable=False,
                                     help_text="Digest of unschedulable_reason: unchanged reasons are not rewritten.")
    idle_fit = models.BooleanField(null=True, blank=True, editable=False,
                                   help_text="Whether the gang fits the idle pool (at idle_fit_epoch).")
    idle_fit_epoch = models.BigIntegerField(null=True, blank=True, editable=False)
    preemptions = models.PositiveIntegerField(default=0, help_text="How many times this gang was preempted.")
    retries = models.PositiveIntegerField(
        default=0, help_text="How many times this gang was rescheduled by an exit action or because the "
        "infrastructure lost one of its pods (its retry id; the pool's max_retries bounds it).")
    requeues = models.PositiveIntegerField(
        default=0, help_text="How many times the cluster refused to schedule this gang's pods and it was queued "
        "again (OSMO_K8S_UNSCHEDULABLE_REQUEUES bounds it).")

    class Meta:
        ordering = ["workflow", "position"]
        constraints = [models.UniqueConstraint(fields=["workflow", "name"], name="taskgroup_unique_name")]
        indexes = [models.Index(fields=["status"], name="taskgroup_status")]

    def __str__(self) -> str:
        return f"{self.workflow_id}/{self.name}"


#: A group's JSON columns (its tree, per-task requests, placement report): several KB per task of the
#: group. Rows of tasks or transitions that join their group leave them out (``defer``): the join copies
#: them into every row, 34 KB x 1,000 rows for one group of 1,000 tasks.
GROUP_JSON_JOINED = ("group__constraint_tree", "group__task_requests", "group__placement_report",
                     "group__unschedulable_reason")


class Task(RunState):
    """One pod. Requests in base units: gpu devices, cpu millicores, memory/storage bytes."""

    workflow = models.ForeignKey(Workflow, on_delete=models.CASCADE, related_name="tasks")
    group = models.ForeignKey(TaskGroup, on_delete=models.CASCADE, related_name="tasks")
    name = models.CharField(max_length=128)
    position = models.PositiveIntegerField(default=0)
    lead = models.BooleanField(default=False)
    image = models.CharField(max_length=IMAGE_MAX_LENGTH, blank=True)
    command = models.JSONField(default=list, blank=True)
    args = models.JSONField(default=list, blank=True)
    environment = models.JSONField(default=dict, blank=True)
    resource_name = models.CharField(max_length=128, default="default")
    gpu = models.PositiveIntegerField(default=0)
    cpu_millis = models.PositiveBigIntegerField(default=0)
    memory_bytes = models.PositiveBigIntegerField(default=0)
    storage_bytes = models.PositiveBigIntegerField(default=0)
    nodes_excluded = models.JSONField(default=list, blank=True)
    topology = models.JSONField(default=list, blank=True)
    node = models.ForeignKey("scheduler.Node", null=True, blank=True, on_delete=models.SET_NULL, related_name="tasks")
    node_name = models.CharField(max_length=253, blank=True, default="",
                                 help_text="The placed node's name, kept when the node is deleted.")
    pod_name = models.CharField(max_length=253, blank=True)
    exit_code = models.IntegerField(null=True, blank=True)
    dispatched_at = models.DateTimeField(null=True, blank=True)
    pod_deleted_at = models.DateTimeField(null=True, blank=True)
    # The pod whose runtime arrived at the group's barrier (docs/runtime.md); a re-placed task has a new
    # pod name, so an arrival of its earlier pod does not count.
    barrier_pod = models.CharField(max_length=253, blank=True, default="", editable=False)

    class Meta:
        ordering = ["workflow", "position"]
        constraints = [models.UniqueConstraint(fields=["workflow", "name"], name="task_unique_name")]
        indexes = [models.Index(fields=["status"], name="task_status")]

    def __str__(self) -> str:
        return f"{self.workflow_id}/{self.name}"

    @property
    def node_removed(self) -> bool:
        """It was placed on a node deleted since (whose name ``node_name`` keeps)."""
        return self.node_id is None and bool(self.node_name)

    @property
    def node_shown(self) -> str:
        """The node as people read it: its name, ``"a1 (removed)"`` once deleted, ``""`` before placement."""
        if self.node_id is not None:
            return self.node.name if self.node is not None else self.node_name
        return f"{self.node_name} (removed)" if self.node_name else ""


class StatusTransition(models.Model):
    """Every status change of a workflow, group or task, with its time."""

    workflow = models.ForeignKey(Workflow, on_delete=models.CASCADE, related_name="transitions")
    group = models.ForeignKey(TaskGroup, null=True, blank=True, on_delete=models.CASCADE, related_name="transitions")
    task = models.ForeignKey(Task, null=True, blank=True, on_delete=models.CASCADE, related_name="transitions")
    from_status = models.CharField(max_length=32, blank=True)
    to_status = models.CharField(max_length=32)
    message = models.TextField(blank=True)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["at", "pk"]

    def __str__(self) -> str:
        subject = self.task or self.group or self.workflow
        return f"{subject}: {self.from_status or '-'} -> {self.to_status}"


class TaskSession(models.Model):
    """A session into a running task (``osmo workflow exec``, ``port-forward``; docs/design.md §13): who,
    which task, what kind, when it started and ended, the bytes each way. Made by the REST call that
    checks everything (with the digest of a single-use ticket), started when its websocket opens it."""

    KIND_EXEC = "exec"
    KIND_PORT_FORWARD = "port-forward"
    KIND_PORT_FORWARD_UDP = "port-forward-udp"  # datagrams to a UDP port the task is bound to (--udp)
    KINDS = [(KIND_EXEC, "exec"), (KIND_PORT_FORWARD, "port-forward"), (KIND_PORT_FORWARD_UDP, "port-forward-udp")]

    workflow = models.ForeignKey(Workflow, on_delete=models.CASCADE, related_name="sessions")
    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="sessions")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="task_sessions")
    kind = models.CharField(max_length=16, choices=KINDS)
    command = models.JSONField(default=list, blank=True)
    tty = models.BooleanField(default=False)
    port = models.PositiveIntegerField(null=True, blank=True)
    browser = models.BooleanField(default=False, help_text="Opened from the web pages (the task page's terminal, "
                                  "an \"Open port\" request) rather than the CLI.")
    ticket_digest = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    ticket_expires_at = models.DateTimeField()
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    bytes_in = models.PositiveBigIntegerField(default=0, help_text="From the user to the task.")
    bytes_out = models.PositiveBigIntegerField(default=0, help_text="From the task to the user.")
    exit_code = models.IntegerField(null=True, blank=True)
    end_reason = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["created_at", "pk"]
        indexes = [models.Index(fields=["workflow", "created_at"], name="tasksession_workflow")]

    def __str__(self) -> str:
        return f"{self.kind} session {self.pk} into {self.task_id}"


class WorkflowLabel(models.Model):
    """One label of a workflow, a row per key: what ``?label=KEY=SELECTOR`` finds workflows by (an index on
    key, value and workflow, whose pattern operator class also serves ``value*`` prefixes).
    ``Workflow.labels`` stays the copy the answers show. ``submitted_by`` repeats the workflow's owner (who
    may see it, written with the row and never changed) so that a list's count of one selector's matches
    reads the (owner, key, value) index alone, without joining the workflows."""

    workflow = models.ForeignKey(Workflow, on_delete=models.CASCADE, related_name="label_rows")
    submitted_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+",
                                     db_index=False)  # (the owner's index below leads with it)
    key = models.CharField(max_length=317)  # a 253-character prefix, '/', a 63-character name
    value = models.CharField(max_length=63)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["workflow", "key"], name="workflowlabel_unique_key")]
        # the workflow too: a selection and its count read the index alone (an index-only scan)
        indexes = [models.Index(fields=["key", "value", "workflow"], name="workflowlabel_key_value",
                                opclasses=["varchar_pattern_ops", "varchar_pattern_ops", "int8_ops"]),
                   models.Index(fields=["submitted_by", "key", "value"], name="workflowlabel_owner_key_value",
                                opclasses=["int4_ops", "varchar_pattern_ops", "varchar_pattern_ops"])]

    def __str__(self) -> str:
        return f"{self.key}={self.value}"


class LabelValue(models.Model):
    """A value some workflow's label ``key`` has had, once per key and value, written with the label rows
    (never removed: workflows are not deleted, and a value no workflow has any more selects nothing).
    A wildcard's values are read off it, its fixed prefix's range of the key, rather than by stepping
    through the label rows' distinct values one index probe at a time."""

    key = models.CharField(max_length=317)
    value = models.CharField(max_length=63)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["key", "value"], name="labelvalue_key_value",
                                               opclasses=["varchar_pattern_ops", "varchar_pattern_ops"])]

    def __str__(self) -> str:
        return f"{self.key}={self.value}"


class Tag(models.Model):
    """A tag an admin defines; users put it on their workflows (``osmo workflow tag``) and list by it."""

    name = models.CharField(max_length=63, unique=True,
                            help_text="Letters, digits, '-', '_', '.', starting and ending alphanumeric.")
    description = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class LabelPolicySetting(models.Model):
    """The admin's label policy (one row; :func:`workflows.labels.label_policy` reads it)."""

    allowed_keys = models.JSONField(default=list, blank=True, help_text="Label keys a workflow may carry "
                                    '(a JSON list, e.g. ["project", "team"]); empty: any key.')
    required_keys = models.JSONField(default=list, blank=True, help_text="Label keys every workflow must carry.")
    max_labels = models.PositiveSmallIntegerField(default=16, help_text="At most this many labels (16 at most).")
    pod_label_keys = models.JSONField(default=list_all_keys, blank=True,
                                      help_text='The keys copied onto pods; ["*"]: every key; []: none.')
    pod_label_prefix = models.CharField(max_length=200, blank=True, default="",
                                        help_text="Put before each pod label key, e.g. example.com/ or wf-.")
    metric_values = models.JSONField(
        default=dict, blank=True,
        help_text='Label keys that become metric dimensions, each with the values counted by name, e.g. '
        '{"team": ["robotics", "vision"]} (at most 4 keys of 20 values; any other value counts as "other").')
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "label policy"
        verbose_name_plural = "label policy"

    def __str__(self) -> str:
        return "label policy"


class PoolCycleState(models.Model):
    """What a pool's last placement cycle hands to the next (docs/architecture.md, "cycle state"): the
    JSON of :class:`workflows.scheduling.cycle.state.CycleState`, read and written by the cycle only,
    under the pool's lock. One row per pool that has walked; none yet is an empty state. The workflows
    app's own table, keyed by the pool, so that the scheduler's ``Pool`` carries no state of the cycle
    that places workflows; the cycle reads it with the pool's row (one join, the same query) and writes it
    with one upsert."""

    pool = models.OneToOneField("scheduler.Pool", on_delete=models.CASCADE, primary_key=True,
                                related_name="cycle")
    state = models.JSONField(help_text="What the last placement cycle saw and where it stopped.")

    def __str__(self) -> str:
        return f"cycle state of pool {self.pool_id}"
