from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.authentication import SessionAuthentication
from rest_framework.decorators import action
from rest_framework.exceptions import UnsupportedMediaType, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from osmo.api.views import NulSafeLookupMixin
from osmo.types import signed_in
from workflows import selectors, services
from workflows.api.filters import FilterSetKeepingBackend, WorkflowFilterSet
from workflows.api.serializers import (
    DryRunOutputSerializer,
    ErrorOutputSerializer,
    SessionCreateInputSerializer,
    SessionOutputSerializer,
    TagListOutputSerializer,
    TaskLogOutputSerializer,
    UserOutputSerializer,
    WorkflowEventsOutputSerializer,
    WorkflowOutputSerializer,
    WorkflowRestartInputSerializer,
    WorkflowSpecOutputSerializer,
    WorkflowSubmitInputSerializer,
    WorkflowSubmitOutputSerializer,
    WorkflowSummaryOutputSerializer,
    WorkflowTagInputSerializer,
    WorkflowTagOutputSerializer,
)
from workflows.api.task_auth import TaskApiAccess
from workflows.errors import SessionForbiddenError, WorkflowSpecInvalidError
from workflows.labels import workflow_tag
from workflows.models import Tag, Workflow
from workflows.preview import workflow_dry_run
from workflows.scheduling import observe
from workflows.sessions.service import SessionSettings, session_open
from workflows.spec import SpecInvalidError
from workflows.spec.labels import label_assignments, labels_check
from workflows.spec.template import parse_assignments

ERRORS = {
    400: OpenApiResponse(ErrorOutputSerializer, description="Invalid input; details.errors lists paths."),
    401: OpenApiResponse(ErrorOutputSerializer, description="Not authenticated."),
}
# Ids count per owner (docs/design.md §7, "Workflow ids"): every lookup by id takes ``?user=``.
OWNER_PARAM = OpenApiParameter("user", str, description="The workflow's owner (a username): picks among several "
                                                        "visible workflows with the id (staff)")
ACTIVE_LIMIT = OpenApiResponse(ErrorOutputSerializer, description="`active_workflow_limit`: you already have "
                               "OSMO_MAX_ACTIVE_WORKFLOWS_PER_USER workflows that have not ended.")
AMBIGUOUS = OpenApiResponse(ErrorOutputSerializer, description="`workflow_ambiguous`: several visible workflows "
                                                               "have the id; name the owner with `?user=`.")
QUERY_PARAMS = [
    OpenApiParameter("pool", str, description="Pool name, for a raw YAML body (default: the spec's workflow.pool)"),
    OpenApiParameter("priority", str, enum=["LOW", "NORMAL", "HIGH"], description="For a raw YAML body"),
    OpenApiParameter("dry_run", bool, description="For a raw YAML body"),
    OpenApiParameter("set", str, many=True, description="NAME=VALUE template value (cast to int/float), raw YAML"),
    OpenApiParameter("set_string", str, many=True, description="NAME=VALUE template value kept as text, raw YAML"),
    OpenApiParameter("set_env", str, many=True, description="NAME=VALUE environment variable of every task"),
    OpenApiParameter("label", str, many=True, description="KEY=VALUE workflow label over the spec's, raw YAML"),
]
RAW_BODY_TYPES = ("", "application/x-www-form-urlencoded", "text/plain")
RAW_BODY_HINT = (
    'Unsupported media type "{media_type}". Send JSON ({{"pool": ..., "spec": ...}}), or the raw YAML spec '
    "with ?pool=<pool> in the URL (Content-Type: application/yaml, or none)."
)


