"""Gang signatures: equal signatures mean equal placement problems (docs/design.md §8).

A signature covers everything the verdict "unschedulable" depends on: the constraint tree's shape
with each node's key and requirement (group names left out: they name nodes, they do not constrain
them), each task's requests and excluded machines, attached to the tree node that holds the task.
Task names are left out too. Two gangs with equal signatures are the same problem up to renaming, so
once one is proven unschedulable on a snapshot, the other is unschedulable on it and on any snapshot
with less free capacity. Pure and deterministic.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping

from scheduler.placement.types import GangRequest, TaskRequest
from topology.tree import TreeNode


def _task(task: TaskRequest) -> list[object]:
    return [*task.resources.as_tuple(), sorted(task.nodes_excluded)]


def _node(node: TreeNode, tasks: Mapping[str, TaskRequest]) -> list[object]:
    own = sorted((_task(tasks[name]) for name in node.tasks), key=json.dumps)
    children = sorted((_node(child, tasks) for child in node.children), key=json.dumps)
    return [node.key, node.requirement, own, children]


def gang_signature(gang: GangRequest) -> str:
    """A hex digest equal for gangs that are the same placement problem up to names."""
    tasks = {task.name: task for task in gang.tasks}
    root = gang.tree
    canonical = [
        sorted((_task(tasks[name]) for name in root.tasks), key=json.dumps),
        sorted((_node(child, tasks) for child in root.children), key=json.dumps),
    ]
    return hashlib.sha256(json.dumps(canonical, separators=(",", ":")).encode()).hexdigest()
