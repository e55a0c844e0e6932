"""Pool and node endpoints (docs/design.md §7). Reads for every signed-in user, writes for staff.

Adapters only: validate the input, call one service, render with the output serializer. Every
read runs a fixed number of queries, whatever the number of nodes.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Count, Prefetch, Q
from django.shortcuts import get_object_or_404
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.parsers import JSONParser
from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request
from rest_framework.response import Response

from osmo.api.parsers import TextYAMLParser, XYAMLTextParser, YAMLTextParser
from osmo.api.views import NulSafeLookupMixin
from osmo.errors import NotFoundError
from scheduler import selectors
from scheduler import services as pool_services
from scheduler.api.filters import NodeFilter
from scheduler.api.serializers import (
    BackendOutputSerializer,
    ImportReportOutputSerializer,
    InventoryOutputSerializer,
    NodeInputSerializer,
    NodeOutputSerializer,
    PoolDetailOutputSerializer,
    PoolImportInputSerializer,
    PoolInputSerializer,
    PoolOutputSerializer,
)
from scheduler.fairshare.usage import pool_team_usage
from scheduler.models import Backend, Node, Pool, TopologyKey
from scheduler.services import access

ERROR_RESPONSES = {
    400: OpenApiResponse(OpenApiTypes.OBJECT, description="Invalid input: details.errors lists {path, message}."),
    401: OpenApiResponse(OpenApiTypes.OBJECT, description="Not authenticated."),
    403: OpenApiResponse(OpenApiTypes.OBJECT, description="Staff only."),
    404: OpenApiResponse(OpenApiTypes.OBJECT, description="No such pool or node."),
    409: OpenApiResponse(OpenApiTypes.OBJECT, description="The name is taken, or the pool's state refuses it."),
    415: OpenApiResponse(OpenApiTypes.OBJECT, description="Unsupported Content-Type (send JSON)."),
}
READ_ERRORS = {code: ERROR_RESPONSES[code] for code in (400, 401, 404)}
BOOL_PARAM = {"true", "1", "yes", "on"}
FALSE_PARAM = {"false", "0", "no", "off"}


class IsStaffOrReadOnly(BasePermission):
    """Signed-in users read; staff write."""

    def has_permission(self, request: Request, view: Any) -> bool:
        user = request.user
        if not user or not user.is_authenticated:
            return False
        return request.method in SAFE_METHODS or bool(user.is_staff)


def _flag(request: Request, name: str) -> bool:
    """A boolean query parameter: absent is false; anything but true/false (1/0, yes/no, on/off) is a 400."""
    raw = request.query_params.get(name)
    if raw is None:
        return False
    if raw.lower() not in BOOL_PARAM | FALSE_PARAM:
        raise ValidationError({name: [f"must be true or false, not {raw[:40]!r}"]})
    return raw.lower() in BOOL_PARAM


def _key_specs(items: list[dict[str, str]] | None) -> list[pool_services.KeySpec] | None:
    if items is None:
        return None
    return [pool_services.KeySpec(key=item["key"], label=item["label"]) for item in items]


def pool_named(name: str, user: Any) -> Pool:
    """The pool of a URL: 404 naming it (not DRF's bare "Not found."), 403 when ``user`` has no access."""
    pool = selectors.pool_list().filter(name=name).first()
    if pool is None:
        raise NotFoundError(f"Pool {name!r} not found.", details={"pool": name})
    if not access.pool_accessible(pool, user=user):
        raise access.PoolForbiddenError(f"You have no access to pool {pool.name!r}.", details={"pool": pool.name})
    return pool


@extend_schema_view(
    list=extend_schema(summary="List pools", responses={200: PoolOutputSerializer(many=True), **READ_ERRORS}),
    retrieve=extend_schema(
        summary="A pool with totals per resource and per domain of each key",
        responses={200: PoolDetailOutputSerializer, **READ_ERRORS},
    ),
    create=extend_schema(
        summary="Create a pool (staff)",
        request=PoolInputSerializer,
        responses={201: PoolDetailOutputSerializer, **ERROR_RESPONSES},
    ),
    update=extend_schema(
        summary="Replace a pool's fields and keys (staff)",
        request=PoolInputSerializer,
        responses={200: PoolDetailOutputSerializer, **ERROR_RESPONSES},
    ),
    partial_update=extend_schema(
        summary="Change some of a pool's fields or its keys (staff)",
        request=PoolInputSerializer,
        responses={200: PoolDetailOutputSerializer, **ERROR_RESPONSES},
    ),
    destroy=extend_schema(
        summary="Delete a pool with its nodes (staff; refused while workflows reference it)",
        responses={
            204: None,
            409: OpenApiResponse(OpenApiTypes.OBJECT, description="Workflows or reservations exist."),
            **ERROR_RESPONSES,
        },
    ),
)
class PoolViewSet(NulSafeLookupMixin, viewsets.GenericViewSet):
    lookup_field = "name"
    lookup_value_regex = r"[^/]+"
    permission_classes = [IsStaffOrReadOnly]
    # JSON only: a form body cannot carry topology_keys (DRF read it as [] and PUT wiped the keys).
    parser_classes = [JSONParser]
    serializer_class = PoolOutputSerializer

    def get_queryset(self):
        return access.pools_visible(selectors.pool_list(), user=self.request.user)

    def get_object(self) -> Pool:
        return pool_named(self.kwargs["name"], self.request.user)

    def _detail(self, pool: Pool, *, status_code: int = status.HTTP_200_OK) -> Response:
        keys = selectors.pool_keys(pool)
        summary = selectors.pool_capacity_summary(pool, keys=keys)
        context = {"totals": {pool.pk: summary["totals"]}, "summary": summary, "request": self.request,
                   "quotas": {pool.pk: selectors.pool_quota_use(pool)},
                   "usage": pool_team_usage(pool, now=timezone.now())}
        return Response(PoolDetailOutputSerializer(pool, context=context).data, status=status_code)

    def _reload(self, name: str) -> Pool:
        return get_object_or_404(selectors.pool_list(), name=name)

    def list(self, request: Request) -> Response:
        page = self.paginate_queryset(self.get_queryset())
        pools = list(page) if page is not None else list(self.get_queryset())
        totals = {pk: value.as_dict() for pk, value in selectors.pools_totals(pool.pk for pool in pools).items()}
        quotas = selectors.pools_quota_use(pool.pk for pool in pools)
        data = PoolOutputSerializer(pools, many=True, context={"totals": totals, "quotas": quotas,
                                                               "request": request}).data
        return self.get_paginated_response(data) if page is not None else Response(data)

    def retrieve(self, request: Request, name: str) -> Response:
        return self._detail(self.get_object())

    def create(self, request: Request) -> Response:
        serializer = PoolInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = dict(serializer.validated_data)
        keys = _key_specs(data.pop("topology_keys", None)) or []
        pool = pool_services.pool_create(keys=keys, **data)
        return self._detail(self._reload(pool.name), status_code=status.HTTP_201_CREATED)

    def _update(self, request: Request, *, partial: bool) -> Response:
        pool = self.get_object()
        serializer = PoolInputSerializer(data=request.data, partial=partial)
        serializer.is_valid(raise_exception=True)
        data = dict(serializer.validated_data)
        keys = _key_specs(data.pop("topology_keys", None))
        if not partial and keys is None:
            keys = []
        pool = pool_services.pool_update(pool=pool, keys=keys, **data)
        return self._detail(self._reload(pool.name))

    def update(self, request: Request, name: str) -> Response:
        return self._update(request, partial=False)

    def partial_update(self, request: Request, name: str) -> Response:
        return self._update(request, partial=True)

    def destroy(self, request: Request, name: str) -> Response:
        pool_services.pool_delete(pool=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(
        summary="Import an inventory file (staff): upsert the pool, its keys and nodes",
        description=(
            "The docs/design.md §7 inventory document as JSON, or its YAML text with `Content-Type: application/yaml`. "
            "Every problem is reported with its place in the document (`nodes[3].capacity.gpu`); nothing "
            "is stored unless the whole document is valid."
        ),
        request={"application/json": PoolImportInputSerializer, "application/yaml": OpenApiTypes.STR},
        parameters=[
            OpenApiParameter("prune", OpenApiTypes.BOOL, description="Delete nodes the document does not list."),
            OpenApiParameter("dry_run", OpenApiTypes.BOOL, description="Report what would change; store nothing."),
        ],
        responses={200: ImportReportOutputSerializer, 201: ImportReportOutputSerializer, **ERROR_RESPONSES},
    )
    @action(
        detail=False,
        methods=["post"],
        url_path="import",
        parser_classes=[JSONParser, YAMLTextParser, XYAMLTextParser, TextYAMLParser],
    )
    def import_inventory(self, request: Request) -> Response:
        data = request.data
        if isinstance(data, dict) and set(data) == {"spec"} and isinstance(data["spec"], str):
            document = pool_services.inventory_load_text(data["spec"])  # a YAML body (osmo.api.parsers)
        else:
            document = data
        inventory = pool_services.inventory_parse(document)
        report = pool_services.inventory_import(
            inventory, prune=_flag(request, "prune"), dry_run=_flag(request, "dry_run")
        )
        code = status.HTTP_201_CREATED if report.pool_created and not report.dry_run else status.HTTP_200_OK
        return Response(ImportReportOutputSerializer(report.as_dict()).data, status=code)

    @extend_schema(
        summary="The pool as an inventory document (what export_pool writes)",
        responses={200: InventoryOutputSerializer, **READ_ERRORS},
    )
    @action(detail=True, methods=["get"], url_path="inventory")
    def inventory(self, request: Request, name: str) -> Response:
        return Response(pool_services.pool_export(self.get_object()))


NODE_PARAMETERS = [OpenApiParameter("pool_name", OpenApiTypes.STR, OpenApiParameter.PATH, description="Pool name.")]


@extend_schema_view(
    list=extend_schema(
        summary="A pool's nodes with capacity, used, reserved and free per resource",
        parameters=NODE_PARAMETERS,
        responses={200: NodeOutputSerializer(many=True), **READ_ERRORS, 400: ERROR_RESPONSES[400]},
    ),
    retrieve=extend_schema(
        summary="One node", parameters=NODE_PARAMETERS, responses={200: NodeOutputSerializer, **READ_ERRORS}
    ),
    create=extend_schema(
        summary="Add a node (staff)",
        parameters=NODE_PARAMETERS,
        request=NodeInputSerializer,
        responses={201: NodeOutputSerializer, **ERROR_RESPONSES},
    ),
    update=extend_schema(
        summary="Replace a node (staff)",
        parameters=NODE_PARAMETERS,
        request=NodeInputSerializer,
        responses={200: NodeOutputSerializer, **ERROR_RESPONSES},
    ),
    partial_update=extend_schema(
        summary="Change a node (staff); capacity/allocated merge per resource, labels are replaced",
        parameters=NODE_PARAMETERS,
        request=NodeInputSerializer,
        responses={200: NodeOutputSerializer, **ERROR_RESPONSES},
    ),
    destroy=extend_schema(
        summary="Delete a node (staff; refused while tasks hold reservations on it)",
        parameters=NODE_PARAMETERS,
        responses={
            204: None,
            409: OpenApiResponse(OpenApiTypes.OBJECT, description="Active reservations."),
            **ERROR_RESPONSES,
        },
    ),
)
class NodeViewSet(NulSafeLookupMixin, mixins.ListModelMixin, viewsets.GenericViewSet):
    lookup_field = "name"
    lookup_value_regex = r"[^/]+"
    permission_classes = [IsStaffOrReadOnly]
    parser_classes = [JSONParser]  # the node document is nested: no form bodies
    serializer_class = NodeOutputSerializer
    filterset_class = NodeFilter

    @property
    def pool(self) -> Pool:
        if not hasattr(self, "_pool"):
            self._pool = pool_named(self.kwargs["pool_name"], self.request.user)
        return self._pool

    @property
    def pool_keys(self) -> list[TopologyKey]:
        return selectors.pool_keys(self.pool)

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Node.objects.none()
        return selectors.node_list(pool=self.pool).select_related("pool")

    def get_serializer_context(self) -> dict[str, Any]:
        context = super().get_serializer_context()
        if not getattr(self, "swagger_fake_view", False):
            context["keys"] = self.pool_keys
        return context

    def _render(self, node: Node, *, status_code: int = status.HTTP_200_OK) -> Response:
        fresh = get_object_or_404(self.get_queryset(), pk=node.pk)
        return Response(self.get_serializer(fresh).data, status=status_code)

    def get_object(self) -> Node:
        node = self.get_queryset().filter(name=self.kwargs["name"]).first()
        if node is None:
            raise NotFoundError(f"Node {self.kwargs['name']!r} not found in pool {self.pool.name!r}.",
                                details={"pool": self.pool.name, "node": self.kwargs["name"]})
        self.check_object_permissions(self.request, node)
        return node

    def retrieve(self, request: Request, pool_name: str, name: str) -> Response:
        return Response(self.get_serializer(self.get_object()).data)

    def create(self, request: Request, pool_name: str) -> Response:
        spec = NodeInputSerializer().to_internal_value(request.data)
        node = pool_services.node_create(pool=self.pool, spec=spec)
        return self._render(node, status_code=status.HTTP_201_CREATED)

    def _update(self, request: Request, *, partial: bool) -> Response:
        node = self.get_object()
        data = request.data
        if partial:
            current = pool_services.node_inventory_entry(node)
            if isinstance(data, dict):
                for part in ("capacity", "allocated"):
                    if isinstance(data.get(part), dict):
                        current[part] = {**current.get(part, {}), **data[part]}
                    elif part in data:  # null clears allocated; anything else is the parser's to refuse
                        current[part] = data[part]
                current.update({key: value for key, value in data.items() if key not in ("capacity", "allocated")})
                data = current
        spec = NodeInputSerializer().to_internal_value(data)
        node = pool_services.node_update(node=node, name=spec.name, **spec.values())
        return self._render(node)

    def update(self, request: Request, pool_name: str, name: str) -> Response:
        return self._update(request, partial=False)

    def partial_update(self, request: Request, pool_name: str, name: str) -> Response:
        return self._update(request, partial=True)

    def destroy(self, request: Request, pool_name: str, name: str) -> Response:
        pool_services.node_delete(node=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)


@extend_schema_view(
    list=extend_schema(summary="List backends", responses={200: BackendOutputSerializer(many=True), **READ_ERRORS}),
    retrieve=extend_schema(summary="One backend", responses={200: BackendOutputSerializer, **READ_ERRORS}),
)
class BackendViewSet(NulSafeLookupMixin, viewsets.ReadOnlyModelViewSet):
    """Backends, read-only (OSMO's ``osmo backend list``): managed in the admin and by ``manage.py backend_set``.
    A backend's pools are those the caller may see; its kubeconfig is never returned."""

    lookup_field = "name"
    lookup_value_regex = r"[^/]+"
    serializer_class = BackendOutputSerializer

    def get_queryset(self):
        visible = access.pools_visible(Pool.objects.order_by("name"), user=self.request.user)
        return (Backend.objects.order_by("name")
                .annotate(node_count=Count("pools__nodes", filter=Q(pools__in=visible)))
                .prefetch_related(Prefetch("pools", queryset=visible)))
