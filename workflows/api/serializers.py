from __future__ import annotations

from typing import Any

from django.core.files.uploadedfile import UploadedFile
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from osmo.api.serializers import OutputModelSerializer, SortedJSONField
from parsing.natural import natural_sorted
from scheduler.choices import PoolStatus
from scheduler.resources import RESOURCES
from workflows.choices import Priority
from workflows.models import StatusTransition, Task, TaskGroup, Workflow
from workflows.scheduling.pod.podspec import workflow_pods
from workflows.scheduling.pod.runtime import artifact_store, runtime_backend
from workflows.selectors import task_domains
from workflows.spec.loader import SpecLimits
from workflows.waiting import workflow_waiting


@extend_schema_field({"oneOf": [{"type": "string", "minLength": 1, "pattern": "\\S"},
                               {"type": "object", "additionalProperties": True}]})
class SpecField(serializers.Field):
    """The workflow spec: YAML (or JSON) text, or an already-parsed object; in a multipart form (``curl -F
    spec=@spec.yaml``), an uploaded file, read as its text."""

    default_error_messages = {"invalid": "Must be YAML text or an object."}

    def to_internal_value(self, data: Any) -> str | dict[str, Any]:
        if isinstance(data, (str, dict)):
            return data
        if isinstance(data, UploadedFile):
            return self._uploaded_text(data)
        self.fail("invalid")

    @staticmethod
    def _uploaded_text(upload: UploadedFile) -> str:
        limit = SpecLimits().max_bytes
        if (upload.size or 0) > limit:
            raise serializers.ValidationError(
                f"The uploaded file {upload.name} is larger than {limit} bytes, the limit of a spec.")
        try:
            return upload.read().decode("utf-8")
        except UnicodeDecodeError as exc:
            raise serializers.ValidationError(
                f"The uploaded file {upload.name} is not UTF-8 text (byte {exc.start}).") from exc

    def to_representation(self, value: Any) -> Any:
        return value


PRIORITY_CHOICES_TEXT = ", ".join(Priority.values)


LABELS_HELP = ("Workflow labels (Kubernetes label syntax) over the spec's workflow.labels, as --label KEY=VALUE; "
               "they must pass the admin's label policy.")


class WorkflowRestartInputSerializer(serializers.Serializer):
    pool = serializers.CharField(max_length=63, required=False, allow_blank=True,
                                 help_text="Run in this pool (default: the workflow's).")
    labels = serializers.DictField(child=serializers.CharField(allow_blank=True, trim_whitespace=False),
                                   required=False, default=dict, help_text="Labels over the workflow's.")


class WorkflowTagInputSerializer(serializers.Serializer):
    add = serializers.ListField(child=serializers.CharField(max_length=63), required=False, default=list,
                                max_length=64, help_text="Tags to add (after removing).")
    remove = serializers.ListField(child=serializers.CharField(max_length=63), required=False, default=list,
                                   max_length=64, help_text="Tags to remove (first).")


class WorkflowTagOutputSerializer(serializers.Serializer):
    workflow = serializers.CharField()
    tags = serializers.ListField(child=serializers.CharField())


class TagOutputSerializer(serializers.Serializer):
    name = serializers.CharField()
    description = serializers.CharField()


class TagListOutputSerializer(serializers.Serializer):
    tags = serializers.ListField(child=serializers.CharField(), help_text="The tags one may put on a workflow.")
    details = TagOutputSerializer(many=True)


class WorkflowSubmitInputSerializer(serializers.Serializer):
    pool = serializers.CharField(
        max_length=63, required=False, allow_blank=True,
        help_text="The pool to run in (default: the spec's workflow.pool; naming another one is refused).",
    )
    spec = SpecField()
    priority = serializers.ChoiceField(
        choices=Priority.choices, default=Priority.NORMAL,
        error_messages={"invalid_choice": f'"{{input}}" is not a priority; choose one of {PRIORITY_CHOICES_TEXT}.'},
    )
    dry_run = serializers.BooleanField(default=False)
    team = serializers.CharField(
        max_length=150, required=False, allow_blank=True,
        help_text="The team whose quota this workflow counts against (default: your one team with a quota in "
        "the pool, else your one team).",
    )
    set = serializers.DictField(
        child=serializers.JSONField(), required=False, default=dict,
        help_text="Template values (docs/design.md §11): override the spec's default-values.",
    )
    set_env = serializers.DictField(
        child=serializers.CharField(allow_blank=True, trim_whitespace=False), required=False, default=dict,
        help_text="Environment variables set on every task.",
    )
    labels = serializers.DictField(child=serializers.CharField(allow_blank=True, trim_whitespace=False),
                                   required=False, default=dict, help_text=LABELS_HELP)


