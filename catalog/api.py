"""``/api/apps/``: apps, their versions, parameters and specs, and workflows started from them
(docs/api.md, "Apps"). Every signed-in user reads every app and submits any of them to a pool they
may use; only the owner (or staff) updates, renames or deletes one (:mod:`catalog.services`)."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.urls import path
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import generics, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog import services
from catalog.models import App, AppVersion, AppVersionStatus
from catalog.parameters import DESCRIPTION_MAX, NAME_MAX
from osmo.api.pagination import OsmoLimitOffsetPagination
from osmo.api.views import NulSafeLookupMixin
from osmo.errors import ValidationFailedError
from osmo.types import signed_in
from parsing.loader import BAD_TEXT_MESSAGE, storable_text
from workflows import selectors
from workflows.api.serializers import (
    LABELS_HELP,
    DryRunOutputSerializer,
    ErrorOutputSerializer,
    SpecField,
    WorkflowOutputSerializer,
    WorkflowSubmitOutputSerializer,
)
from workflows.api.views import idempotency_key_header as idempotency_key
from workflows.api.views import submission_labels as workflow_labels
from workflows.choices import Priority


class AppOutputSerializer(serializers.Serializer):
    uuid = serializers.CharField(help_text="The app's id: it stays when the app is renamed.")
    name = serializers.CharField()
    description = serializers.CharField()
    owner = serializers.CharField(source="owner.username")
    created_at = serializers.DateTimeField()
    latest_version = serializers.IntegerField(allow_null=True, help_text="Its newest version not deleted "
                                                                         "(None: every version was deleted).")


class AppVersionOutputSerializer(serializers.Serializer):
    version = serializers.IntegerField()
    created_by = serializers.CharField(source="created_by.username")
    created_at = serializers.DateTimeField()
    status = serializers.ChoiceField(choices=AppVersionStatus.choices)


class AppDetailOutputSerializer(AppOutputSerializer):
    versions = AppVersionOutputSerializer(many=True)


class AppCreateInputSerializer(serializers.Serializer):
    name = serializers.RegexField(r"^[A-Za-z0-9_-]+$", max_length=NAME_MAX, help_text="Global: one app per name.")
    description = serializers.CharField(max_length=DESCRIPTION_MAX, required=False, allow_blank=True)
    spec = SpecField(help_text="The workflow spec template (YAML text), its parameters in `default-values`.")


class AppVersionInputSerializer(serializers.Serializer):
    spec = SpecField(help_text="The new version's spec template (YAML text).")


class AppVersionCreatedSerializer(serializers.Serializer):
    uuid = serializers.CharField()
    name = serializers.CharField()
    version = serializers.IntegerField()
    created_by = serializers.CharField()
    created_at = serializers.DateTimeField()


class AppRenameInputSerializer(serializers.Serializer):
    new_name = serializers.RegexField(r"^[A-Za-z0-9_-]+$", max_length=NAME_MAX)


class AppSpecOutputSerializer(serializers.Serializer):
    name = serializers.CharField()
    version = serializers.IntegerField()
    spec = serializers.CharField(help_text="The spec template as written.")


class AppParameterSerializer(serializers.Serializer):
    name = serializers.CharField()
    default = serializers.JSONField(help_text="Its value in `default-values` (any YAML value).")
    comment = serializers.CharField(help_text="The comment on its line, or the comment lines above it.")


class AppParametersOutputSerializer(serializers.Serializer):
    name = serializers.CharField()
    version = serializers.IntegerField()
    description = serializers.CharField()
    parameters = AppParameterSerializer(many=True)


class AppDeleteOutputSerializer(serializers.Serializer):
    versions = serializers.ListField(child=serializers.IntegerField(), help_text="The versions deleted now.")


class AppSubmitInputSerializer(serializers.Serializer):
    version = serializers.IntegerField(min_value=1, required=False, help_text="Default: the newest version.")
    pool = serializers.CharField(max_length=63, required=False, allow_blank=True,
                                 help_text="The pool to run in (default: the spec's workflow.pool).")
    priority = serializers.ChoiceField(choices=Priority.choices, default=Priority.NORMAL)
    dry_run = serializers.BooleanField(default=False)
    team = serializers.CharField(max_length=150, required=False, allow_blank=True)
    set = serializers.DictField(child=serializers.JSONField(), required=False, default=dict,
                                help_text="Values of the app's parameters (names of its default-values only).")
    set_env = serializers.DictField(child=serializers.CharField(allow_blank=True, trim_whitespace=False),
                                    required=False, default=dict, help_text="Environment variables of every task.")
    labels = serializers.DictField(child=serializers.CharField(allow_blank=True, trim_whitespace=False),
                                   required=False, default=dict, help_text=LABELS_HELP)


ERRORS = {
    400: OpenApiResponse(ErrorOutputSerializer, description="Invalid input; details.errors names each field."),
    401: OpenApiResponse(ErrorOutputSerializer, description="Not authenticated."),
}
NOT_FOUND = {404: OpenApiResponse(ErrorOutputSerializer, description="`app_not_found`: no such app or version.")}
FORBIDDEN = {403: OpenApiResponse(ErrorOutputSerializer, description="`app_forbidden`: not the app's owner.")}
GONE = {410: OpenApiResponse(ErrorOutputSerializer, description="`app_version_deleted`: the version was deleted.")}
VERSION_PARAM = OpenApiParameter("version", {"type": "integer", "minimum": 1},
                                 description="A version (default: the newest not deleted).")


def _body(request: Request) -> dict[str, Any]:
    if not isinstance(request.data, dict):
        raise ValidationFailedError([{"path": "", "message": "the body must be a JSON object"}])
    return dict(request.data)


def _version_param(request: Request) -> int | None:
    raw = request.query_params.get("version")
    if raw is None or raw == "":
        return None
    if not raw.isdigit() or int(raw) < 1:
        raise ValidationFailedError([{"path": "version", "message": f"a version is a number from 1, "
                                                                    f"not {raw[:40]!r}"}])
    return int(raw)


def _flag_param(request: Request, name: str) -> bool:
    """A boolean query parameter (``true``/``false``, ``1``/``0``, ``yes``/``no``; absent: false); anything else,
    or the parameter given twice, is a 400 naming it."""
    given = request.query_params.getlist(name)
    if not given:
        return False
    word = given[0].lower()
    if len(given) > 1 or word not in ("1", "true", "yes", "0", "false", "no"):
        raise ValidationFailedError([{"path": name, "message": "must be true or false"}])
    return word in ("1", "true", "yes")


def _order_param(request: Request) -> str:
    order = (request.query_params.get("order") or "desc").lower()
    if order not in ("asc", "desc"):
        raise ValidationFailedError([{"path": "order", "message": "asc or desc"}])
    return order


def _spec_text(body: dict[str, Any]) -> Any:
    serializer = AppVersionInputSerializer(data={"spec": body.get("spec")})
    serializer.is_valid(raise_exception=True)
    spec = serializer.validated_data["spec"]
    if not isinstance(spec, str):
        raise ValidationFailedError([{"path": "spec", "message": "an app's spec is YAML text (its comments "
                                                                 "document its parameters), not an object"}])
    return spec


def _detail(app: App, versions: list[AppVersion]) -> dict[str, Any]:
    return {**AppOutputSerializer(app).data, "versions": AppVersionOutputSerializer(versions, many=True).data}


def _created(app: App, version: AppVersion) -> dict[str, Any]:
    return dict(AppVersionCreatedSerializer({"uuid": str(app.uuid), "name": app.name, "version": version.version,
                                             "created_by": version.created_by.get_username(),
                                             "created_at": version.created_at}).data)


class AppListView(generics.ListAPIView):
    serializer_class = AppOutputSerializer
    pagination_class = OsmoLimitOffsetPagination
    filter_backends: list[type] = []

    def get_queryset(self) -> QuerySet[App]:
        params = self.request.query_params
        for name in ("name", "user"):
            if not all(storable_text(value) for value in params.getlist(name)):
                raise ValidationFailedError([{"path": name, "message": BAD_TEXT_MESSAGE}])
        return services.app_list(viewer=self.request.user, name=params.get("name") or None,
                                 users=params.getlist("user") or None,
                                 all_users=_flag_param(self.request, "all_users"),
                                 order=_order_param(self.request))

    @extend_schema(operation_id="apps_list", parameters=[
        OpenApiParameter("name", str, description="The name contains this (case-insensitive)."),
        OpenApiParameter("user", str, many=True, description="Apps these users own (repeat it)."),
        OpenApiParameter("all_users", bool, description="Every app (default: yours: you made a version of it or "
                                                        "started a workflow from it)."),
        OpenApiParameter("order", str, enum=["asc", "desc"], description="By creation time (default desc)."),
    ], responses={200: AppOutputSerializer(many=True), **ERRORS})
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Apps that have a version not deleted: yours by default, `user`'s, or all of them."""
        return super().get(request, *args, **kwargs)

    @extend_schema(operation_id="apps_create", request=AppCreateInputSerializer,
                   responses={201: AppVersionCreatedSerializer, **ERRORS, 409: OpenApiResponse(
                       ErrorOutputSerializer, description="`conflict`: an app of that name exists (names are "
                                                          "global).")})
    def post(self, request: Request) -> Response:
        """Create an app (its version 1) from a spec template. The spec is checked: its `default-values`,
        its rendering with them, its sections; the pool's checks run when it is submitted."""
        body = _body(request)
        version = services.app_create(owner=signed_in(request), name=body.get("name"),
                                      description=body.get("description", ""), spec=_spec_text(body))
        return Response(_created(version.app, version), status=status.HTTP_201_CREATED)


