"""The task runtime's endpoints (docs/runtime.md): the group barrier and the task's own status; and
the authentication of a task's ``osmo`` command on the user API.

A runtime authenticates with its per-task token (``Authorization: Bearer <token>``, see
:mod:`workflows.scheduling.pod.runtime`), never with a user's credentials; the token reaches these two
endpoints and only for its own task. A token that is not ours, or whose pod is no longer its task's,
answers 401 in the error envelope.

The task's command gets another token, its API token (``OSMO_TOKEN``), authenticated on the user API
by :class:`workflows.api.task_auth.TaskApiTokenAuthentication` (its schema entry is here).
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from workflows.api.serializers import ErrorOutputSerializer
from workflows.scheduling.pod.runtime import task_barrier_arrive, task_runtime_status, task_token_read


class TaskTokenAuthentication(BaseAuthentication):
    """``Authorization: Bearer <task token>``; ``request.auth`` is ``(task id, pod name)``."""

    def authenticate(self, request: Request) -> tuple[Any, tuple[int, str]] | None:
        parts = get_authorization_header(request).split()
        if len(parts) != 2 or parts[0].lower() != b"bearer":
            raise AuthenticationFailed("A task token is required: Authorization: Bearer <token>.")
        found = task_token_read(parts[1].decode("ascii", "replace"))
        if found is None:
            raise AuthenticationFailed("The task token is not valid.")
        from django.contrib.auth.models import AnonymousUser

        return AnonymousUser(), found

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="osmo-task"'


class TaskTokenScheme(OpenApiAuthenticationExtension):
    """The task token in the OpenAPI schema (a bearer token only the runtime holds)."""

    target_class = "workflows.api.runtime.TaskTokenAuthentication"
    name = "taskToken"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {"type": "http", "scheme": "bearer", "description": "The per-task token of a task's runtime."}


class TaskApiTokenScheme(OpenApiAuthenticationExtension):
    """The task API token in the OpenAPI schema (what a task's ``osmo`` command sends)."""

    target_class = "workflows.api.task_auth.TaskApiTokenAuthentication"
    name = "taskApiToken"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {"type": "apiKey", "in": "header", "name": "Authorization",
                "description": "A task's API token (OSMO_TOKEN in the task), as 'Token <token>'."}


class HasTaskToken(BasePermission):
    def has_permission(self, request: Request, view: Any) -> bool:
        return isinstance(request.auth, tuple)


class BarrierOutputSerializer(serializers.Serializer):
    arrived = serializers.IntegerField()
    size = serializers.IntegerField()
    open = serializers.BooleanField()
    abort = serializers.BooleanField()
    reason = serializers.CharField(allow_blank=True)


class TaskRuntimeStatusOutputSerializer(serializers.Serializer):
    task = serializers.CharField()
    status = serializers.CharField()
    group = serializers.CharField()
    group_status = serializers.CharField()


def _token_task(request: Request) -> tuple[int, str]:
    auth: Any = request.auth  # set by TaskTokenAuthentication (HasTaskToken checked it)
    return int(auth[0]), str(auth[1])


_STALE = "The task token's pod is no longer its task's."


class RuntimeBarrierView(APIView):
    """Arrive at the group's barrier; the answer says whether it is open (the runtime polls)."""

    authentication_classes = [TaskTokenAuthentication]
    permission_classes = [HasTaskToken]
    throttle_classes: list[Any] = []

    @extend_schema(request=None, responses={200: BarrierOutputSerializer,
                                            401: OpenApiResponse(ErrorOutputSerializer, description="Bad token.")})
    def post(self, request: Request) -> Response:
        task_id, pod_name = _token_task(request)
        state = task_barrier_arrive(task_id=task_id, pod_name=pod_name)
        if state is None:
            raise AuthenticationFailed(_STALE)
        return Response(BarrierOutputSerializer(state).data)


class RuntimeStatusView(APIView):
    """The token's task's status and its group's."""

    authentication_classes = [TaskTokenAuthentication]
    permission_classes = [HasTaskToken]
    throttle_classes: list[Any] = []

    @extend_schema(responses={200: TaskRuntimeStatusOutputSerializer,
                              401: OpenApiResponse(ErrorOutputSerializer, description="Bad token.")})
    def get(self, request: Request) -> Response:
        task_id, pod_name = _token_task(request)
        state = task_runtime_status(task_id=task_id, pod_name=pod_name)
        if state is None:
            raise AuthenticationFailed(_STALE)
        return Response(TaskRuntimeStatusOutputSerializer(state).data)