class SpecWarningSerializer(serializers.Serializer):
    path = serializers.CharField(help_text="Where in the (rendered) spec, as in error paths.")
    message = serializers.CharField(help_text="What was accepted and how (names the line).")


class WorkflowSpecOutputSerializer(serializers.Serializer):
    workflow = serializers.CharField()
    pool = serializers.CharField()
    priority = serializers.CharField()
    spec = serializers.CharField(help_text="The spec as rendered and stored.")
    template_values = serializers.DictField(help_text="The values the template was rendered with.")


class TaskRequestsSerializer(serializers.Serializer):
    gpu = serializers.IntegerField()
    cpu = serializers.IntegerField(help_text="millicores")
    memory = serializers.IntegerField(help_text="bytes")
    storage = serializers.IntegerField(help_text="bytes")


class TaskOutputSerializer(OutputModelSerializer):
    node = serializers.SerializerMethodField()
    node_removed = serializers.BooleanField(read_only=True, help_text="The node it was placed on was deleted since "
                                            "(`node` keeps its name).")
    domains = serializers.SerializerMethodField()
    requests = serializers.SerializerMethodField()
    outputs = serializers.SerializerMethodField(
        help_text="Where the task's {{output}} goes: its artifact URL in the pool's artifact store (for "
                  "downstream `task` inputs; docs/runtime.md; none on a backend without the task runtime), then "
                  "the URLs of the spec's `outputs` as written.")

    class Meta:
        model = Task
        fields = ["name", "lead", "status", "node", "node_removed", "domains", "pod_name", "requests", "exit_code",
                  "started_at", "finished_at", "failure_message", "outputs"]

    def get_outputs(self, task: Task) -> list[str]:
        store = self.context.get("outputs_store", "")
        pods = self.context.get("pods")
        written = list(pods.tasks[task.name].outputs) if pods is not None and task.name in pods.tasks else []
        return ([f"{store}/{task.name}"] if store else []) + written

    def get_node(self, task: Task) -> str | None:
        if task.node is not None:
            return task.node.name
        return task.node_name or None

    @extend_schema_field({"type": "object", "additionalProperties": {"type": "string"}})
    def get_domains(self, task: Task) -> dict[str, str]:
        return task_domains(task, self.context.get("pool_keys", []))

    @extend_schema_field(TaskRequestsSerializer)
    def get_requests(self, task: Task) -> dict[str, int]:
        return {r.name: getattr(task, r.amount_field) for r in RESOURCES}


class WaitingHolderSerializer(serializers.Serializer):
    workflow = serializers.CharField()
    gpu = serializers.IntegerField()
    tasks = serializers.IntegerField()


class WaitingDomainSerializer(serializers.Serializer):
    key = serializers.CharField()
    path = serializers.ListField(child=serializers.CharField())


class WaitingDomainCountSerializer(serializers.Serializer):
    key = serializers.CharField()
    exist = serializers.IntegerField(help_text="Domains of this key the pool's nodes form.")
    schedulable = serializers.IntegerField(help_text="Of those, domains with a schedulable node.")


class WaitingFairShareSerializer(serializers.Serializer):
    behind = serializers.IntegerField(help_text="Gangs submitted after it that go first: their teams used less of "
                                      "the pool recently.")
    ahead_of = serializers.IntegerField(help_text="Gangs submitted before it that it goes before: their teams used "
                                        "more of the pool recently.")


