"""Read-mostly admin for workflows: find one, see its groups, tasks and history, cancel it."""

from __future__ import annotations

from django.contrib import admin, messages
from django.db import transaction

from osmo.errors import OsmoError
from workflows.lifecycle.reservations import reservations_drop
from workflows.models import StatusTransition, Task, TaskGroup, Workflow
from workflows.services import workflow_cancel


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
    list_filter = ["status", "priority", "pool"]
    search_fields = ["workflow_id", "global_id", "name", "submitted_by__username"]  # global_id: from a pod label
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
