"""Constraint tree types (docs/design.md §4): the contract between the spec parser, which builds
trees, and the placement solver, which consumes them. Pure: stdlib only."""

from topology.tree import PREFERRED, REQUIRED, ConstraintTree, NodePath, RequirementType, TreeNode

__all__ = ["PREFERRED", "REQUIRED", "ConstraintTree", "NodePath", "RequirementType", "TreeNode"]
