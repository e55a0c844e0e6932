"""Placement on a platform's nodes only (docs/spec.md, "Resource"; docs/design.md §5): a task whose
resource names a platform of its pool with node selector labels is placed only on nodes carrying all
of them.

The solver knows per task the machines it must not use (``TaskRequest.nodes_excluded``). A gang's
stored request (``TaskGroup.task_requests``) keeps, for each task whose resource names a platform, the
marker ``platform:<name>`` among its excluded names (no node name holds a ``:``, so the solver ignores
it, and gangs of different platforms never share a signature, nor a verdict). Before each solve the
marker is replaced by the names of the pool's nodes that lack the platform's labels
(:func:`request_on_platforms`), read fresh each cycle
(:func:`workflows.scheduling.cycle.read.platform_exclusions`: a relabelled node counts at the next
cycle). Pure: no Django. A platform the pool does not define, or one without labels, restricts nothing.

When such a gang cannot be placed, its reason says which platform kept it to how many nodes
(:func:`platform_note`), so "no room" reads as "no room on the platform's nodes".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from scheduler.placement import GangRequest

MARKER = "platform:"


def platform_marker(platform: str | None) -> frozenset[str]:
    """The excluded-names marker of a task on ``platform`` (none without one)."""
    return frozenset({f"{MARKER}{platform}"}) if platform else frozenset()


@dataclass(frozen=True, slots=True)
class PlatformNodes:
    """A platform of the pool with node selector labels: the nodes without them, and how many it has."""

    selector: Mapping[str, str]
    excluded: frozenset[str]
    nodes: int  # the pool's nodes that carry every label
    total: int  # the pool's nodes


def _platforms_of(request: GangRequest) -> set[str]:
    return {name[len(MARKER):] for task in request.tasks for name in task.nodes_excluded if name.startswith(MARKER)}


def request_on_platforms(request: GangRequest, platforms: Mapping[str, PlatformNodes]) -> GangRequest:
    """``request`` with each task's platform marker replaced by the nodes its platform excludes (the
    request itself when no task names a platform that selects nodes)."""
    if not platforms or not _platforms_of(request) & set(platforms):
        return request
    tasks = []
    for task in request.tasks:
        excluded = set(task.nodes_excluded)
        for name in task.nodes_excluded:
            if name.startswith(MARKER) and name[len(MARKER):] in platforms:
                excluded |= platforms[name[len(MARKER):]].excluded
        tasks.append(replace(task, nodes_excluded=frozenset(excluded)))
    return replace(request, tasks=tuple(tasks))


def platform_note(request: GangRequest, platforms: Mapping[str, PlatformNodes]) -> dict[str, Any] | None:
    """What the reason of an unplaced gang adds about its platforms: ``{"platforms": [...], "message":
    ...}``, or None when no task of it names a platform that selects nodes."""
    named = sorted(_platforms_of(request) & set(platforms))
    if not named:
        return None
    items = [{"platform": name, "node_selector": dict(platforms[name].selector), "nodes": platforms[name].nodes,
              "pool_nodes": platforms[name].total} for name in named]
    said = "; ".join(
        f"platform {name!r} places only on nodes labelled "
        f"{', '.join(f'{k}={v}' for k, v in sorted(platforms[name].selector.items()))} "
        f"({platforms[name].nodes} of the pool's {platforms[name].total} nodes)" for name in named)
    return {"platforms": items, "message": said}


def with_platform_note(body: dict[str, Any], note: dict[str, Any] | None) -> dict[str, Any]:
    """An unplaced gang's reason ``body`` with the platform ``note`` added (``body`` itself without one)."""
    if note is None:
        return body
    reason = dict(body.get("reason") or {})
    reason["platforms"] = note["platforms"]
    return {**body, "reason": reason, "message": f"{body.get('message', '')}; {note['message']}"}


__all__ = ["MARKER", "PlatformNodes", "platform_marker", "platform_note",
           "request_on_platforms", "with_platform_note"]
