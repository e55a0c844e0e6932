"""Scoped constraint trees (docs/design.md §4): building, conflict detection, JSON and text rendering.

Algorithm of :func:`build_tree`, per task group:
1. Sort each task's topology entries by the pool's key order (coarsest first); the order in the
   YAML is irrelevant.
2. Each prefix of a task's sorted entries names one constraint node: the tuple of (key, group)
   pairs along it. Equal tuples are the same node, so co-location is scoped by every ancestor
   (``zone-a/rack-group-1`` and ``zone-b/rack-group-1`` differ), and group names are never joined
   into strings (``a-b`` + ``c`` and ``a`` + ``b-c`` cannot collide).
3. Each node keeps its own key and requirement; no level is dropped, single-child chains included.
   A task hangs off the node of its full path; a task without entries hangs off the root.
4. Children are sorted by path and tasks by name, both in natural order (``t2`` before ``t10``,
   :mod:`parsing.natural`), so the tree depends only on the set of (task, entries) pairs: it is
   invariant under permutation of tasks and of topology entries.

All tasks on one node must agree on its requirement; :func:`find_requirement_conflicts` lists the
nodes where they do not (the parser reports them), and :func:`build_tree` refuses such input.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from parsing.natural import NaturalKey, natural_key, natural_sorted
from topology.tree import PREFERRED, REQUIRED, ConstraintTree, NodePath, RequirementType, TreeNode


class EntryLike(Protocol):
    """Anything with a topology entry's fields (``TopologyEntry`` is the canonical one)."""

    @property
    def key(self) -> str: ...

    @property
    def group(self) -> str: ...

    @property
    def requirement(self) -> str: ...


class TaskLike(Protocol):
    """Anything with a task's name and topology entries (``TaskSpec`` is the canonical one)."""

    @property
    def name(self) -> str: ...

    @property
    def topology(self) -> Sequence[EntryLike]: ...


TaskInput = TaskLike | tuple[str, Sequence[EntryLike]]


@dataclass(frozen=True, slots=True)
class RequirementConflict:
    """Tasks sharing the node at ``path`` disagree on its requirement type."""

    path: NodePath
    tasks_by_requirement: tuple[tuple[str, tuple[str, ...]], ...]  # (requirement, sorted names), required first

    @property
    def key(self) -> str:
        return self.path[-1][0]

    @property
    def group(self) -> str:
        return self.path[-1][1]


@dataclass(slots=True)
class _Collected:
    requirements: dict[NodePath, dict[str, list[str]]]
    node_tasks: dict[NodePath, list[str]]
    root_tasks: list[str]


def _normalise(tasks: Iterable[TaskInput]) -> list[tuple[str, Sequence[EntryLike]]]:
    pairs: list[tuple[str, Sequence[EntryLike]]] = []
    for task in tasks:
        if isinstance(task, tuple):
            pairs.append((task[0], task[1]))
        else:
            pairs.append((task.name, task.topology))
    return pairs


def sorted_entries(entries: Iterable[EntryLike], pool_keys: Sequence[str]) -> list[EntryLike]:
    """``entries`` in the pool's key order. Raises ``ValueError`` on an unknown or repeated key."""
    order = {key: index for index, key in enumerate(pool_keys)}
    result = list(entries)
    seen: set[str] = set()
    for entry in result:
        if entry.key not in order:
            raise ValueError(f"topology key {entry.key!r} is not one of the pool keys {list(pool_keys)}")
        if entry.key in seen:
            raise ValueError(f"topology key {entry.key!r} appears more than once")
        if entry.requirement not in (REQUIRED, PREFERRED):
            raise ValueError(f"requirement {entry.requirement!r} is neither {REQUIRED!r} nor {PREFERRED!r}")
        seen.add(entry.key)
    result.sort(key=lambda entry: order[entry.key])
    return result


def _collect(tasks: Iterable[TaskInput], pool_keys: Sequence[str]) -> _Collected:
    collected = _Collected(requirements={}, node_tasks={}, root_tasks=[])
    names: set[str] = set()
    for name, entries in _normalise(tasks):
        if name in names:
            raise ValueError(f"task {name!r} appears more than once")
        names.add(name)
        path: NodePath = ()
        for entry in sorted_entries(entries, pool_keys):
            path = (*path, (entry.key, entry.group))
            collected.requirements.setdefault(path, {}).setdefault(entry.requirement, []).append(name)
        if path:
            collected.node_tasks.setdefault(path, []).append(name)
        else:
            collected.root_tasks.append(name)
    return collected


def _path_order(path: NodePath) -> tuple[tuple[NaturalKey, NaturalKey], ...]:
    """Natural order of paths: ``rack-group-2`` before ``rack-group-10``."""
    return tuple((natural_key(key), natural_key(group)) for key, group in path)


def _required_first(item: tuple[str, tuple[str, ...]]) -> tuple[bool, str]:
    return (item[0] != REQUIRED, item[0])


def _conflicts(collected: _Collected) -> tuple[RequirementConflict, ...]:
    conflicts = [
        RequirementConflict(
            path=path,
            tasks_by_requirement=tuple(
                sorted(((req, tuple(natural_sorted(names))) for req, names in by_req.items()), key=_required_first)
            ),
        )
        for path, by_req in collected.requirements.items()
        if len(by_req) > 1
    ]
    return tuple(sorted(conflicts, key=lambda conflict: _path_order(conflict.path)))