class AppDetailView(NulSafeLookupMixin, APIView):
    @extend_schema(operation_id="apps_retrieve", parameters=[
        VERSION_PARAM,
        OpenApiParameter("limit", {"type": "integer", "minimum": 1}, description="At most this many versions "
                                                                                "(default 20)."),
        OpenApiParameter("order", str, enum=["asc", "desc"], description="Versions oldest first (asc, default) "
                                                                         "or newest first."),
    ], responses={200: AppDetailOutputSerializer, **ERRORS, **NOT_FOUND})
    def get(self, request: Request, name: str) -> Response:
        """An app and its versions (deleted ones too, with their status): `osmo app info`."""
        app = services.app_get(name)
        version = _version_param(request)
        raw_limit = request.query_params.get("limit") or "20"
        if not raw_limit.isdigit() or int(raw_limit) < 1:
            raise ValidationFailedError([{"path": "limit", "message": "a number from 1"}])
        order = (request.query_params.get("order") or "asc").lower()
        if order not in ("asc", "desc"):
            raise ValidationFailedError([{"path": "order", "message": "asc or desc"}])
        newest = list(services.app_versions(app, version=version, order="desc")[:int(raw_limit)])
        if version is not None and not newest:
            raise services.AppNotFoundError(name, version)
        return Response(_detail(app, newest if order == "desc" else newest[::-1]))

    @extend_schema(operation_id="apps_destroy", parameters=[
        OpenApiParameter("version", {"type": "integer", "minimum": 1}, description="The version to delete."),
        OpenApiParameter("all_versions", bool, description="Delete every version."),
    ], responses={200: AppDeleteOutputSerializer, **ERRORS, **NOT_FOUND, **FORBIDDEN})
    def delete(self, request: Request, name: str) -> Response:
        """Delete one version of your app (`?version=`) or all of them (`?all_versions=true`): a deleted
        version is listed with status DELETED and its spec is gone; the app keeps its name."""
        all_versions = request.query_params.get("all_versions", "").lower() in ("1", "true", "yes")
        deleted = services.app_delete(user=signed_in(request), name=name, version=_version_param(request),
                                      all_versions=all_versions)
        return Response(AppDeleteOutputSerializer({"versions": deleted}).data)


