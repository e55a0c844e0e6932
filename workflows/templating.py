"""The service's bounds of spec templates, from the settings (docs/spec.md, "Templates")."""

from __future__ import annotations

from django.conf import settings

from workflows.spec.isolation import ProcessLimits
from workflows.spec.template import TemplateLimits


def template_limits() -> TemplateLimits:
    """The sandbox's defaults, rendering in a child process under the ``OSMO_TEMPLATE_*`` limits."""
    return TemplateLimits(process=ProcessLimits(
        max_memory_bytes=int(settings.OSMO_TEMPLATE_MAX_MEMORY_MB) * 1024 * 1024,
        max_cpu_seconds=int(settings.OSMO_TEMPLATE_MAX_CPU_SECONDS),
        max_wall_seconds=float(settings.OSMO_TEMPLATE_MAX_WALL_SECONDS),
    ))