def _submission_data(request: Request) -> dict[str, Any]:
    """The submission's fields. A raw YAML body comes with ``?pool=`` (and the other fields as query
    parameters); it is recognised by its YAML content type, or by ``?pool=`` when the client sent no
    content type (or curl's default form type, or text/plain): those bodies are read as YAML text
    instead of answering "pool: required, spec: required"."""
    media_type = (request.content_type or "").split(";")[0].strip().lower()
    raw = media_type in RAW_BODY_TYPES and "pool" in request.query_params
    if raw:
        try:
            data: dict[str, Any] = {"spec": request._request.body.decode("utf-8")}
        except UnicodeDecodeError as exc:
            raise ValidationError({"spec": [f"The YAML body is not valid UTF-8 (byte {exc.start})."]}) from exc
    else:
        try:
            body = request.data
        except UnsupportedMediaType as exc:
            raise UnsupportedMediaType(media_type, detail=RAW_BODY_HINT.format(media_type=media_type)) from exc
        data = dict(body.items()) if hasattr(body, "items") else {}
    if raw or "yaml" in media_type:
        params = request.query_params
        for name in ("pool", "priority", "dry_run", "team"):
            if name in params:
                data.setdefault(name, params[name])
        try:
            values = {**parse_assignments(params.getlist("set"), cast=True, path="set"),
                      **parse_assignments(params.getlist("set_string"), cast=False, path="set_string")}
            env = parse_assignments(params.getlist("set_env"), cast=False, path="set_env")
        except SpecInvalidError as exc:
            raise WorkflowSpecInvalidError(exc.to_list()) from exc
        if values:
            data.setdefault("set", values)
        if env:
            data.setdefault("set_env", {name: str(value) for name, value in env.items()})
        if params.getlist("label"):
            try:
                data.setdefault("labels", label_assignments(params.getlist("label"), path="label"))
            except SpecInvalidError as exc:
                raise WorkflowSpecInvalidError(exc.to_list()) from exc
    return data


def submission_labels(values: dict[str, Any], path: str = "labels") -> dict[str, str] | None:
    """The request's ``labels`` checked for Kubernetes label syntax (a 400 naming each bad one)."""
    try:
        return labels_check(values.get("labels") or {}, path=path) or None
    except SpecInvalidError as exc:
        raise WorkflowSpecInvalidError(exc.to_list()) from exc


IDEMPOTENCY_KEY_MAX_LENGTH = Workflow._meta.get_field("idempotency_key").max_length


def idempotency_key_header(request: Request) -> str | None:
    """The ``Idempotency-Key`` header, checked against what the column can hold (else a 500 on PostgreSQL)."""
    key = request.headers.get("Idempotency-Key")
    if not key:
        return None
    if len(key) > (IDEMPOTENCY_KEY_MAX_LENGTH or 0):
        message = f"at most {IDEMPOTENCY_KEY_MAX_LENGTH} characters"
    elif any(ord(char) < 0x20 or ord(char) == 0x7F for char in key):
        message = "must not contain control characters"
    else:
        return key
    raise ValidationError({"Idempotency-Key": [message]})