class AppVersionsView(NulSafeLookupMixin, APIView):
    @extend_schema(operation_id="apps_versions_create", request=AppVersionInputSerializer,
                   responses={201: AppVersionCreatedSerializer, **ERRORS, **NOT_FOUND, **FORBIDDEN})
    def post(self, request: Request, name: str) -> Response:
        """A new version of your app (`osmo app update`); the versions before it are kept."""
        version = services.app_update(user=signed_in(request), name=name, spec=_spec_text(_body(request)))
        return Response(_created(version.app, version), status=status.HTTP_201_CREATED)


class AppSpecView(NulSafeLookupMixin, APIView):
    @extend_schema(operation_id="apps_spec", parameters=[VERSION_PARAM],
                   responses={200: AppSpecOutputSerializer, **ERRORS, **NOT_FOUND, **GONE})
    def get(self, request: Request, name: str) -> Response:
        """The spec template of a version, as written (`osmo app spec`)."""
        app = services.app_get(name)
        row = services.app_version_get(app, _version_param(request))
        return Response(AppSpecOutputSerializer({"name": app.name, "version": row.version,
                                                 "spec": row.spec_text}).data)


class AppParametersView(NulSafeLookupMixin, APIView):
    @extend_schema(operation_id="apps_parameters", parameters=[VERSION_PARAM],
                   responses={200: AppParametersOutputSerializer, **ERRORS, **NOT_FOUND, **GONE})
    def get(self, request: Request, name: str) -> Response:
        """The description and the parameters of a version, each with its default and its comment
        (`osmo app show`)."""
        shown = services.app_show(name, version=_version_param(request))
        return Response(AppParametersOutputSerializer({
            "name": shown.app.name, "version": shown.version.version, "description": shown.app.description,
            "parameters": [parameter.to_dict() for parameter in shown.parameters]}).data)


