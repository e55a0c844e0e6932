"""The service's bounds of spec templates, from the settings (docs/spec.md, "Templates")."""

from __future__ import annotations

from osmo import config as osmo_config
from workflows.spec.isolation import ProcessLimits
from workflows.spec.template import TemplateLimits


def template_limits() -> TemplateLimits:
    """The sandbox's defaults, rendering in a child process under the ``OSMO_TEMPLATE_*`` limits."""
    return TemplateLimits(process=ProcessLimits(
        max_memory_bytes=int(osmo_config.security().template_max_memory_mb) * 1024 * 1024,
        max_cpu_seconds=int(osmo_config.security().template_max_cpu_seconds),
        max_wall_seconds=float(osmo_config.security().template_max_wall_seconds),
    ))
