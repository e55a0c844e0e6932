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
from collections.abc import Mapping
from typing import Any

from parsing.quantity import QUANTITY_KINDS, QuantityError, format_quantity, parse_duration, parse_quantity
from topology.tree import PREFERRED, REQUIRED, RequirementType
from workflows.spec.drafts import DEFAULT_RESOURCE, GroupDraft, ResourceDraft, TaskDraft
from workflows.spec.errors import ErrorList, SpecError, SpecInvalidError, join_path
from workflows.spec.fields import TaskFields
from workflows.spec.loader import SpecLimits, load_document
from workflows.spec.model import (
    GroupSpec,
    PoolContext,
    ResourceSpec,
    TaskSpec,
    TopologyEntry,
    WorkflowSpec,
)
from workflows.spec.trees import build_tree
from workflows.spec.walk import NAME_MAX_LENGTH, type_name

ENV_NAME_PATTERN = re.compile(r"[-._a-zA-Z][-._a-zA-Z0-9]*")
DEFAULT_GROUP = "default"
SPEC_VERSION = 2

TOP_FIELDS = ("workflow", "version", "default-values", "resources")
WORKFLOW_FIELDS = ("name", "pool", "timeout", "labels", "groups", "tasks", "resources")
TIMEOUT_FIELDS = ("queue_timeout", "exec_timeout")
GROUP_FIELDS = ("name", "tasks", "barrier", "ignoreNonleadStatus")
TASK_FIELDS = (
    "name", "lead", "image", "command", "args", "environment", "resource", "inputs", "outputs", "files",
    "credentials", "exitActions", "checkpoint", "volumeMounts", "privileged", "hostNetwork",
)
IMAGE_MAX_LENGTH = 512  # workflows.models.Task.image has the same length
RESOURCE_FIELDS = ("gpu", "cpu", "memory", "storage", "nodesExcluded", "topology", "platform")
PLATFORM_PATTERN = re.compile(r"[a-zA-Z0-9]([a-zA-Z0-9_.-]*[a-zA-Z0-9])?")
# Kubernetes label syntax: [prefix/]name, name and value <= 63 of [A-Za-z0-9-_.] with alphanumeric ends.
LABEL_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
LABEL_KEY = re.compile(r"([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?" + LABEL_NAME)
LABEL_VALUE = re.compile(LABEL_NAME)
LABEL_PREFIX_MAX = 253
MAX_LABELS = 16
TOPOLOGY_FIELDS = ("key", "group", "requirementType")