@extend_schema_view(
    list=extend_schema(responses={200: WorkflowSummaryOutputSerializer(many=True), **ERRORS}),
    retrieve=extend_schema(parameters=[OWNER_PARAM],
                           responses={200: WorkflowOutputSerializer, 401: ERRORS[401],
                                      404: OpenApiResponse(ErrorOutputSerializer, description="No such workflow."),
                                      409: AMBIGUOUS}),
)
class WorkflowViewSet(NulSafeLookupMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Submit, list, inspect and cancel workflows. Users see their own; staff see all."""

    lookup_field = "workflow_id"
    lookup_url_kwarg = "id"
    lookup_value_regex = r"[^/]+"
    filterset_class = WorkflowFilterSet
    filter_backends = [FilterSetKeepingBackend]
    filterset: WorkflowFilterSet | None = None  # the list's, once filtered
    queryset = Workflow.objects.none()

    def get_queryset(self):
        if self.action == "list":
            return selectors.with_tags(selectors.workflow_list(user=self.request.user))
        if self.action in ("logs", "events", "sessions", "tag"):
            return selectors.workflow_visible_to(self.request.user).select_related("pool")
        return selectors.workflow_detail_queryset(user=self.request.user)

    def list_count(self) -> int | None:
        """The list's count when its one filter is one label selector: that selector's label rows of the
        workflows the list shows (their owner's; staff: all), no join with the workflows (the pagination
        counts the filtered list otherwise)."""
        return self.filterset.count_by_label(self.request.user) if self.filterset is not None else None

    def get_serializer_class(self):
        return WorkflowSummaryOutputSerializer if self.action == "list" else WorkflowOutputSerializer

    def get_object(self) -> Workflow:
        # Ids count per owner (docs/design.md §7, "Workflow ids"): ``?user=`` picks the owner's.
        return selectors.workflow_by_id(self.get_queryset(), self.kwargs["id"], viewer=self.request.user,
                                        owner=self.request.query_params.get("user") or None)

    @extend_schema(
        request={"application/json": WorkflowSubmitInputSerializer, "application/yaml": OpenApiTypes.STR},
        parameters=[*QUERY_PARAMS, OpenApiParameter("Idempotency-Key", str, OpenApiParameter.HEADER)],
        responses={201: WorkflowSubmitOutputSerializer, 200: DryRunOutputSerializer, **ERRORS,
                   422: OpenApiResponse(ErrorOutputSerializer,
                                        description="Idempotency-Key already used with a different request."),
                   429: ACTIVE_LIMIT},
        description="Submit a workflow (JSON body, or a raw YAML body with `?pool=`). With `dry_run` the spec is "
        "validated, its constraint trees built and a placement preview computed on the current snapshot; "
        "nothing is stored.",
    )
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        serializer = WorkflowSubmitInputSerializer(data=_submission_data(request))
        serializer.is_valid(raise_exception=True)
        values = serializer.validated_data
        idempotency_key = idempotency_key_header(request)
        template: dict[str, Any] = {"values": dict(values["set"]) or None, "env": dict(values["set_env"]) or None}
        labels = submission_labels(values)
        if values["dry_run"]:
            return Response(workflow_dry_run(pool_name=values.get("pool") or None, spec=values["spec"],
                                             user=signed_in(request), priority=values["priority"],
                                             team=values.get("team") or None, labels=labels, **template),
                            status=status.HTTP_200_OK)
        warnings: list[dict[str, str]] = []
        workflow, created = services.workflow_submit(
            user=signed_in(request),
            pool_name=values.get("pool") or None,
            spec=values["spec"],
            priority=values["priority"],
            idempotency_key=idempotency_key,
            team=values.get("team") or None,
            warnings=warnings,
            labels=labels,
            **template,
        )
        if not created:  # an idempotent replay: the stored workflow as it is now
            workflow = selectors.workflow_detail_queryset(user=request.user).get(pk=workflow.pk)
        # (a new one carries the rows it was written with: workflows.selectors.workflow_detail_queryset)
        answer = {**WorkflowOutputSerializer(workflow).data, "warnings": warnings}
        return Response(answer, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)

    @extend_schema(request=None, parameters=[OWNER_PARAM],
                   responses={200: WorkflowSpecOutputSerializer, 401: ERRORS[401], 404: ErrorOutputSerializer,
                              409: AMBIGUOUS},
                   description="The spec as stored (rendered from its template) and the template values.")
    @action(detail=True, methods=["get"])
    def spec(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        workflow = self.get_object()
        return Response(WorkflowSpecOutputSerializer({
            "workflow": workflow.workflow_id, "pool": workflow.pool.name, "priority": workflow.priority,
            "spec": workflow.spec_text, "template_values": workflow.template_values or {},
        }).data)

    @extend_schema(request=None, parameters=[OWNER_PARAM],
                   responses={200: WorkflowOutputSerializer, 401: ERRORS[401], 404: ErrorOutputSerializer,
                              409: OpenApiResponse(ErrorOutputSerializer, description="`not_cancellable`, or "
                                                   "`workflow_ambiguous`: name the owner with `?user=`.")})
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        workflow = self.get_object()
        services.workflow_cancel(workflow_pk=workflow.pk, user=signed_in(request))
        workflow = selectors.workflow_detail_queryset(user=request.user).get(pk=workflow.pk)
        return Response(WorkflowOutputSerializer(workflow).data)


    @extend_schema(
        request=WorkflowRestartInputSerializer,
        parameters=[OWNER_PARAM, OpenApiParameter("Idempotency-Key", str, OpenApiParameter.HEADER)],
        responses={201: WorkflowSubmitOutputSerializer, 200: WorkflowSubmitOutputSerializer, **ERRORS,
                   404: OpenApiResponse(ErrorOutputSerializer, description="No such workflow."), 409: AMBIGUOUS,
                   422: OpenApiResponse(ErrorOutputSerializer,
                                        description="Idempotency-Key already used with a different request."),
                   429: ACTIVE_LIMIT},
        description="Submit the workflow's stored spec again as a new workflow of yours (`<name>-<n+1>`), in its "
        "pool unless `pool` names another, with its priority and template values. The stored spec is the "
        "rendered one: it is not rendered again.",
    )
    @action(detail=True, methods=["post"])
    def restart(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        serializer = WorkflowRestartInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        labels = submission_labels(serializer.validated_data)
        workflow, created = services.workflow_restart(workflow=self.get_object(), user=signed_in(request),
                                                      pool_name=serializer.validated_data.get("pool") or None,
                                                      idempotency_key=idempotency_key_header(request), labels=labels)
        workflow = selectors.workflow_detail_queryset(user=request.user).get(pk=workflow.pk)
        answer = {**WorkflowOutputSerializer(workflow).data, "warnings": []}
        return Response(answer, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)

    @extend_schema(
        request=WorkflowTagInputSerializer, parameters=[OWNER_PARAM],
        responses={200: WorkflowTagOutputSerializer, **ERRORS, 404: ErrorOutputSerializer, 409: AMBIGUOUS,
                   403: OpenApiResponse(ErrorOutputSerializer, description="`tag_forbidden`: not the workflow's "
                                        "owner (nor staff).")},
        description="Remove, then add tags (each one an admin defined: else 400 `tag_unknown` naming `add` or "
        "`remove`, and nothing changes). Answers the workflow's tags after.",
    )
    @action(detail=True, methods=["post"])
    def tag(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        serializer = WorkflowTagInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        workflow = self.get_object()
        tags = workflow_tag(workflow=workflow, user=signed_in(request), add=serializer.validated_data["add"],
                            remove=serializer.validated_data["remove"])
        return Response(WorkflowTagOutputSerializer({"workflow": workflow.workflow_id, "tags": tags}).data)

    @extend_schema(
        request=None,
        parameters=[
            OWNER_PARAM,
            OpenApiParameter("task", str, description="Only this task's log (default: every task's, each line "
                                                      "prefixed `[task] `)"),
            OpenApiParameter("tail", {"type": "integer", "minimum": 1, "maximum": observe.LOG_TAIL_MAX},
                             description=f"Last N lines of each task, 1 to {observe.LOG_TAIL_MAX} "
                                         f"(default {observe.LOG_TAIL_DEFAULT} for one task, "
                                         f"{observe.LOG_TAIL_ALL_DEFAULT} each for every task's)"),
        ],
        responses={200: TaskLogOutputSerializer, **ERRORS, 404: ErrorOutputSerializer,
                   409: OpenApiResponse(ErrorOutputSerializer, description="`workflow_ambiguous`: name the owner "
                                        "with `?user=`; `not_dispatched`: the task has no pod "
                                        "yet; `log_unavailable`: the backend has no log for its pod."),
                   503: OpenApiResponse(ErrorOutputSerializer, description="`backend_unavailable`: the pool's "
                                        "backend cannot be reached.")},
        description="The last lines of a task's pod log, read through the pool's backend. Without `task`, in a "
        f"workflow of several tasks: every task's log, task after task, each line prefixed `[task] `; at most "
        f"{observe.LOG_TASKS_MAX} tasks (`tasks_omitted` counts the rest) and {observe.LOG_TAIL_MAX} lines in all; "
        "a task without a log says why in its `tasks` entry.",
    )
    @action(detail=True, methods=["get"])
    def logs(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        workflow = self.get_object()
        tail = observe.log_tail_parse(request.query_params.get("tail"))
        answer = observe.task_log(workflow, task_name=request.query_params.get("task") or None, tail=tail)
        return Response(TaskLogOutputSerializer(answer).data)

    @extend_schema(
        request=None, parameters=[OWNER_PARAM],
        responses={200: WorkflowEventsOutputSerializer, 401: ERRORS[401], 404: ErrorOutputSerializer, 409: AMBIGUOUS},
        description="What happened to the workflow, oldest first: the service's status transitions and the "
        "backend's pod events. When the backend cannot be reached, the service's events are still answered and "
        "`backend_error` says why the backend's are missing.",
    )
    @action(detail=True, methods=["get"])
    def events(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        workflow = self.get_object()
        return Response(WorkflowEventsOutputSerializer(observe.workflow_events(workflow)).data)


    @extend_schema(
        request=SessionCreateInputSerializer,
        parameters=[OWNER_PARAM, OpenApiParameter("task", str, OpenApiParameter.PATH, description="The task's name")],
        responses={201: SessionOutputSerializer, **ERRORS,
                   403: OpenApiResponse(ErrorOutputSerializer, description="`session_forbidden`: not the workflow's "
                                        "owner (staff, with OSMO_SESSION_STAFF off), or a task's own token."),
                   404: OpenApiResponse(ErrorOutputSerializer, description="No such workflow (or not yours)."),
                   409: OpenApiResponse(ErrorOutputSerializer, description="`task_not_running` (naming its status), "
                                        "`sessions_unsupported` (naming the backend), `port_not_listening`, "
                                        "`workflow_ambiguous`."),
                   503: OpenApiResponse(ErrorOutputSerializer, description="`backend_unavailable`.")},
        description="Open a session into a running task: `exec` (a command, on a terminal with `tty`) or "
        "`port-forward` (one TCP connection to a port the task listens on). Every check happens here; the answer "
        "is a single-use ticket for the websocket `websocket` (docs/api.md, \"Sessions into running tasks\").",
    )
    @action(detail=True, methods=["post"], url_path=r"tasks/(?P<task>[^/]+)/sessions", url_name="sessions")
    def sessions(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        if isinstance(request.auth, TaskApiAccess):
            raise SessionForbiddenError("A task's own token opens no session: use your own API token.")
        serializer = SessionCreateInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        values = serializer.validated_data
        workflow = self.get_object()
        session, ticket = session_open(workflow=workflow, user=signed_in(request), task_name=kwargs["task"],
                                       kind=values["kind"], command=values.get("command"), tty=values.get("tty", False),
                                       port=values.get("port"),
                                       browser=isinstance(request.successful_authenticator, SessionAuthentication))
        config = SessionSettings.load()
        return Response(SessionOutputSerializer({
            "id": session.pk, "kind": session.kind, "workflow": workflow.workflow_id, "task": session.task.name,
            "ticket": ticket, "websocket": f"/ws/sessions/{session.kind}/{ticket}/",
            "expires_in": config.ticket_seconds, "idle_timeout": config.idle_seconds,
            "max_seconds": config.max_seconds}).data, status=status.HTTP_201_CREATED)


class TagListView(APIView):
    """The tags an admin defined: the ones anyone may put on their workflows."""

    @extend_schema(responses={200: TagListOutputSerializer, 401: ErrorOutputSerializer})
    def get(self, request: Request) -> Response:
        tags = list(Tag.objects.order_by("name"))
        return Response(TagListOutputSerializer({
            "tags": [tag.name for tag in tags],
            "details": [{"name": tag.name, "description": tag.description} for tag in tags]}).data)


class MeView(APIView):
    """Who the credentials belong to (the CLI's login check)."""

    @extend_schema(responses={200: UserOutputSerializer, 401: ErrorOutputSerializer})
    def get(self, request: Request) -> Response:
        return Response(UserOutputSerializer({"username": request.user.get_username(),
                                              "is_staff": request.user.is_staff}).data)