class WaitingOutputSerializer(serializers.Serializer):
    """Why a SCHEDULING group waits (docs/design.md §11); ``lines`` are the words the CLI and the
    page show too."""

    position = serializers.IntegerField(help_text="1 + the gangs ahead of it in the pool's queue.")
    ahead = serializers.DictField(child=serializers.IntegerField(), help_text="Gangs ahead, per priority.")
    fairshare = WaitingFairShareSerializer(
        allow_null=True, help_text="What fair share over time changed in its place (null: the pool's "
        "fairshare_half_life is 0, submission order).")
    domain = WaitingDomainSerializer(allow_null=True, help_text="Best domain of the constraint that failed.")
    holders = WaitingHolderSerializer(many=True, help_text="Workflows holding that domain, most GPUs first.")
    domains = WaitingDomainCountSerializer(allow_null=True)
    reason = serializers.CharField(help_text="The reason, reworded against the pool's inventory.")
    lines = serializers.ListField(child=serializers.CharField())


class TaskGroupOutputSerializer(OutputModelSerializer):
    tasks = serializers.SerializerMethodField()
    constraint_tree = SortedJSONField()
    unschedulable_reason = SortedJSONField(allow_null=True)
    placement_report = SortedJSONField(allow_null=True)
    waiting = serializers.SerializerMethodField()

    class Meta:
        model = TaskGroup
        fields = ["name", "status", "upstream", "constraint_tree", "unschedulable_reason", "waiting",
                  "placement_report", "scheduling_since", "started_at", "finished_at", "failure_message",
                  "dispatch_error", "preemptions", "retries", "requeues", "tasks"]

    @extend_schema_field(WaitingOutputSerializer(allow_null=True))
    def get_waiting(self, group: TaskGroup) -> dict[str, Any] | None:
        return self.context.get("waiting", {}).get(group.pk)

    @extend_schema_field(TaskOutputSerializer(many=True))
    def get_tasks(self, group: TaskGroup) -> list[dict[str, Any]]:
        tasks = natural_sorted(group.tasks_in_order, key=lambda task: task.name)  # t2 before t10, as the CLI and page
        return list(TaskOutputSerializer(tasks, many=True, context=self.context).data)


class LabelsField(serializers.DictField):
    """A workflow's labels, by key (the same bytes whichever order the database keeps them in)."""

    child = serializers.CharField()

    def to_representation(self, value: Any) -> dict[str, str]:
        return {str(key): str(text) for key, text in sorted((value or {}).items())}


def workflow_tag_names(workflow: Workflow) -> list[str]:
    """Its tags by name (as :mod:`workflows.selectors` prefetched them)."""
    tags = getattr(workflow, "tags_in_order", None)
    if tags is None:
        tags = workflow.tags.order_by("name")
    return [tag.name for tag in tags]


class WorkflowSummaryOutputSerializer(OutputModelSerializer):
    id = serializers.CharField(source="workflow_id")
    pool = serializers.CharField(source="pool.name")
    submitted_by = serializers.CharField(source="submitted_by.username")
    task_count = serializers.IntegerField(read_only=True)
    labels = LabelsField(read_only=True)
    tags = serializers.SerializerMethodField()

    class Meta:
        model = Workflow
        fields = ["id", "name", "pool", "status", "priority", "submitted_by", "submitted_at", "started_at",
                  "finished_at", "failure_message", "task_count", "labels", "tags"]

    def get_tags(self, workflow: Workflow) -> list[str]:
        return workflow_tag_names(workflow)


class StatusTransitionOutputSerializer(OutputModelSerializer):
    subject = serializers.SerializerMethodField()

    class Meta:
        model = StatusTransition
        fields = ["at", "subject", "from_status", "to_status", "message"]

    def get_subject(self, transition: StatusTransition) -> str:
        """``workflow``, ``group <name>`` or ``task <name>``."""
        if transition.task is not None:
            return f"task {transition.task.name}"
        if transition.group is not None:
            return f"group {transition.group.name}"
        return "workflow"


class WorkflowAppSerializer(serializers.Serializer):
    name = serializers.CharField(help_text="The app's name when the workflow was submitted.")
    version = serializers.IntegerField()
    uuid = serializers.CharField(allow_null=True, help_text="The app's id (it stays when the app is renamed).")


