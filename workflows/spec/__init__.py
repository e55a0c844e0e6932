"""Workflow specs (docs/design.md §3) and scoped constraint trees (docs/design.md §4). Pure: stdlib and PyYAML only.

Entry point::

    spec = parse_workflow(source, pool=PoolContext(name="nvl72", keys=("zone", "spine", "rack", "gpu-clique")))

``source`` is YAML/JSON text or a mapping; invalid specs raise :class:`SpecInvalidError` listing
every :class:`SpecError` (path + message). Each group of the result carries its ``ConstraintTree``;
render it with :func:`tree_to_json` / :func:`tree_to_outline`, rebuild it with :func:`tree_from_json`.
"""

from parsing.quantity import QuantityError, format_quantity, parse_duration, parse_quantity
from topology.tree import PREFERRED, REQUIRED, ConstraintTree, NodePath, TreeNode
from workflows.spec.errors import SpecError, SpecInvalidError
from workflows.spec.loader import SpecLimits
from workflows.spec.model import GroupSpec, PoolContext, ResourceSpec, TaskSpec, TopologyEntry, WorkflowSpec
from workflows.spec.parser import parse_workflow
from workflows.spec.trees import (
    RequirementConflict,
    build_tree,
    find_requirement_conflicts,
    tree_from_json,
    tree_to_json,
    tree_to_outline,
)

__all__ = [
    "PREFERRED",
    "REQUIRED",
    "ConstraintTree",
    "GroupSpec",
    "NodePath",
    "PoolContext",
    "QuantityError",
    "RequirementConflict",
    "ResourceSpec",
    "SpecError",
    "SpecInvalidError",
    "SpecLimits",
    "TaskSpec",
    "TopologyEntry",
    "TreeNode",
    "WorkflowSpec",
    "build_tree",
    "find_requirement_conflicts",
    "format_quantity",
    "parse_duration",
    "parse_quantity",
    "parse_workflow",
    "tree_from_json",
    "tree_to_json",
    "tree_to_outline",
]
