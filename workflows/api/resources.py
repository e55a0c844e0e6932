"""``GET /api/resources/`` and ``GET /api/resources/{node}/``: the nodes of the pools you may see, with
capacity, use and the workflows holding them (docs/api.md "Resources"; ``osmo resource list|info``)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import generics, serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from osmo.types import signed_in
from scheduler.api.serializers import ResourceAmountsSerializer
from workflows.api.serializers import ErrorOutputSerializer
from workflows.resource_listing import node_rows, resource_info, resource_nodes, resource_pools


def _many(request: Request, name: str) -> list[str]:
    return [part.strip() for value in request.query_params.getlist(name) for part in value.split(",") if part.strip()]


class ResourceHolderSerializer(serializers.Serializer):
    workflow_id = serializers.CharField()
    user = serializers.CharField()
    tasks = serializers.IntegerField()
    gpu = serializers.IntegerField()


class ResourceSerializer(serializers.Serializer):
    node = serializers.CharField()
    pool = serializers.CharField()
    platforms = serializers.ListField(child=serializers.CharField(), help_text="Platforms whose selector it matches.")
    resource_type = serializers.ChoiceField(choices=["GPU", "CPU"], help_text="GPU: it has GPUs; CPU: none.")
    schedulable = serializers.BooleanField()
    labels = serializers.DictField(child=serializers.CharField())
    capacity = ResourceAmountsSerializer()
    used = ResourceAmountsSerializer(help_text="Used outside the service.")
    reserved = ResourceAmountsSerializer(help_text="Held by this service's tasks.")
    free = ResourceAmountsSerializer()
    workflows = ResourceHolderSerializer(many=True, help_text="The workflows holding it that you may see.")
    other_workflows = serializers.IntegerField(help_text="How many other workflows hold it (not named).")


class PlatformConfigSerializer(serializers.Serializer):
    platform = serializers.CharField()
    host_network = serializers.BooleanField(help_text="Its tasks may ask for hostNetwork.")
    privileged = serializers.BooleanField(help_text="Its tasks may ask for privileged mode.")
    allowed_mounts = serializers.ListField(child=serializers.CharField(),
                                           help_text="Host path prefixes its tasks' volumeMounts may use.")


class ResourceInPoolSerializer(ResourceSerializer):
    platform_configs = PlatformConfigSerializer(many=True, help_text="What tasks on each of its platforms may use.")


class ResourceInfoSerializer(serializers.Serializer):
    node = serializers.CharField()
    resources = ResourceInPoolSerializer(many=True, help_text="The node in each pool shown that has it.")


ERRORS = {
    400: OpenApiResponse(ErrorOutputSerializer, description="A bad filter; details.errors names it."),
    401: OpenApiResponse(ErrorOutputSerializer, description="Not authenticated."),
    403: OpenApiResponse(ErrorOutputSerializer, description="`pool_forbidden`: a pool named you may not see."),
    404: OpenApiResponse(ErrorOutputSerializer, description="A pool or node named that does not exist for you."),
}
POOL_PARAM = OpenApiParameter("pool", str, many=True, description="Only these pools (default: every pool you see)")
PLATFORM_PARAM = OpenApiParameter("platform", str, many=True, description="Only nodes of these platforms")


class ResourceListView(generics.ListAPIView):
    serializer_class = ResourceSerializer
    filter_backends: list[type] = []

    def get_queryset(self) -> Any:
        request = self.request
        pools = resource_pools(user=signed_in(request), names=_many(request, "pool"))
        return resource_nodes(pools=pools, platforms=_many(request, "platform"))

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        page = self.paginate_queryset(self.get_queryset())
        assert page is not None  # the default pagination always pages
        return self.get_paginated_response(node_rows(page, user=signed_in(request)))

    @extend_schema(operation_id="resources_list", parameters=[POOL_PARAM, PLATFORM_PARAM],
        responses={200: ResourceSerializer(many=True), **ERRORS})
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Nodes of the pools you may see, by pool and name: capacity, use outside the service, what its
        tasks hold, what is free, and the workflows holding it (yours named, others counted)."""
        return super().get(request, *args, **kwargs)


class ResourceInfoView(APIView):
    @extend_schema(operation_id="resources_info", parameters=[POOL_PARAM, PLATFORM_PARAM],
                   responses={200: ResourceInfoSerializer, **ERRORS})
    def get(self, request: Request, node: str) -> Response:
        """One node in each pool you may see that has it (``pool`` and ``platform`` narrow it): labels,
        capacity, use, holders."""
        rows = resource_info(user=signed_in(request), name=node, pools=_many(request, "pool"),
                             platforms=_many(request, "platform"))
        return Response({"node": node, "resources": rows})


__all__ = ["ResourceInfoView", "ResourceListView"]
