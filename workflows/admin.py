"""Read-mostly admin for workflows: find one, see its groups, tasks and history, cancel it."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.db import transaction

from osmo.errors import OsmoError
from workflows.labels import policy_from_row
from workflows.lifecycle.reservations import reservations_drop
from workflows.models import LabelPolicySetting, StatusTransition, Tag, Task, TaskGroup, Workflow
from workflows.services import workflow_cancel
from workflows.spec.labels import label_value_problem, policy_problems


class TaskGroupInline(admin.TabularInline):
    model = TaskGroup
    fields = readonly_fields = ("name", "status", "upstream", "scheduling_since", "started_at", "finished_at",
                                "failure_message")
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request, obj=None) -> bool:
        return False


class TaskInline(admin.TabularInline):
    model = Task
    fk_name = "group"
    fields = readonly_fields = ("name", "lead", "status", "node", "pod_name", "gpu", "started_at", "finished_at",
                                "exit_code")
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Workflow)
class WorkflowAdmin(admin.ModelAdmin):
    list_display = ["workflow_id", "pool", "status", "priority", "submitted_by", "submitted_at", "finished_at"]
    list_filter = ["status", "priority", "pool", "tags"]
    search_fields = ["workflow_id", "global_id", "name", "submitted_by__username"]  # global_id: from a pod label
    filter_horizontal = ["tags"]  # the one thing changed here: an admin may tag workflows
    list_select_related = ["pool", "submitted_by"]
    date_hierarchy = "submitted_at"
    inlines = [TaskGroupInline]
    actions = ["cancel_workflows"]
    readonly_fields = [f.name for f in Workflow._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False

    def delete_model(self, request, obj) -> None:
        self.delete_queryset(request, Workflow.objects.filter(pk=obj.pk))

    @transaction.atomic
    def delete_queryset(self, request, queryset) -> None:
        # Reservations name their task by id, without a foreign key to cascade: those of the deleted
        # tasks are released (their capacity freed) and deleted first.
        reservations_drop(task_ids=list(Task.objects.filter(workflow__in=queryset).values_list("pk", flat=True)))
        super().delete_queryset(request, queryset)

    @admin.action(description="Cancel selected workflows")
    def cancel_workflows(self, request, queryset) -> None:
        cancelled = 0
        for workflow in queryset.order_by("pk"):
            try:
                workflow_cancel(workflow_pk=workflow.pk, user=request.user)
                cancelled += 1
            except OsmoError as exc:
                self.message_user(request, exc.message, level=messages.WARNING)
        self.message_user(request, f"Cancelled {cancelled} workflow(s).")


@admin.register(TaskGroup)
class TaskGroupAdmin(admin.ModelAdmin):
    list_display = ["__str__", "status", "scheduling_since", "started_at", "finished_at"]
    list_filter = ["status", "workflow__pool"]
    search_fields = ["workflow__workflow_id", "name"]
    list_select_related = ["workflow"]
    inlines = [TaskInline]
    readonly_fields = [f.name for f in TaskGroup._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False


@admin.register(StatusTransition)
class StatusTransitionAdmin(admin.ModelAdmin):
    list_display = ["at", "workflow", "group", "task", "from_status", "to_status", "message"]
    list_filter = ["to_status"]
    search_fields = ["workflow__workflow_id"]
    list_select_related = ["workflow", "group", "task"]
    readonly_fields = [f.name for f in StatusTransition._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


class TagForm(forms.ModelForm):
    class Meta:
        model = Tag
        fields = ["name", "description"]

    def clean_name(self) -> str:
        name = self.cleaned_data["name"]
        problem = label_value_problem(name)
        if problem:
            raise forms.ValidationError(problem.replace("label value", "tag name"))
        return name


@admin.register(Tag)
class TagAdmin(admin.ModelAdmin):
    """The tags users may put on their workflows (``osmo workflow tag``)."""

    form = TagForm
    list_display = ["name", "description"]
    search_fields = ["name"]


class LabelPolicyForm(forms.ModelForm):
    class Meta:
        model = LabelPolicySetting
        fields = ["allowed_keys", "required_keys", "max_labels", "pod_label_keys", "pod_label_prefix",
                  "metric_values"]

    def clean(self) -> dict:
        cleaned = super().clean() or {}
        for name in ("allowed_keys", "required_keys", "pod_label_keys"):
            value = cleaned.get(name)
            if value is not None and (not isinstance(value, list) or not all(isinstance(k, str) for k in value)):
                self.add_error(name, 'a JSON list of label keys, e.g. ["project", "team"]')
        metric = cleaned.get("metric_values")
        if metric is not None and (not isinstance(metric, dict) or not all(
                isinstance(v, list) and all(isinstance(x, str) for x in v) for v in metric.values())):
            self.add_error("metric_values", 'a JSON object of label key to a list of values, e.g. {"team": ["a"]}')
        if self.errors:
            return cleaned
        row = LabelPolicySetting(**{name: cleaned.get(name) for name in self.Meta.fields})
        for name, problem in policy_problems(policy_from_row(row)).items():
            self.add_error(name, problem)
        return cleaned


@admin.register(LabelPolicySetting)
class LabelPolicyAdmin(admin.ModelAdmin):
    """The one label policy: which keys, how many, which go onto pods and into metrics."""

    form = LabelPolicyForm
    list_display = ["__str__", "allowed_keys", "required_keys", "max_labels", "pod_label_prefix", "updated_at"]

    def has_add_permission(self, request) -> bool:
        return not LabelPolicySetting.objects.exists()
