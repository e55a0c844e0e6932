"""Constraint tree types (docs/design.md §4): built by the spec parser, consumed by the solver.

A spec group's tree is built by the workflow spec parser. Its root stands for the group (the gang
being placed); every other node is one (key, topology group) co-location constraint and is
identified by the tuple of (key, topology group) pairs on its path from the root, so the same
topology group name under two different ancestors is two different nodes. A *topology group* is the
name a spec's topology entry gives a constraint node, never a group of the spec (glossary in
docs/architecture.md). Tasks are leaves: a task with topology entries hangs off the deepest node of
its path, a task without entries hangs off the root (in the gang, unconstrained).

Invariants (checked by tests):
- children are sorted by their ``path`` and ``tasks`` tuples by name, so equal inputs give equal trees;
- along a path, keys follow the pool's key order, coarsest first, each key at most once;
- no level is ever dropped: a single-child chain keeps every node with its own requirement.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

REQUIRED: Literal["required"] = "required"
PREFERRED: Literal["preferred"] = "preferred"
RequirementType = Literal["required", "preferred"]

#: Identity of a tree node: the (key, topology group) pairs from the root down to the node.
NodePath = tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class TreeNode:
    """One co-location constraint: every task below it shares one domain of ``key``."""

    key: str
    group: str  # the topology group's name (not a spec group)
    path: NodePath
    requirement: RequirementType
    children: tuple[TreeNode, ...] = ()
    tasks: tuple[str, ...] = ()

    @property
    def required(self) -> bool:
        return self.requirement == REQUIRED

    @property
    def display_name(self) -> str:
        """Topology group names joined by '/', for people only; never used as an identifier."""
        return "/".join(group for _key, group in self.path)

    def all_tasks(self) -> tuple[str, ...]:
        """Every task in this subtree, sorted by name."""
        names = list(self.tasks)
        for child in self.children:
            names.extend(child.all_tasks())
        return tuple(sorted(names))

    def walk(self) -> Iterator[TreeNode]:
        """Yield this node and its descendants, depth first, in child order."""
        yield self
        for child in self.children:
            yield from child.walk()


@dataclass(frozen=True, slots=True)
class ConstraintTree:
    """The constraint tree of one spec group (a gang when placed). The root itself carries no constraint."""

    group: str  # the spec group's name
    children: tuple[TreeNode, ...] = ()
    tasks: tuple[str, ...] = ()  # tasks without topology entries: in the gang, unconstrained
    keys: tuple[str, ...] = field(default=())  # the pool's key order the tree was built against

    def nodes(self) -> Iterator[TreeNode]:
        """Every constraint node, depth first."""
        for child in self.children:
            yield from child.walk()

    def all_tasks(self) -> tuple[str, ...]:
        names = list(self.tasks)
        for child in self.children:
            names.extend(child.all_tasks())
        return tuple(sorted(names))

    @property
    def is_constrained(self) -> bool:
        return bool(self.children)
