"""``GET /api/tasks/``: tasks across the user's workflows (docs/api.md "Tasks"; ``osmo task list``)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import generics, serializers
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from osmo.types import signed_in
from workflows.api.serializers import ErrorOutputSerializer
from workflows.choices import TaskStatus
from workflows.task_listing import TaskFilters, task_filters, task_list, task_summary

BOOL_TRUE, BOOL_FALSE = {"true", "1", "yes", "on"}, {"false", "0", "no", "off"}


class TaskRowSerializer(serializers.Serializer):
    """One task as OSMO's task list shows it, with its request."""

    user = serializers.CharField(source="workflow.submitted_by.username")
    workflow_id = serializers.CharField(source="workflow.workflow_id")
    task_name = serializers.CharField(source="name")
    status = serializers.ChoiceField(choices=TaskStatus.choices)
    pool = serializers.CharField(source="workflow.pool.name")
    priority = serializers.CharField(source="workflow.priority")
    node = serializers.CharField(source="node_shown", help_text="The node, '' before placement.")
    start_time = serializers.DateTimeField(source="started_at", allow_null=True)
    end_time = serializers.DateTimeField(source="finished_at", allow_null=True)
    exit_code = serializers.IntegerField(allow_null=True)
    gpu = serializers.IntegerField()
    cpu_millis = serializers.IntegerField()
    memory_bytes = serializers.IntegerField()
    storage_bytes = serializers.IntegerField()


def _flag(request: Request, name: str) -> bool:
    raw = request.query_params.get(name)
    if raw is None:
        return False
    if raw.lower() not in BOOL_TRUE | BOOL_FALSE:
        raise ValidationError({name: [f"must be true or false, not {raw[:40]!r}"]})
    return raw.lower() in BOOL_TRUE


def _many(request: Request, name: str) -> list[str]:
    """A repeatable parameter (``status=A&status=B``; a comma list is read as several too)."""
    return [part.strip() for value in request.query_params.getlist(name) for part in value.split(",") if part.strip()]


def _filters(request: Request) -> TaskFilters:
    return task_filters(statuses=_many(request, "status"), pools=_many(request, "pool"),
                        nodes=_many(request, "node"), users=_many(request, "user"),
                        workflow=request.query_params.get("workflow", ""),
                        all_users=_flag(request, "all_users"), order=request.query_params.get("order", "asc"),
                        priorities=_many(request, "priority"),
                        started_after=request.query_params.get("started_after"),
                        started_before=request.query_params.get("started_before"))


FILTER_PARAMS = [
    OpenApiParameter("status", str, many=True, enum=list(TaskStatus.values),
                     description="Only these statuses (repeat it); all when absent"),
    OpenApiParameter("pool", str, many=True, description="Only workflows of these pools"),
    OpenApiParameter("node", str, many=True, description="Only tasks placed on these nodes"),
    OpenApiParameter("user", str, many=True, description="Only these submitters (staff see everyone's)"),
    OpenApiParameter("all_users", bool, description="Every submitter you may see (default: your own)"),
    OpenApiParameter("workflow", str, description="Workflow id contains this"),
    OpenApiParameter("priority", str, many=True, enum=["LOW", "NORMAL", "HIGH"],
                     description="Only workflows of these priorities"),
    OpenApiParameter("started_after", OpenApiTypes.DATE, description="Started on or after this day"),
    OpenApiParameter("started_before", OpenApiTypes.DATE, description="Started before this day"),
]
ERRORS = {400: OpenApiResponse(ErrorOutputSerializer, description="A bad filter; details.errors names it."),
          401: OpenApiResponse(ErrorOutputSerializer, description="Not authenticated.")}


class TaskListView(generics.ListAPIView):
    serializer_class = TaskRowSerializer
    filter_backends: list[type] = []

    def get_queryset(self) -> Any:
        return task_list(user=signed_in(self.request), filters=_filters(self.request))

    @extend_schema(
        operation_id="tasks_list",
        parameters=[*FILTER_PARAMS, OpenApiParameter("order", str, enum=["asc", "desc"],
                                                     description="By start time (default asc)")],
        responses={200: TaskRowSerializer(many=True), **ERRORS},
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Tasks of the workflows you may see, by start time: user, workflow, task, status, pool, priority,
        node, times and request."""
        return super().get(request, *args, **kwargs)


class TaskSummaryRowSerializer(serializers.Serializer):
    """The tasks of one submitter, pool and priority (and workflow, with ``aggregate_by_workflow``): how many
    and the sum of their requests."""

    user = serializers.CharField(source="owner")
    workflow_id = serializers.CharField(source="workflow_name", required=False,
                                        help_text="Only with aggregate_by_workflow=true.")
    pool = serializers.CharField(source="pool_name")
    priority = serializers.CharField(source="workflow_priority")
    tasks = serializers.IntegerField(source="task_count")
    gpu = serializers.IntegerField(source="gpu_sum")
    cpu_millis = serializers.IntegerField(source="cpu_millis_sum")
    memory_bytes = serializers.IntegerField(source="memory_bytes_sum")
    storage_bytes = serializers.IntegerField(source="storage_bytes_sum")


class TaskSummaryView(generics.ListAPIView):
    serializer_class = TaskSummaryRowSerializer
    filter_backends: list[type] = []

    def get_queryset(self) -> Any:
        return task_summary(user=signed_in(self.request), filters=_filters(self.request),
                            by_workflow=_flag(self.request, "aggregate_by_workflow"))

    @extend_schema(
        operation_id="tasks_summary",
        parameters=[*FILTER_PARAMS, OpenApiParameter("aggregate_by_workflow", bool,
                                                     description="One row per workflow too (default false)")],
        responses={200: TaskSummaryRowSerializer(many=True), **ERRORS},
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """The tasks ``GET /api/tasks/`` would list, added up per submitter, pool and priority (and workflow):
        how many, and the sum of their GPU, CPU, memory and storage requests."""
        return super().get(request, *args, **kwargs)


__all__ = ["TaskListView", "TaskSummaryView"]
