"""Spec templates at the service's edge: their bounds from the settings (docs/spec.md, "Templates"), the
rendering of a submission, and the template lines its errors point back to."""

from __future__ import annotations

from typing import Any

from osmo import config as osmo_config
from workflows.spec.isolation import ProcessLimits
from workflows.spec.model import ScalarValue
from workflows.spec.template import RenderedSpec, TemplateLimits, is_template, render_spec
from workflows.spec.template_lines import template_lines


def template_limits() -> TemplateLimits:
    """The sandbox's defaults, rendering in a child process under the ``OSMO_TEMPLATE_*`` limits."""
    return TemplateLimits(process=ProcessLimits(
        max_memory_bytes=int(osmo_config.security().template_max_memory_mb) * 1024 * 1024,
        max_cpu_seconds=int(osmo_config.security().template_max_cpu_seconds),
        max_wall_seconds=float(osmo_config.security().template_max_wall_seconds),
    ))


def render_submission(spec: str | dict[str, Any], *, values: dict[str, ScalarValue] | None,
                      env: dict[str, str] | None) -> tuple[str | dict[str, Any], RenderedSpec | None]:
    """The spec to parse, and its rendering when it is a template or values are given (None when not)."""
    if values or env or (isinstance(spec, str) and is_template(spec)):
        rendered = render_spec(spec if isinstance(spec, str) else dump_yaml(spec), values=values, env=env,
                               dump=dump_yaml, limits=template_limits())
        return rendered.text, rendered
    return spec, None


def with_template_lines(errors: list[dict[str, Any]], *, template: str | dict[str, Any],
                         rendered: str | dict[str, Any], values: dict[str, Any]) -> list[dict[str, Any]]:
    """The errors of a spec rendered from a template, each with the template ``line`` it comes from
    when that is known (docs/api.md, "Errors"); a spec that was no template is returned as it is."""
    if not isinstance(template, str) or not isinstance(rendered, str) or template == rendered:
        return errors
    lines = template_lines(template, values, rendered, [error["path"] for error in errors if error["path"]],
                           template_limits())
    return [{**error, "line": lines[error["path"]]} if error["path"] in lines else error for error in errors]


def dump_yaml(data: dict[str, Any]) -> str:
    import yaml

    return yaml.safe_dump(data, sort_keys=False)
