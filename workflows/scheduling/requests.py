"""Solver requests built from a spec (dry runs, submission checks) or from stored rows (the cycle)."""

from __future__ import annotations

from typing import Any

from scheduler.placement import GangRequest, Resources, TaskRequest
from workflows.scheduling.pod.platform_nodes import platform_marker
from workflows.spec import GroupSpec, tree_from_json


def gang_request_from_spec(group: GroupSpec) -> GangRequest:
    return GangRequest(
        name=group.name,
        tree=group.tree,
        tasks=tuple(
            TaskRequest(
                name=task.name,
                resources=Resources(
                    gpu=task.resource_spec.gpu,
                    cpu=task.resource_spec.cpu,
                    memory=task.resource_spec.memory,
                    storage=task.resource_spec.storage,
                ),
                # A platform's tasks carry its marker, replaced by its nodes' complement before a solve.
                nodes_excluded=(frozenset(task.resource_spec.nodes_excluded)
                                | platform_marker(task.resource_spec.platform)),
            )
            for task in group.tasks
        ),
    )


def task_requests_to_json(request: GangRequest) -> list[list[Any]]:
    """The tasks of a request as stored on the group (``TaskGroup.task_requests``)."""
    return [[t.name, *t.resources.as_tuple(), sorted(t.nodes_excluded)] for t in request.tasks]


def gang_request_from_row(name: str, constraint_tree: dict[str, Any], task_requests: list[list[Any]]) -> GangRequest:
    """Rebuild a gang's request from its group row alone (constraint tree + stored task requests)."""
    return GangRequest(
        name=name,
        tree=tree_from_json(constraint_tree),
        tasks=tuple(
            TaskRequest(
                name=task_name,
                resources=Resources(gpu=gpu, cpu=cpu, memory=memory, storage=storage),
                nodes_excluded=frozenset(excluded),
            )
            for task_name, gpu, cpu, memory, storage, excluded in task_requests
        ),
    )
