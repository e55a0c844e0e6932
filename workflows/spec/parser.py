"""Parsing, normalisation and validation of workflow specs (docs/design.md §3), then tree building (docs/design.md §4).

Algorithm of :func:`parse_workflow`:
1. Load the document safely within :class:`SpecLimits` (:mod:`workflows.spec.loader`).
2. Walk it section by section into drafts, recording every problem with its path and going on
   (unknown fields, wrong types, bad names, quantities, durations, topology entries against the
   pool's keys). Normalisation happens here: bare ``workflow.tasks`` become one-task groups named
   ``<task>-group``; ``resources`` come from ``workflow`` or the top level (not both); defaults are
   ``resource: default``, ``group: default``, ``requirementType: required``; a lone task is lead.
3. Cross-checks on the drafts (:mod:`workflows.spec.checks`): unique task and group names, exactly
   one lead per group, resource and input references, an acyclic group graph, one multiset of
   topology keys for all tasks with topology (whole workflow), and one requirement per
   constraint-tree node (per group); requests must fit a node shape of the pool. Checks that
   depend on a broken part are skipped for it, so one mistake is reported once.
4. If anything was recorded, raise :class:`SpecInvalidError` with every error, sorted by path then
   message. Otherwise build the frozen :class:`WorkflowSpec` and each group's constraint tree.

An undeclared ``default`` resource is implicit and empty (no requests, no topology), so a spec
without ``resources`` is a valid plain gang. Deterministic: the result depends only on the input.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from parsing.quantity import QUANTITY_KINDS, QuantityError, format_quantity, parse_duration, parse_quantity
from topology.tree import PREFERRED, REQUIRED, RequirementType
from workflows.spec.checks import CrossChecks
from workflows.spec.drafts import DEFAULT_RESOURCE, GroupDraft, ResourceDraft, TaskDraft
from workflows.spec.errors import ErrorList, SpecInvalidError, join_path
from workflows.spec.loader import SpecLimits, load_document
from workflows.spec.model import (
    GroupSpec,
    PoolContext,
    ResourceSpec,
    ScalarValue,
    TaskSpec,
    TopologyEntry,
    WorkflowSpec,
)
from workflows.spec.trees import build_tree

NAME_PATTERN = re.compile(r"[a-zA-Z]([a-zA-Z0-9_-]*[a-zA-Z0-9])?")
NAME_MAX_LENGTH = 63
ENV_NAME_PATTERN = re.compile(r"[-._a-zA-Z][-._a-zA-Z0-9]*")
DEFAULT_GROUP = "default"
SPEC_VERSION = 2

TOP_FIELDS = ("workflow", "version", "default-values", "resources")
WORKFLOW_FIELDS = ("name", "timeout", "labels", "groups", "tasks", "resources")
TIMEOUT_FIELDS = ("queue_timeout", "exec_timeout")
GROUP_FIELDS = ("name", "tasks")
TASK_FIELDS = ("name", "lead", "image", "command", "args", "environment", "resource", "inputs")
IMAGE_MAX_LENGTH = 512  # workflows.models.Task.image has the same length
INPUT_FIELDS = ("task",)
RESOURCE_FIELDS = ("gpu", "cpu", "memory", "storage", "nodesExcluded", "topology")
TOPOLOGY_FIELDS = ("key", "group", "requirementType")


def _type_name(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list | tuple):
        return "a list"
    return type(value).__name__


class _Parser(CrossChecks):
    def __init__(self, pool: PoolContext, limits: SpecLimits) -> None:
        self.pool = pool
        self.limits = limits
        self.errors = ErrorList()
        self.resources_path = "resources"

    # -- generic helpers ------------------------------------------------------------------------

    def mapping(
        self, value: object, path: str, allowed: Sequence[str], required: Sequence[str] = ()
    ) -> Mapping[str, Any] | None:
        """``value`` as a mapping after reporting unknown and missing fields; None if not a mapping."""
        if not isinstance(value, Mapping):
            self.error(path, f"must be a mapping, got {_type_name(value)}")
            return None
        for key in value:
            if key not in allowed:
                self.error(
                    join_path(path, key), f"unknown field {key!r}; expected one of: {', '.join(sorted(allowed))}"
                )
        for key in required:
            if key not in value:
                self.error(join_path(path, key), "this field is required")
        return value

    def string(self, value: object, path: str, *, non_empty: bool = True) -> str | None:
        if not isinstance(value, str):
            self.error(path, f"must be a string, got {_type_name(value)}")
            return None
        if non_empty and not value.strip():
            self.error(path, "must not be empty")
            return None
        return value

    def name(self, value: object, path: str, what: str) -> str | None:
        text = self.string(value, path)
        if text is None:
            return None
        if len(text) > NAME_MAX_LENGTH or not NAME_PATTERN.fullmatch(text):
            self.error(
                path,
                f"invalid {what} {text[:80]!r}: use letters, digits, '-' and '_', start with a letter, "
                f"end with a letter or digit, at most {NAME_MAX_LENGTH} characters",
            )
            return None
        return text

    def text_value(self, value: object, path: str) -> str | None:
        """A scalar rendered as text (numbers as written, booleans as ``true``/``false``, null as '')."""
        if value is None:
            return ""
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, str | int | float):
            return str(value)
        self.error(path, f"must be a string, got {_type_name(value)}")
        return None

    def string_list(self, value: object, path: str, *, non_empty: bool) -> tuple[str, ...] | None:
        if not isinstance(value, list | tuple):
            self.error(path, f"must be a list of strings, got {_type_name(value)}")
            return None
        if non_empty and not value:
            self.error(path, "must not be empty")
            return None
        items = [self.text_value(item, join_path(path, index)) for index, item in enumerate(value)]
        if any(item is None for item in items):
            return None
        return tuple(item for item in items if item is not None)

    def text_map(self, value: object, path: str, key_pattern: re.Pattern[str] | None) -> tuple[tuple[str, str], ...]:
        if value is None:
            return ()
        if not isinstance(value, Mapping):
            self.error(path, f"must be a mapping, got {_type_name(value)}")
            return ()
        pairs: list[tuple[str, str]] = []
        for key, item in value.items():
            item_path = join_path(path, key)
            if key_pattern is not None and not key_pattern.fullmatch(key):
                self.error(item_path, f"invalid name {key!r}")
                continue
            if not key:
                self.error(item_path, "names must not be empty")
                continue
            text = self.text_value(item, item_path)
            if text is not None:
                pairs.append((key, text))
        return tuple(sorted(pairs))

    # -- sections -------------------------------------------------------------------------------

    def parse(self, document: Mapping[str, Any]) -> WorkflowSpec:
        self.mapping(document, "", TOP_FIELDS, required=("workflow",))
        version = SPEC_VERSION
        if "version" in document:
            raw = document["version"]
            if isinstance(raw, bool) or raw != SPEC_VERSION:
                self.error("version", f"unsupported version {raw!r}; the only supported version is {SPEC_VERSION}")
        default_values = self.default_values(document.get("default-values"))
        if "workflow" not in document:
            raise SpecInvalidError(self.errors.errors)
        body = self.mapping(document["workflow"], "workflow", WORKFLOW_FIELDS, required=("name",))
        if body is None:
            raise SpecInvalidError(self.errors.errors)
        name = self.name(body["name"], "workflow.name", "workflow name") if "name" in body else None
        queue_timeout, exec_timeout = self.timeouts(body.get("timeout"))
        labels = self.text_map(body.get("labels"), "workflow.labels", None)

        resources = self.resources(document, body)
        groups = self.groups(body)
        self.check_names(groups)
        self.check_leads(groups)
        resolved = self.check_resource_refs(groups, resources)
        group_inputs = self.check_inputs(groups)
        self.check_key_sets(groups, resolved)
        self.check_requirements(groups, resolved)
        self.errors.raise_if_any()

        assert name is not None
        built = tuple(self.build_group(group, resolved, group_inputs[index]) for index, group in enumerate(groups))
        declared = sorted((draft.spec for draft in resources.values() if draft.spec), key=lambda spec: spec.name)
        return WorkflowSpec(
            name=name,
            groups=built,
            version=version,
            queue_timeout_s=queue_timeout,
            exec_timeout_s=exec_timeout,
            labels=labels,
            default_values=default_values,
            resources=tuple(declared),
            pool=self.pool.name,
        )

    def default_values(self, value: object) -> tuple[tuple[str, ScalarValue], ...]:
        if value is None:
            return ()
        if not isinstance(value, Mapping):
            self.error("default-values", f"must be a mapping, got {_type_name(value)}")
            return ()
        pairs: list[tuple[str, ScalarValue]] = []
        for key, item in value.items():
            if item is not None and not isinstance(item, str | int | float | bool):
                self.error(
                    join_path("default-values", key), f"must be a string, number or boolean, got {_type_name(item)}"
                )
                continue
            pairs.append((key, item))
        return tuple(sorted(pairs, key=lambda pair: pair[0]))

    def timeouts(self, value: object) -> tuple[int | None, int | None]:
        if value is None:
            return None, None
        body = self.mapping(value, "workflow.timeout", TIMEOUT_FIELDS)
        if body is None:
            return None, None
        result: list[int | None] = []
        for key in TIMEOUT_FIELDS:
            raw = body.get(key)
            if raw is None:
                result.append(None)
                continue
            try:
                result.append(parse_duration(raw, key))
            except QuantityError as exc:
                self.error(f"workflow.timeout.{key}", str(exc))
                result.append(None)
        return result[0], result[1]

    def resources(self, document: Mapping[str, Any], body: Mapping[str, Any]) -> dict[str, ResourceDraft]:
        if "resources" in document and "resources" in body:
            self.error(
                "resources",
                "resources are given both at the top level and under workflow; keep one of them "
                "(workflow.resources is canonical)",
            )
            return {}
        path = "workflow.resources" if "resources" in body else "resources"
        self.resources_path = path
        value = body["resources"] if "resources" in body else document.get("resources")
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            self.error(path, f"must be a mapping of resource names to requests, got {_type_name(value)}")
            return {}
        drafts: dict[str, ResourceDraft] = {}
        for name, spec in value.items():
            resource_path = join_path(path, name)
            drafts[name] = self.resource(name, spec, resource_path)
        return drafts

    def resource(self, name: str, value: object, path: str) -> ResourceDraft:
        valid = self.name(name, path, "resource name") is not None
        body = self.mapping(value, path, RESOURCE_FIELDS)
        if body is None:
            return ResourceDraft(path=path, spec=None, topology=None)
        before = len(self.errors)
        quantities: dict[str, int] = {}
        for kind in QUANTITY_KINDS:
            if kind in body:
                try:
                    quantities[kind] = parse_quantity(body[kind], kind)
                except QuantityError as exc:
                    self.error(join_path(path, kind), str(exc))
        excluded: tuple[str, ...] = ()
        if body.get("nodesExcluded") is not None:
            names = self.string_list(body["nodesExcluded"], join_path(path, "nodesExcluded"), non_empty=False)
            excluded = tuple(sorted(set(names or ())))
        topology_before = len(self.errors)
        topology = self.topology(name, body.get("topology"), join_path(path, "topology"))
        valid_topology = topology if len(self.errors) == topology_before else None
        if len(self.errors) != before or not valid:
            return ResourceDraft(path=path, spec=None, topology=valid_topology)
        spec = ResourceSpec(name=name, nodes_excluded=excluded, topology=topology, **quantities)
        self.check_fit(spec, path)
        return ResourceDraft(path=path, spec=spec, topology=valid_topology)

    def topology(self, resource: str, value: object, path: str) -> tuple[TopologyEntry, ...]:
        if value is None:
            return ()
        if not isinstance(value, list | tuple):
            self.error(path, f"must be a list of topology entries, got {_type_name(value)}")
            return ()
        pool_keys = self.pool.keys
        entries: list[TopologyEntry] = []
        first_index: dict[str, int] = {}
        for index, raw in enumerate(value):
            entry_path = join_path(path, index)
            body = self.mapping(raw, entry_path, TOPOLOGY_FIELDS, required=("key",))
            if body is None:
                continue
            key = self.string(body["key"], join_path(entry_path, "key")) if "key" in body else None
            group = DEFAULT_GROUP
            if body.get("group") is not None:
                group = self.string(body["group"], join_path(entry_path, "group")) or DEFAULT_GROUP
            requirement: RequirementType = REQUIRED
            if "requirementType" in body:
                raw_requirement = body["requirementType"]
                if raw_requirement in (REQUIRED, PREFERRED):
                    requirement = REQUIRED if raw_requirement == REQUIRED else PREFERRED
                else:
                    self.error(
                        join_path(entry_path, "requirementType"),
                        f"invalid requirementType {raw_requirement!r}; expected 'required' or 'preferred'",
                    )
            if key is None:
                continue
            key_path = join_path(entry_path, "key")
            if not pool_keys:
                self.error(
                    key_path,
                    f"topology key {key!r} in resource {resource!r} cannot be used: "
                    f"pool {self.pool.name!r} has no topology keys",
                )
            elif key not in pool_keys:
                self.error(
                    key_path,
                    f"unknown topology key {key!r} in resource {resource!r}: pool {self.pool.name!r} "
                    f"has keys {', '.join(pool_keys)}",
                )
            if key in first_index:
                self.error(
                    key_path,
                    f"topology key {key!r} appears more than once in resource {resource!r} "
                    f"(also at topology[{first_index[key]}]); use each key at most once",
                )
                continue
            first_index[key] = index
            entries.append(TopologyEntry(key=key, group=group, requirement=requirement))
        order = {key: index for index, key in enumerate(pool_keys)}
        entries.sort(key=lambda entry: order.get(entry.key, len(order)))
        return tuple(entries)

    def check_fit(self, spec: ResourceSpec, path: str) -> None:
        shapes = sorted(set(self.pool.node_capacities), reverse=True)
        if not shapes:
            return
        request = spec.as_tuple()
        if any(all(need <= have for need, have in zip(request, shape, strict=True)) for shape in shapes):
            return
        described = [
            ", ".join(
                f"{kind} {format_quantity(amount, kind)}" for kind, amount in zip(QUANTITY_KINDS, shape, strict=True)
            )
            for shape in shapes
        ]
        wanted = ", ".join(
            f"{kind} {format_quantity(amount, kind)}" for kind, amount in zip(QUANTITY_KINDS, request, strict=True)
        )
        self.error(
            path,
            f"resource {spec.name!r} requests {wanted}, which fits no node of pool {self.pool.name!r} "
            f"(node shapes: {'; '.join(described[:5])}{'; ...' if len(described) > 5 else ''})",
        )

    def groups(self, body: Mapping[str, Any]) -> list[GroupDraft]:
        if "groups" in body and "tasks" in body:
            self.error("workflow", "give either groups or tasks, not both")
            return []
        if "groups" not in body and "tasks" not in body:
            self.error("workflow", "the workflow needs groups (or tasks); neither is given")
            return []
        field_name = "groups" if "groups" in body else "tasks"
        path = f"workflow.{field_name}"
        items = body[field_name]
        if not isinstance(items, list | tuple) or not items:
            self.error(path, f"must be a non-empty list, got {_type_name(items) if items else 'nothing'}")
            return []
        total = len(items)
        if field_name == "groups":
            total = sum(len(g["tasks"]) for g in items if isinstance(g, Mapping) and isinstance(g.get("tasks"), list))
        if total > self.limits.max_tasks:
            self.error(path, f"too many tasks: {total} (at most {self.limits.max_tasks})")
            self.errors.raise_if_any()
        if field_name == "tasks":
            drafts = []
            for index, raw in enumerate(items):
                task = self.task(raw, join_path(path, index), index)
                group_name = f"{task.name}-group" if task.name is not None else None
                drafts.append(GroupDraft(path=task.path, name=group_name, tasks=[task], derived=True))
            return drafts
        return [self.group(raw, join_path(path, index), index) for index, raw in enumerate(items)]

    def group(self, value: object, path: str, index: int) -> GroupDraft:
        body = self.mapping(value, path, GROUP_FIELDS, required=("name", "tasks"))
        if body is None:
            return GroupDraft(path=path, name=None)
        name = self.name(body["name"], join_path(path, "name"), "group name") if "name" in body else None
        draft = GroupDraft(path=path, name=name)
        if "tasks" in body:
            tasks_path = join_path(path, "tasks")
            items = body["tasks"]
            if not isinstance(items, list | tuple) or not items:
                self.error(tasks_path, "must be a non-empty list of tasks")
            else:
                draft.tasks = [self.task(raw, join_path(tasks_path, i), index) for i, raw in enumerate(items)]
        return draft

    def task(self, value: object, path: str, group_index: int) -> TaskDraft:
        draft = TaskDraft(path=path, group_index=group_index)
        body = self.mapping(value, path, TASK_FIELDS, required=("name", "image", "command"))
        if body is None:
            return draft
        if "name" in body:
            draft.name = self.name(body["name"], join_path(path, "name"), "task name")
        if body.get("lead") is not None:
            if isinstance(body["lead"], bool):
                draft.lead = body["lead"]
            else:
                self.error(join_path(path, "lead"), f"must be true or false, got {_type_name(body['lead'])}")
        if "image" in body:
            draft.image = self.string(body["image"], join_path(path, "image"))
            if draft.image is not None and len(draft.image) > IMAGE_MAX_LENGTH:
                self.error(join_path(path, "image"), f"the image name is longer than {IMAGE_MAX_LENGTH} characters")
        if "command" in body:
            draft.command = self.string_list(body["command"], join_path(path, "command"), non_empty=True)
        if body.get("args") is not None:
            draft.args = self.string_list(body["args"], join_path(path, "args"), non_empty=False) or ()
        draft.environment = self.text_map(body.get("environment"), join_path(path, "environment"), ENV_NAME_PATTERN)
        if body.get("resource") is not None:
            draft.resource = self.string(body["resource"], join_path(path, "resource")) or DEFAULT_RESOURCE
        if body.get("inputs") is not None:
            self.task_inputs(body["inputs"], join_path(path, "inputs"), draft)
        return draft

    def task_inputs(self, value: object, path: str, draft: TaskDraft) -> None:
        if not isinstance(value, list | tuple):
            self.error(path, f"must be a list of inputs like {{task: <name>}}, got {_type_name(value)}")
            return
        for index, raw in enumerate(value):
            item_path = join_path(path, index)
            if isinstance(raw, Mapping) and set(raw) - set(INPUT_FIELDS):
                kinds = ", ".join(sorted(set(raw) - set(INPUT_FIELDS)))
                self.error(item_path, f"unsupported input ({kinds}); only inputs like {{task: <name>}} are supported")
                continue
            body = self.mapping(raw, item_path, INPUT_FIELDS, required=("task",))
            if body is None or "task" not in body:
                continue
            name = self.string(body["task"], join_path(item_path, "task"))
            if name is not None:
                draft.inputs.append((name, join_path(item_path, "task")))

    # -- cross-checks ---------------------------------------------------------------------------

    # -- building -------------------------------------------------------------------------------

    def build_group(self, group: GroupDraft, resolved: dict[str, ResourceDraft], inputs: tuple[str, ...]) -> GroupSpec:
        tasks = []
        for task in group.tasks:
            assert task.name is not None and task.image is not None and task.command is not None
            spec = resolved[task.name].spec
            assert spec is not None
            tasks.append(
                TaskSpec(
                    name=task.name,
                    lead=bool(task.lead),
                    image=task.image,
                    command=task.command,
                    args=task.args,
                    environment=task.environment,
                    resource=task.resource,
                    inputs=tuple(dict.fromkeys(name for name, _path in task.inputs)),
                    resource_spec=spec,
                )
            )
        assert group.name is not None
        tree = build_tree(group.name, tasks, self.pool.keys)
        return GroupSpec(name=group.name, tasks=tuple(tasks), inputs=inputs, tree=tree)


def parse_workflow(source: object, *, pool: PoolContext, limits: SpecLimits | None = None) -> WorkflowSpec:
    """Parse, normalise and validate a workflow spec against ``pool``; build each group's tree.

    Args:
        source: YAML or JSON text (``str`` or UTF-8 ``bytes``), or an already-parsed mapping.
        pool: the pool's name, topology keys (coarsest first) and node shapes.
        limits: size limits; ``SpecLimits()`` by default.

    Raises:
        SpecInvalidError: with every problem found, each with its path; nothing else is raised.
    """
    limits = limits or SpecLimits()
    document = load_document(source, limits)
    return _Parser(pool, limits).parse(document)
