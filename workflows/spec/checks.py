"""Cross-checks over a parsed spec's drafts (docs/design.md §3), run after every section was read.

- names: task names unique across the workflow, group names unique (first use wins, later uses
  are errors pointing at the first);
- leads: a lone task is lead; a group of several needs exactly one ``lead: true``;
- references: each task's resource exists (an undeclared ``default`` is implicit and empty);
  inputs name tasks of other groups; the group graph is acyclic (each cycle reported once, in
  data-flow order starting from the group listed first);
- topology: every task with topology uses the same multiset of keys across the whole workflow
  (key sets listed in pool key order, one example task each); tasks that share a constraint-tree
  node of one group agree on its requirement type.

Tasks whose resource or topology is invalid are left out of the later checks (already reported).
"""

from __future__ import annotations

from topology.tree import NodePath
from workflows.spec.drafts import DEFAULT_RESOURCE, IMPLICIT_DEFAULT, GroupDraft, ResourceDraft, listing
from workflows.spec.errors import ErrorList, join_path
from workflows.spec.model import PoolContext
from workflows.spec.trees import find_requirement_conflicts


def _scope(path: NodePath) -> str:
    if len(path) < 2:
        return ""
    return " (under " + ", ".join(f"{key}={group}" for key, group in path[:-1]) + ")"