class WorkflowOutputSerializer(OutputModelSerializer):
    id = serializers.CharField(source="workflow_id")
    pool = serializers.CharField(source="pool.name")
    submitted_by = serializers.CharField(source="submitted_by.username")
    team = serializers.SerializerMethodField(help_text="The team whose quota it counts against (None: none).")
    groups = serializers.SerializerMethodField()
    history = StatusTransitionOutputSerializer(source="history_in_order", many=True, read_only=True)
    labels = LabelsField(read_only=True, help_text="The spec's labels with the submission's --label values over them.")
    tags = serializers.SerializerMethodField(help_text="Tags put on it (osmo workflow tag), by name.")
    app = serializers.SerializerMethodField(help_text="The app version it was started from (None: not from an app).")

    class Meta:
        model = Workflow
        fields = ["id", "name", "pool", "status", "priority", "submitted_by", "team", "submitted_at", "started_at",
                  "finished_at", "failure_message", "labels", "tags", "app", "groups", "history"]

    def get_tags(self, workflow: Workflow) -> list[str]:
        return workflow_tag_names(workflow)

    @extend_schema_field(WorkflowAppSerializer(allow_null=True))
    def get_app(self, workflow: Workflow) -> dict[str, Any] | None:
        if workflow.app_version is None:
            return None
        return {"name": workflow.app_name, "version": workflow.app_version,
                "uuid": str(workflow.app_uuid) if workflow.app_uuid else None}

    def get_team(self, workflow: Workflow) -> str | None:
        return workflow.team.name if workflow.team_id and workflow.team else None

    @extend_schema_field(TaskGroupOutputSerializer(many=True))
    def get_groups(self, workflow: Workflow) -> list[dict[str, Any]]:
        if workflow.pool_keys_version == workflow.pool.keys_version:  # the pairs stored at submission still hold
            keys = [(str(key), str(label)) for key, label in workflow.pool_keys]
        else:
            keys = [(k.key, k.label) for k in sorted(workflow.pool.topology_keys.all(), key=lambda k: k.position)]
        outputs_store = (f"{artifact_store(workflow.pool.name)}/{workflow.global_id}"
                         if runtime_backend(workflow.pool.backend) else "")
        # the reader's view of who holds what (its own request; without one, the owner's)
        request = self.context.get("request")
        viewer = request.user if request is not None and request.user.is_authenticated else workflow.submitted_by
        context = {**self.context, "pool_keys": keys, "waiting": workflow_waiting(workflow, keys, viewer=viewer),
                   "outputs_store": outputs_store, "pods": workflow_pods(workflow.spec_text or "")}
        return list(TaskGroupOutputSerializer(workflow.groups_in_order, many=True, context=context).data)


class WorkflowSubmitOutputSerializer(WorkflowOutputSerializer):
    """The submitted workflow, and what its spec's validation accepted but says (a repeated key)."""

    warnings = SpecWarningSerializer(many=True, read_only=True)

    class Meta(WorkflowOutputSerializer.Meta):
        fields = [*WorkflowOutputSerializer.Meta.fields, "warnings"]


class PlacementPreviewSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=["placed", "unschedulable", "undecided"])
    tasks = serializers.DictField(child=serializers.CharField())
    report = serializers.ListField(child=serializers.DictField())
    reason = serializers.DictField(allow_null=True)
    message = serializers.CharField()


class DryRunGroupSerializer(serializers.Serializer):
    name = serializers.CharField()
    constraint_tree = serializers.JSONField()
    constraint_outline = serializers.CharField()
    placement = PlacementPreviewSerializer()
    waiting_lines = serializers.ListField(child=serializers.CharField(), help_text="When it cannot be placed now: "
                                          "who holds the capacity it needs (as a queued group's `waiting.lines`).")