class AppRenameView(NulSafeLookupMixin, APIView):
    @extend_schema(operation_id="apps_rename", request=AppRenameInputSerializer,
                   responses={200: AppOutputSerializer, **ERRORS, **NOT_FOUND, **FORBIDDEN,
                              409: OpenApiResponse(ErrorOutputSerializer, description="`conflict`: the new name "
                                                                                      "is taken.")})
    def post(self, request: Request, name: str) -> Response:
        """Rename your app. Workflows started from it keep the name they were started with."""
        renamed = services.app_rename(user=signed_in(request), name=name, new_name=_body(request).get("new_name"))
        return Response(AppOutputSerializer(services.app_get(renamed.name)).data)


class AppSubmitView(NulSafeLookupMixin, APIView):
    @extend_schema(
        operation_id="apps_submit", request=AppSubmitInputSerializer,
        parameters=[OpenApiParameter("Idempotency-Key", str, OpenApiParameter.HEADER)],
        responses={201: WorkflowSubmitOutputSerializer, 200: DryRunOutputSerializer, **ERRORS, **NOT_FOUND, **GONE,
                   403: OpenApiResponse(ErrorOutputSerializer, description="`pool_forbidden`: you may not use "
                                                                           "the pool.")},
        description="Start a workflow from an app version with `set` values over its parameters' defaults, "
        "through the workflow submission path (validation against the pool, pool access, quotas; `dry_run` "
        "stores nothing). A name in `set` that is no parameter of the app is refused (`set.<name>`). The "
        "workflow records the app and version (`app`).",
    )
    def post(self, request: Request, name: str) -> Response:
        serializer = AppSubmitInputSerializer(data=_body(request))
        serializer.is_valid(raise_exception=True)
        values = serializer.validated_data
        submission = services.app_submit(
            user=signed_in(request), name=name, version=values.get("version"), values=dict(values["set"]),
            env=dict(values["set_env"]), pool_name=values.get("pool") or None, priority=values["priority"],
            team=values.get("team") or None, dry_run=values["dry_run"],
            idempotency_key=None if values["dry_run"] else idempotency_key(request),
            labels=workflow_labels(values))
        if submission.dry_run is not None:
            return Response(submission.dry_run, status=status.HTTP_200_OK)
        assert submission.workflow is not None
        workflow = selectors.workflow_detail_queryset(user=request.user).get(pk=submission.workflow.pk)
        answer = {**WorkflowOutputSerializer(workflow).data, "warnings": list(submission.warnings)}
        return Response(answer, status=status.HTTP_201_CREATED if submission.created else status.HTTP_200_OK)


urlpatterns = [
    path("apps/", AppListView.as_view(), name="app-list"),
    path("apps/<str:name>/", AppDetailView.as_view(), name="app-detail"),
    path("apps/<str:name>/versions/", AppVersionsView.as_view(), name="app-versions"),
    path("apps/<str:name>/spec/", AppSpecView.as_view(), name="app-spec"),
    path("apps/<str:name>/parameters/", AppParametersView.as_view(), name="app-parameters"),
    path("apps/<str:name>/rename/", AppRenameView.as_view(), name="app-rename"),
    path("apps/<str:name>/submit/", AppSubmitView.as_view(), name="app-submit"),
]