class CrossChecks:
    """Mixed into the parser: reads ``pool`` and ``resources_path``, records into ``errors``."""

    pool: PoolContext
    errors: ErrorList
    resources_path: str

    def error(self, path: str, message: str) -> None:
        self.errors.add(path, message)

    def check_names(self, groups: list[GroupDraft]) -> None:
        task_paths: dict[str, str] = {}
        group_paths: dict[str, str] = {}
        for group in groups:
            if group.name is not None and not group.derived:
                if group.name in group_paths:
                    self.error(
                        join_path(group.path, "name"),
                        f"duplicate group name {group.name!r} (first used at {group_paths[group.name]}); "
                        "group names must be unique",
                    )
                else:
                    group_paths[group.name] = join_path(group.path, "name")
            for task in group.tasks:
                if task.name is None:
                    continue
                if task.name in task_paths:
                    self.error(
                        join_path(task.path, "name"),
                        f"duplicate task name {task.name!r} (first used at {task_paths[task.name]}); "
                        "task names must be unique across the workflow",
                    )
                else:
                    task_paths[task.name] = join_path(task.path, "name")

    def check_leads(self, groups: list[GroupDraft]) -> None:
        for group in groups:
            if len(group.tasks) == 1:
                group.tasks[0].lead = True
                continue
            if len(group.tasks) == 0 or any(task.name is None for task in group.tasks):
                continue
            leads = [task.name for task in group.tasks if task.lead and task.name is not None]
            label = repr(group.name) if group.name is not None else "this group"
            if not leads:
                self.error(
                    group.path,
                    f"group {label} has no lead task; mark exactly one of its tasks with lead: true",
                )
            elif len(leads) > 1:
                self.error(
                    group.path,
                    f"group {label} has {len(leads)} lead tasks ({listing(leads)}); "
                    "exactly one task may have lead: true",
                )

    def check_resource_refs(
        self, groups: list[GroupDraft], resources: dict[str, ResourceDraft]
    ) -> dict[str, ResourceDraft]:
        """Resolve each named task's resource (an undeclared ``default`` is implicit and empty)."""
        resolved: dict[str, ResourceDraft] = {}
        defined = sorted(resources)
        for group in groups:
            for task in group.tasks:
                draft = resources.get(task.resource)
                if draft is None and task.resource == DEFAULT_RESOURCE:
                    draft = IMPLICIT_DEFAULT
                if draft is None:
                    known = f"defined resources: {listing(defined)}" if defined else "no resources are defined"
                    self.error(join_path(task.path, "resource"), f"unknown resource {task.resource!r}; {known}")
                elif task.name is not None:
                    resolved.setdefault(task.name, draft)
        return resolved

    def check_inputs(self, groups: list[GroupDraft]) -> list[tuple[str, ...]]:
        """Validate task inputs; return each group's upstream group names; report group cycles."""
        group_of: dict[str, int] = {}
        for index, group in enumerate(groups):
            for task in group.tasks:
                if task.name is not None:
                    group_of.setdefault(task.name, index)
        upstream: list[set[int]] = [set() for _ in groups]
        for index, group in enumerate(groups):
            for task in group.tasks:
                for name, path in task.inputs:
                    if name not in group_of:
                        self.error(path, f"unknown task {name!r}; inputs must name a task of this workflow")
                    elif name == task.name:
                        self.error(path, f"task {name!r} names itself: its inputs come from tasks of other "
                                         "groups, which finish before it starts")
                    elif group_of[name] == index:
                        self.error(
                            path,
                            f"task {name!r} is in the same group ({group.name!r}); inputs must come from "
                            "tasks of other groups",
                        )
                    else:
                        upstream[index].add(group_of[name])
        self.check_cycles(groups, upstream)
        return [tuple(sorted({g for i in ups if (g := groups[i].name) is not None})) for ups in upstream]

    def check_cycles(self, groups: list[GroupDraft], upstream: list[set[int]]) -> None:
        state = [0] * len(groups)  # 0 new, 1 on the stack, 2 done
        cycles: set[tuple[int, ...]] = set()
        for start in range(len(groups)):
            if state[start]:
                continue
            stack: list[tuple[int, list[int]]] = [(start, sorted(upstream[start], reverse=True))]
            trail = [start]
            state[start] = 1
            while stack:
                node, pending = stack[-1]
                if not pending:
                    state[node] = 2
                    stack.pop()
                    trail.pop()
                    continue
                nxt = pending.pop()
                if state[nxt] == 1:
                    cycle = trail[trail.index(nxt) :]
                    pivot = cycle.index(min(cycle))
                    cycles.add(tuple(cycle[pivot:] + cycle[:pivot]))
                elif state[nxt] == 0:
                    state[nxt] = 1
                    trail.append(nxt)
                    stack.append((nxt, sorted(upstream[nxt], reverse=True)))
        path = "workflow.groups" if groups and ".groups[" in groups[0].path else "workflow.tasks"
        for found in sorted(cycles):
            flow = [found[0], *reversed(found[1:])]  # the cycle follows upstream edges; show data-flow order
            names = [str(groups[i].name) for i in flow]
            self.error(path, f"task groups depend on each other in a cycle: {' -> '.join([*names, names[0]])}")

    def check_key_sets(self, groups: list[GroupDraft], resolved: dict[str, ResourceDraft]) -> None:
        order = {key: index for index, key in enumerate(self.pool.keys)}
        examples: dict[tuple[str, ...], tuple[str, str]] = {}
        for group in groups:
            for task in group.tasks:
                draft = resolved.get(task.name) if task.name is not None else None
                if draft is None or not draft.topology:
                    continue
                keys = (entry.key for entry in draft.topology)
                key_set = tuple(sorted(keys, key=lambda key: (order.get(key, len(order)), key)))
                example = examples.get(key_set)
                if example is None or (str(task.name), task.resource) < example:
                    examples[key_set] = (str(task.name), task.resource)
        if len(examples) < 2:
            return
        ordered = sorted(examples, key=lambda keys: ([order.get(key, len(order)) for key in keys], keys))
        described = [
            f"[{', '.join(keys)}] (e.g. task {examples[keys][0]!r} with resource {examples[keys][1]!r})"
            for keys in ordered
        ]
        self.error(
            self.resources_path,
            f"all tasks must use the same topology keys, but they use {len(ordered)} different key sets: "
            f"{'; '.join(described)}",
        )

    def check_requirements(self, groups: list[GroupDraft], resolved: dict[str, ResourceDraft]) -> None:
        for group in groups:
            members = [
                (task.name, topology)
                for task in group.tasks
                if task.name is not None
                and (draft := resolved.get(task.name)) is not None
                and (topology := draft.topology) is not None
            ]
            try:
                conflicts = find_requirement_conflicts(members, self.pool.keys)
            except ValueError:
                continue  # duplicate names or bad keys: reported elsewhere
            for conflict in conflicts:
                scope = _scope(conflict.path)
                by = "; ".join(f"{req} by {listing(names)}" for req, names in conflict.tasks_by_requirement)
                self.error(
                    group.path,
                    f"tasks of group {group.name!r} share the topology node key {conflict.key!r}, "
                    f"group {conflict.group!r}{scope} but disagree on its requirementType: {by}",
                )
