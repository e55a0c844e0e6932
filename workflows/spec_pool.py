"""Which pool a submission goes to: the request's, else the spec's ``workflow.pool`` (docs/spec.md,
"workflow"). A request naming another pool than the spec's is refused, naming both. And the pool's
platforms, as the spec's resources are checked against them."""

from __future__ import annotations

from typing import Any

from scheduler.models import Pool, PoolPlatform
from workflows.errors import PoolRequiredError
from workflows.spec import PlatformRule, SpecError, SpecInvalidError, SpecLimits, WorkflowSpec
from workflows.spec.loader import load_document

POOL_PATH = "workflow.pool"


def _spec_pool(source: str | dict[str, Any]) -> str | None:
    """``workflow.pool`` of the (rendered) spec, when it is a string; a spec that does not load is
    reported by the parser later, with every other problem."""
    try:
        document = load_document(source, SpecLimits(), warnings=[])
    except SpecInvalidError:
        return None
    body = document.get("workflow")
    pool = body.get("pool") if isinstance(body, dict) else None
    return pool if isinstance(pool, str) and pool.strip() else None


def submission_pool(requested: str | None, source: str | dict[str, Any]) -> str:
    """The pool a submission is validated against: ``requested``, else the spec's ``workflow.pool``.
    Raises :class:`PoolRequiredError` when neither names one."""
    if requested:
        return requested
    chosen = _spec_pool(source)
    if chosen is None:
        raise PoolRequiredError()
    return chosen


def pool_platforms(pool: Pool) -> tuple[PlatformRule, ...]:
    """The pool's platforms as the spec checks them (docs/spec.md, "Resource")."""
    return tuple(
        PlatformRule(name=row.name, privileged=row.allow_privileged, host_network=row.allow_host_network,
                     host_mounts=tuple(str(prefix) for prefix in row.host_mounts or ()))
        for row in PoolPlatform.objects.filter(pool=pool.pk).order_by("name")
    )


def spec_pool_check(spec: WorkflowSpec, pool: str) -> None:
    """Refuse a spec whose ``workflow.pool`` is not ``pool`` (the one the request named)."""
    if spec.spec_pool is not None and spec.spec_pool != pool:
        raise SpecInvalidError([SpecError(
            POOL_PATH,
            f"the spec asks for pool {spec.spec_pool!r} but the request names pool {pool!r}; "
            "name one pool, or the same in both",
        )])


__all__ = ["POOL_PATH", "pool_platforms", "spec_pool_check", "submission_pool"]