class _Parser(TaskFields):
    def __init__(self, pool: PoolContext, limits: SpecLimits) -> None:
        self.pool = pool
        self.limits = limits
        self.errors = ErrorList()
        self.warnings: list[SpecError] = []
        self.resources_path = "resources"

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
        labels = self.labels(body.get("labels"))
        spec_pool = self.spec_pool(body.get("pool"))

        resources = self.resources(document, body)
        groups = self.groups(body)
        self.check_names(groups)
        self.check_leads(groups)
        resolved = self.check_resource_refs(groups, resources)
        group_inputs = self.check_inputs(groups)
        self.check_key_sets(groups, resolved)
        self.check_requirements(groups, resolved)
        self.check_tokens(groups)
        self.check_platforms(groups, resolved)
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
            spec_pool=spec_pool,
            warnings=tuple(sorted(set(self.warnings))),
        )

    def default_values(self, value: object) -> tuple[tuple[str, Any], ...]:
        """Template values: names to any YAML value (OSMO allows mappings and lists)."""
        if value is None:
            return ()
        if not isinstance(value, Mapping):
            self.error("default-values", f"must be a mapping, got {type_name(value)}")
            return ()
        return tuple(sorted(value.items(), key=lambda pair: pair[0]))

    def labels(self, value: object) -> tuple[tuple[str, str], ...]:
        """``workflow.labels``: Kubernetes label keys and non-empty values, at most :data:`MAX_LABELS`."""
        pairs = self.text_map(value, "workflow.labels", None)
        if len(pairs) > MAX_LABELS:
            self.error("workflow.labels", f"{len(pairs)} labels; a workflow has at most {MAX_LABELS}")
        kept = []
        for key, text in pairs:
            path = join_path("workflow.labels", key)
            prefix = key.rpartition("/")[0]
            if not LABEL_KEY.fullmatch(key) or len(prefix) > LABEL_PREFIX_MAX:
                self.error(path, f"invalid label key {key[:80]!r}: Kubernetes label syntax, [prefix/]name with "
                                 "a name of at most 63 letters, digits, '-', '_', '.', starting and ending "
                                 "alphanumeric")
            elif not LABEL_VALUE.fullmatch(text):
                self.error(path, f"invalid label value {text[:80]!r}: not empty, at most 63 letters, digits, "
                                 "'-', '_', '.', starting and ending alphanumeric")
            else:
                kept.append((key, text))
        return tuple(kept)

    def spec_pool(self, value: object) -> str | None:
        """``workflow.pool``: the pool the spec asks for (the submission checks it names this one)."""
        if value is None:
            return None
        return self.name(value, "workflow.pool", "pool name")

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
            self.error(path, f"must be a mapping of resource names to requests, got {type_name(value)}")
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
        platform = None
        if body.get("platform") is not None:
            platform = self.string(body["platform"], join_path(path, "platform"))
            if platform is not None and (len(platform) > NAME_MAX_LENGTH or not PLATFORM_PATTERN.fullmatch(platform)):
                self.error(join_path(path, "platform"), f"invalid platform name {platform[:80]!r}")
        excluded: tuple[str, ...] = ()
        if body.get("nodesExcluded") is not None:
            names = self.string_list(body["nodesExcluded"], join_path(path, "nodesExcluded"), non_empty=False)
            excluded = tuple(sorted(set(names or ())))
        topology_before = len(self.errors)
        topology = self.topology(name, body.get("topology"), join_path(path, "topology"))
        valid_topology = topology if len(self.errors) == topology_before else None
        if len(self.errors) != before or not valid:
            return ResourceDraft(path=path, spec=None, topology=valid_topology)
        spec = ResourceSpec(name=name, nodes_excluded=excluded, topology=topology, platform=platform, **quantities)
        self.check_fit(spec, path)
        return ResourceDraft(path=path, spec=spec, topology=valid_topology)

    def topology(self, resource: str, value: object, path: str) -> tuple[TopologyEntry, ...]:
        if value is None:
            return ()
        if not isinstance(value, list | tuple):
            self.error(path, f"must be a list of topology entries, got {type_name(value)}")
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
            self.error(path, f"must be a non-empty list, got {type_name(items) if items else 'nothing'}")
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
        draft = GroupDraft(path=path, name=name, barrier=self.flag(body, "barrier", path, True),
                           ignore_nonlead_status=self.flag(body, "ignoreNonleadStatus", path, True))
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
                self.error(join_path(path, "lead"), f"must be true or false, got {type_name(body['lead'])}")
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
        self.task_fields(body, path, draft)
        draft.texts += [(join_path(join_path(path, "command"), i), text) for i, text in enumerate(draft.command or ())]
        draft.texts += [(join_path(join_path(path, "args"), i), text) for i, text in enumerate(draft.args)]
        draft.texts += [(join_path(join_path(path, "environment"), key), text) for key, text in draft.environment]
        return draft

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
                    input_specs=tuple(task.input_specs),
                    outputs=task.outputs,
                    files=task.files,
                    credentials=task.credentials,
                    exit_actions=task.exit_actions,
                    checkpoints=task.checkpoints,
                    volume_mounts=task.volume_mounts,
                    privileged=task.privileged,
                    host_network=task.host_network,
                )
            )
        assert group.name is not None
        tree = build_tree(group.name, tasks, self.pool.keys)
        return GroupSpec(name=group.name, tasks=tuple(tasks), inputs=inputs, tree=tree, barrier=group.barrier,
                         ignore_nonlead_status=group.ignore_nonlead_status)


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
    warnings: list[SpecError] = []
    document = load_document(source, limits, warnings)
    parser = _Parser(pool, limits)
    parser.warnings = warnings
    return parser.parse(document)