def find_requirement_conflicts(tasks: Iterable[TaskInput], pool_keys: Sequence[str]) -> tuple[RequirementConflict, ...]:
    """Nodes of the group's tree whose tasks disagree on ``requirementType``, sorted by path."""
    return _conflicts(_collect(tasks, pool_keys))


def build_tree(group_name: str, tasks: Iterable[TaskInput], pool_keys: Sequence[str]) -> ConstraintTree:
    """Build the constraint tree of one task group against the pool's key order.

    ``tasks`` are ``TaskSpec``-like objects (``.name``, ``.topology``) or ``(name, entries)`` pairs.

    Raises:
        ValueError: a key outside ``pool_keys``, a key twice in one task, a task name twice, or
            tasks that disagree on a node's requirement (see :func:`find_requirement_conflicts`).
    """
    collected = _collect(tasks, pool_keys)
    conflicts = _conflicts(collected)
    if conflicts:
        first = conflicts[0]
        raise ValueError(f"tasks disagree on the requirement of node {list(first.path)}: {first.tasks_by_requirement}")
    children_of: dict[NodePath, list[NodePath]] = {}
    for path in collected.requirements:
        children_of.setdefault(path[:-1], []).append(path)

    def make(path: NodePath) -> TreeNode:
        key, group = path[-1]
        (requirement,) = collected.requirements[path]
        return TreeNode(
            key=key,
            group=group,
            path=path,
            requirement=REQUIRED if requirement == REQUIRED else PREFERRED,
            children=tuple(make(child) for child in sorted(children_of.get(path, ()), key=_path_order)),
            tasks=tuple(natural_sorted(collected.node_tasks.get(path, ()))),
        )

    return ConstraintTree(
        group=group_name,
        children=tuple(make(path) for path in sorted(children_of.get((), ()), key=_path_order)),
        tasks=tuple(natural_sorted(collected.root_tasks)),
        keys=tuple(pool_keys),
    )


def _node_to_json(node: TreeNode) -> dict[str, Any]:
    return {
        "key": node.key,
        "group": node.group,
        "path": [[key, group] for key, group in node.path],
        "requirement": node.requirement,
        "display_name": node.display_name,
        "tasks": list(node.tasks),
        "children": [_node_to_json(child) for child in node.children],
    }


def tree_to_json(tree: ConstraintTree) -> dict[str, Any]:
    """JSON-ready form: ``{"group", "keys", "tasks", "children": [{"key", "group", "path",
    "requirement", "display_name", "tasks", "children"}]}``; :func:`tree_from_json` inverts it."""
    return {
        "group": tree.group,
        "keys": list(tree.keys),
        "tasks": list(tree.tasks),
        "children": [_node_to_json(child) for child in tree.children],
    }


def _requirement(value: object) -> RequirementType:
    if value == REQUIRED:
        return REQUIRED
    if value == PREFERRED:
        return PREFERRED
    raise ValueError(f"invalid requirement {value!r}")


def _node_from_json(data: Mapping[str, Any]) -> TreeNode:
    path = tuple((str(key), str(group)) for key, group in data["path"])
    return TreeNode(
        key=str(data["key"]),
        group=str(data["group"]),
        path=path,
        requirement=_requirement(data["requirement"]),
        children=tuple(_node_from_json(child) for child in data.get("children", ())),
        tasks=tuple(str(task) for task in data.get("tasks", ())),
    )


def tree_from_json(data: Mapping[str, Any]) -> ConstraintTree:
    """Rebuild a tree stored with :func:`tree_to_json` (e.g. from a JSON column for the solver).

    Raises:
        KeyError, ValueError, TypeError: ``data`` is not the output of :func:`tree_to_json`.
    """
    return ConstraintTree(
        group=str(data["group"]),
        children=tuple(_node_from_json(child) for child in data.get("children", ())),
        tasks=tuple(str(task) for task in data.get("tasks", ())),
        keys=tuple(str(key) for key in data.get("keys", ())),
    )


def _node_label(node: TreeNode) -> str:
    label = f"{node.key}={node.group} ({node.requirement})"
    return f"{label}: {', '.join(node.tasks)}" if node.tasks else label


def tree_to_outline(tree: ConstraintTree) -> str:
    """A readable indented outline, one line per node; unconstrained tasks come first::

    group1
    ├─ (no topology): loader
    └─ zone=workflow-group (required)
       ├─ gpu-clique=model-1-group (required): model1-shard1, model1-shard2
       └─ gpu-clique=model-2-group (required): model2-shard1, model2-shard2
    """
    lines = [tree.group]
    entries: list[TreeNode | str] = []
    if tree.tasks:
        entries.append(f"(no topology): {', '.join(tree.tasks)}")
    entries.extend(tree.children)

    def emit(items: Sequence[TreeNode | str], prefix: str) -> None:
        for index, item in enumerate(items):
            last = index == len(items) - 1
            if isinstance(item, str):
                lines.append(f"{prefix}{'└─ ' if last else '├─ '}{item}")
                continue
            lines.append(f"{prefix}{'└─ ' if last else '├─ '}{_node_label(item)}")
            emit(item.children, prefix + ("   " if last else "│  "))

    emit(entries, "")
    return "\n".join(lines)
