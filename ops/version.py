"""``GET /api/version/``: the service's version, what ``osmo version`` compares its own with (docs/api.md,
"Version"). Open to anyone, as the probes are: a version number names no user's data, and a CLI that cannot
log in yet can still say which server it reaches."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Any

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

PACKAGE = "osmo-workflows"


def service_version() -> str:
    """The installed package's version (the CLI reports its own the same way, ``cli.__version__``)."""
    try:
        return version(PACKAGE)
    except PackageNotFoundError:  # pragma: no cover - a tree that is not installed
        return "0.0.0"


def version_parts(text: str) -> dict[str, Any]:
    """``{"version", "major", "minor", "revision"}`` of a dotted version (OSMO's answer names the three)."""
    numbers = [int(part) if part.isdigit() else 0 for part in (text.split(".") + ["0", "0", "0"])[:3]]
    return {"version": text, "major": numbers[0], "minor": numbers[1], "revision": numbers[2]}


VersionSerializer = inline_serializer("Version", fields={
    "version": serializers.CharField(), "major": serializers.IntegerField(), "minor": serializers.IntegerField(),
    "revision": serializers.IntegerField()})


class VersionView(APIView):
    permission_classes = [AllowAny]
    authentication_classes: list[type] = []  # a stale token must not hide the version it would be compared with

    @extend_schema(operation_id="version", summary="The service's version", responses={200: VersionSerializer})
    def get(self, request: Request) -> Response:
        """The service's version: ``osmo version`` prints it beside the client's and warns when they differ."""
        return Response(version_parts(service_version()))
