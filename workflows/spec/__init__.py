"""Workflow specs (docs/design.md §3) and scoped constraint trees (docs/design.md §4). Pure: stdlib and PyYAML only.

Entry point::

    spec = parse_workflow(source, pool=PoolContext(name="nvl72", keys=("zone", "spine", "rack", "gpu-clique")))

``source`` is YAML/JSON text or a mapping; invalid specs raise :class:`SpecInvalidError` listing
every :class:`SpecError` (path + message). Each group of the result carries its ``ConstraintTree``;
render it with :func:`tree_to_json` / :func:`tree_to_outline`, rebuild it with :func:`tree_from_json`.

OSMO's run-time tokens (``{{output}}``, ``{{input:<n>}}``, ``{{workflow_id}}``, ``{{host:<task>}}``)
stay in the parsed texts; the dispatch side fills them with :func:`resolve_tokens` and a
:class:`TokenContext` (:mod:`workflows.spec.tokens`).
"""

from parsing.quantity import QuantityError, format_quantity, parse_duration, parse_quantity
from topology.tree import PREFERRED, REQUIRED, ConstraintTree, NodePath, TreeNode
from workflows.spec.errors import SpecError, SpecInvalidError
from workflows.spec.loader import SpecLimits
from workflows.spec.model import (
    CheckpointSpec,
    CredentialSpec,
    ExitAction,
    FileSpec,
    GroupSpec,
    InputSpec,
    OutputSpec,
    PlatformRule,
    PoolContext,
    ResourceSpec,
    TaskSpec,
    TopologyEntry,
    VolumeMount,
    WorkflowSpec,
)
from workflows.spec.parser import parse_workflow
from workflows.spec.tokens import Token, TokenContext, TokenUnresolvedError, find_tokens, resolve_tokens
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
    "CheckpointSpec",
    "ConstraintTree",
    "CredentialSpec",
    "ExitAction",
    "FileSpec",
    "GroupSpec",
    "InputSpec",
    "OutputSpec",
    "PlatformRule",
    "NodePath",
    "PoolContext",
    "QuantityError",
    "RequirementConflict",
    "ResourceSpec",
    "SpecError",
    "SpecInvalidError",
    "SpecLimits",
    "TaskSpec",
    "Token",
    "TokenContext",
    "TokenUnresolvedError",
    "TopologyEntry",
    "TreeNode",
    "VolumeMount",
    "WorkflowSpec",
    "build_tree",
    "find_requirement_conflicts",
    "find_tokens",
    "format_quantity",
    "parse_duration",
    "parse_quantity",
    "parse_workflow",
    "resolve_tokens",
    "tree_from_json",
    "tree_to_json",
    "tree_to_outline",
]