class DryRunOutputSerializer(serializers.Serializer):
    valid = serializers.BooleanField()
    workflow = serializers.CharField()
    pool = serializers.CharField()
    pool_status = serializers.ChoiceField(choices=PoolStatus.choices, help_text="Not ONLINE: nothing is placed "
                                          "there now, and each group's placement says so.")
    team = serializers.CharField(allow_null=True, help_text="The team whose quota the workflow would count "
                                 "against (as for a submission).")
    groups = DryRunGroupSerializer(many=True)
    warnings = SpecWarningSerializer(many=True, help_text="Accepted, but worth saying (a repeated key).")


class TaskLogEntryOutputSerializer(serializers.Serializer):
    task = serializers.CharField()
    pod = serializers.CharField(allow_blank=True)
    truncated = serializers.BooleanField(help_text="This task's log has more lines before those shown.")
    error = serializers.CharField(allow_null=True, help_text="Why the task has no log here (no pod yet; the "
                                                             "backend has none), else None.")


class TaskLogOutputSerializer(serializers.Serializer):
    workflow = serializers.CharField()
    task = serializers.CharField(allow_null=True, help_text="The task read; None when every task's log is shown.")
    pod = serializers.CharField(allow_null=True)
    lines = serializers.ListField(child=serializers.CharField(allow_blank=True, trim_whitespace=False),
                                  help_text="Prefixed `[task] ` when every task's log is shown.")
    truncated = serializers.BooleanField(help_text="A log has more lines before these (see `tail`).")
    tasks = TaskLogEntryOutputSerializer(many=True, help_text="The tasks read, in the order of `lines`.")
    tasks_omitted = serializers.IntegerField(help_text="Tasks left out by the cap on tasks per answer.")


class EventOutputSerializer(serializers.Serializer):
    time = serializers.DateTimeField()
    source = serializers.ChoiceField(choices=["service", "backend"])  # type: ignore[assignment]  # DRF pops declared fields
    task = serializers.CharField(allow_null=True, help_text="The task it concerns (None: its group or workflow).")
    kind = serializers.CharField(help_text="`status` for the service's transitions; the backend's reason "
                                           "(Scheduled, Pulled, OOMKilled, ImagePullBackOff, ...).")
    message = serializers.CharField(allow_blank=True)


class WorkflowEventsOutputSerializer(serializers.Serializer):
    workflow = serializers.CharField()
    events = EventOutputSerializer(many=True)
    backend_error = serializers.CharField(allow_null=True, help_text="Why the backend's events are missing "
                                                                     "(None: they are included).")


class UserOutputSerializer(serializers.Serializer):
    username = serializers.CharField()
    is_staff = serializers.BooleanField()


class ErrorItemSerializer(serializers.Serializer):
    path = serializers.CharField()
    message = serializers.CharField()


class ErrorOutputSerializer(serializers.Serializer):
    code = serializers.CharField()
    message = serializers.CharField()
    details = serializers.DictField()




class SessionCreateInputSerializer(serializers.Serializer):
    """A session into a running task (docs/api.md, "Sessions into running tasks")."""

    # (checked by workflows.sessions.service: a choice field here would collide with the credentials' `kind` enum)
    kind = serializers.CharField(help_text="`exec` or `port-forward`")
    command = serializers.ListField(child=serializers.CharField(allow_blank=True, trim_whitespace=False),
                                    required=False, max_length=256,
                                    help_text="exec: the command and its arguments, e.g. [\"/bin/sh\", \"-c\", \"ls\"]")
    tty = serializers.BooleanField(required=False, default=False, help_text="exec: run it on a terminal")
    port = serializers.IntegerField(required=False, min_value=1, max_value=65535,
                                    help_text="port-forward: the task's port")


class SessionOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    kind = serializers.CharField()
    workflow = serializers.CharField()
    task = serializers.CharField()
    ticket = serializers.CharField(help_text="Opens the websocket once, within `expires_in` seconds.")
    websocket = serializers.CharField(help_text="The websocket's path: /ws/sessions/<kind>/<ticket>/")
    expires_in = serializers.IntegerField()
    idle_timeout = serializers.IntegerField(help_text="Seconds without a byte either way before the session ends.")
    max_seconds = serializers.IntegerField(help_text="The longest a session stays open.")
