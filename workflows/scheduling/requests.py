"""Solver requests built from a spec (dry runs, submission checks) or from stored rows (the cycle)."""

from __future__ import annotations

from collections.abc import Iterable

from scheduler.placement import GroupRequest, Resources, TaskRequest
from workflows.models import TaskGroup
from workflows.spec import GroupSpec, tree_from_json


def group_request_from_spec(group: GroupSpec) -> GroupRequest:
    return GroupRequest(
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
                nodes_excluded=frozenset(task.resource_spec.nodes_excluded),
            )
            for task in group.tasks
        ),
    )


def group_request_from_db(group: TaskGroup, tasks: Iterable) -> GroupRequest:
    """Rebuild a gang's request from stored rows (tasks must belong to ``group``)."""
    return GroupRequest(
        name=group.name,
        tree=tree_from_json(group.constraint_tree),
        tasks=tuple(
            TaskRequest(
                name=task.name,
                resources=Resources(gpu=task.gpu, cpu=task.cpu_millis, memory=task.memory_bytes,
                                    storage=task.storage_bytes),
                nodes_excluded=frozenset(task.nodes_excluded or ()),
            )
            for task in tasks
        ),
    )
