"""The validated workflow spec (docs/design.md §3) as frozen values, and the pool facts it is checked against.

Everything here is produced by :func:`workflows.spec.parse_workflow` after validation succeeded, so
the invariants hold for every instance it returns:

- units are exact integers: ``gpu`` devices, ``cpu`` millicores, ``memory``/``storage`` bytes;
- ``ResourceSpec.topology`` is sorted by the pool's key order (coarsest first), one entry per key;
- every group has exactly one lead task; task names are unique across the workflow;
- ``GroupSpec.inputs`` are upstream group names (sorted), and the group graph is acyclic;
- mappings from the spec (labels, environment, default values) are stored as tuples of
  ``(key, value)`` pairs sorted by key, so equal specs compare and hash equal.

``to_dict()`` methods render JSON-ready dicts (constraint trees via :func:`~workflows.spec.trees.tree_to_json`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from parsing.errors import PathError as SpecError
from topology.tree import REQUIRED, ConstraintTree, RequirementType
from workflows.spec.trees import tree_to_json

#: One node shape of a pool: (gpu devices, cpu millicores, memory bytes, storage bytes).
NodeCapacity = tuple[int, int, int, int]
ScalarValue = str | int | float | bool | None


@dataclass(frozen=True, slots=True)
class PlatformRule:
    """One platform an administrator defined for a pool (OSMO's platforms): what its tasks may ask
    for beyond a plain container. ``host_mounts`` are the host path prefixes ``volumeMounts`` may use."""

    name: str
    privileged: bool = False
    host_network: bool = False
    host_mounts: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class PoolContext:
    """What the spec is validated against: the pool's name, its topology keys (coarsest first),
    the distinct capacities of its nodes, its platforms and its artifact store. An empty
    ``node_capacities`` skips the fit check; an empty ``platforms`` accepts any platform name (stored,
    not checked); a URL input, output or checkpoint may not name the ``artifact_store``."""

    name: str
    keys: tuple[str, ...] = ()
    node_capacities: tuple[NodeCapacity, ...] = ()
    platforms: tuple[PlatformRule, ...] = ()
    artifact_store: str = ""
    # The service's own folders, on a pool whose tasks run on the service's machine (the local backend):
    # a file:// URL may not name them (runtime.plan.service_path_refusal).
    service_paths: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class TopologyEntry:
    """One ``topology[]`` item: tasks with equal (key, group) under equal ancestors share a domain."""

    key: str
    group: str = "default"
    requirement: RequirementType = REQUIRED

    def to_dict(self) -> dict[str, str]:
        return {"key": self.key, "group": self.group, "requirementType": self.requirement}


@dataclass(frozen=True, slots=True)
class ResourceSpec:
    """A named resource request of the spec; ``topology`` sorted by the pool's key order."""

    name: str
    gpu: int = 0
    cpu: int = 0  # millicores
    memory: int = 0  # bytes
    storage: int = 0  # bytes
    nodes_excluded: tuple[str, ...] = ()
    topology: tuple[TopologyEntry, ...] = ()
    platform: str | None = None  # OSMO's platform name, stored as given (docs/spec.md)

    def requests(self) -> dict[str, int]:
        return {"gpu": self.gpu, "cpu": self.cpu, "memory": self.memory, "storage": self.storage}

    def as_tuple(self) -> NodeCapacity:
        return (self.gpu, self.cpu, self.memory, self.storage)

    @property
    def topology_keys(self) -> tuple[str, ...]:
        return tuple(entry.key for entry in self.topology)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            **self.requests(),
            "nodes_excluded": list(self.nodes_excluded),
            "topology": [entry.to_dict() for entry in self.topology],
            "platform": self.platform,
        }


@dataclass(frozen=True, slots=True)
class FileSpec:
    """A file written into the task's container before it starts (``files[]``): ``contents`` at
    ``path`` (absolute, normalised). ``localpath`` never reaches here: the CLI inlines it."""

    path: str
    contents: str

    def to_dict(self) -> dict[str, str]:
        return {"path": self.path, "contents": self.contents}


@dataclass(frozen=True, slots=True)
class InputSpec:
    """One ``inputs[]`` item, in the task's order (``{{input:<n>}}`` indexes them): the output of an
    upstream ``task``, or a ``url`` to download; ``regex`` filters the files taken."""

    task: str | None = None
    url: str | None = None
    regex: str | None = None

    def to_dict(self) -> dict[str, str | None]:
        return {"task": self.task, "url": self.url, "regex": self.regex}


@dataclass(frozen=True, slots=True)
class OutputSpec:
    """One ``outputs[]`` item: upload the task's output directory to ``url`` (files matching ``regex``)."""

    url: str
    regex: str | None = None

    def to_dict(self) -> dict[str, str | None]:
        return {"url": self.url, "regex": self.regex}


@dataclass(frozen=True, slots=True)
class CredentialSpec:
    """One ``credentials`` entry: the user's credential ``name`` given to the task either as
    environment variables (``environment``: ``(VARIABLE, key of the credential)`` pairs, sorted) or
    as files mounted at ``path``."""

    name: str
    environment: tuple[tuple[str, str], ...] = ()
    path: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "environment": dict(self.environment), "path": self.path}


@dataclass(frozen=True, slots=True)
class ExitAction:
    """``exitActions.<action>``: the exit codes (inclusive ranges, sorted, disjoint) for which the
    task's outcome is ``action`` (``COMPLETE``, ``FAIL`` or ``RESCHEDULE``)."""

    action: str
    ranges: tuple[tuple[int, int], ...]

    def matches(self, code: int) -> bool:
        return any(low <= code <= high for low, high in self.ranges)

    def to_dict(self) -> dict[str, Any]:
        return {"action": self.action, "codes": [[low, high] for low, high in self.ranges]}


@dataclass(frozen=True, slots=True)
class CheckpointSpec:
    """One ``checkpoint[]`` item: upload ``path`` of the container to ``url`` every ``frequency_s``
    seconds (and once more when the task ends), the files matching ``regex``."""

    path: str
    url: str
    frequency_s: int
    regex: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "url": self.url, "frequency_s": self.frequency_s, "regex": self.regex}


@dataclass(frozen=True, slots=True)
class VolumeMount:
    """One ``volumeMounts[]`` item (``<host path>[:<container path>[:ro]]``): a host directory."""

    host_path: str
    container_path: str
    read_only: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"host_path": self.host_path, "container_path": self.container_path, "read_only": self.read_only}


@dataclass(frozen=True, slots=True)
class TaskSpec:
    """One task (one pod). ``resource`` is the resource name, ``resource_spec`` its resolved value;
    ``inputs`` are the names of upstream tasks (all in other groups)."""

    name: str
    lead: bool
    image: str
    command: tuple[str, ...]
    args: tuple[str, ...] = ()
    environment: tuple[tuple[str, str], ...] = ()
    resource: str = "default"
    inputs: tuple[str, ...] = ()
    resource_spec: ResourceSpec = ResourceSpec(name="default")
    input_specs: tuple[InputSpec, ...] = ()  # every input in spec order (``inputs`` names only the tasks)
    outputs: tuple[OutputSpec, ...] = ()
    files: tuple[FileSpec, ...] = ()
    credentials: tuple[CredentialSpec, ...] = ()
    exit_actions: tuple[ExitAction, ...] = ()
    checkpoints: tuple[CheckpointSpec, ...] = ()
    volume_mounts: tuple[VolumeMount, ...] = ()
    privileged: bool = False
    host_network: bool = False

    def exit_action(self, code: int) -> str | None:
        """The action the spec gives for exit ``code``, or None (the service's default applies)."""
        return next((action.action for action in self.exit_actions if action.matches(code)), None)

    @property
    def topology(self) -> tuple[TopologyEntry, ...]:
        return self.resource_spec.topology

    def environment_dict(self) -> dict[str, str]:
        return dict(self.environment)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "lead": self.lead,
            "image": self.image,
            "command": list(self.command),
            "args": list(self.args),
            "environment": dict(self.environment),
            "resource": self.resource,
            "inputs": list(self.inputs),
            "requests": self.resource_spec.requests(),
            "nodes_excluded": list(self.resource_spec.nodes_excluded),
            "topology": [entry.to_dict() for entry in self.resource_spec.topology],
            "platform": self.resource_spec.platform,
            "input_specs": [item.to_dict() for item in self.input_specs],
            "outputs": [item.to_dict() for item in self.outputs],
            "files": [item.to_dict() for item in self.files],
            "credentials": [item.to_dict() for item in self.credentials],
            "exit_actions": [item.to_dict() for item in self.exit_actions],
            "checkpoints": [item.to_dict() for item in self.checkpoints],
            "volume_mounts": [item.to_dict() for item in self.volume_mounts],
            "privileged": self.privileged,
            "host_network": self.host_network,
        }


@dataclass(frozen=True, slots=True)
class GroupSpec:
    """A task group: a gang whose tasks start together, with its own constraint tree."""

    name: str
    tasks: tuple[TaskSpec, ...]
    inputs: tuple[str, ...]
    tree: ConstraintTree
    barrier: bool = True  # the tasks start together (OSMO's default)
    ignore_nonlead_status: bool = True  # the lead's outcome is the group's (OSMO's default)

    @property
    def lead(self) -> TaskSpec:
        return next(task for task in self.tasks if task.lead)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "inputs": list(self.inputs),
            "barrier": self.barrier,
            "ignore_nonlead_status": self.ignore_nonlead_status,
            "tasks": [task.to_dict() for task in self.tasks],
            "constraint_tree": tree_to_json(self.tree),
        }


@dataclass(frozen=True, slots=True)
class WorkflowSpec:
    """A validated workflow. ``groups`` keep the spec's order; ``resources`` are every declared
    resource (used or not) sorted by name; ``pool`` names the pool it was validated against."""

    name: str
    groups: tuple[GroupSpec, ...]
    version: int = 2
    queue_timeout_s: int | None = None
    exec_timeout_s: int | None = None
    labels: tuple[tuple[str, str], ...] = ()
    default_values: tuple[tuple[str, Any], ...] = ()  # any YAML value (mappings, lists): not hashable then
    resources: tuple[ResourceSpec, ...] = ()
    pool: str = ""
    spec_pool: str | None = None  # ``workflow.pool`` as written
    warnings: tuple[SpecError, ...] = ()  # accepted, but worth saying (a repeated key), path + message

    def tasks(self) -> Iterator[TaskSpec]:
        for group in self.groups:
            yield from group.tasks

    def group(self, name: str) -> GroupSpec:
        return next(group for group in self.groups if group.name == name)

    def labels_dict(self) -> dict[str, str]:
        return dict(self.labels)

    def group_order(self) -> tuple[str, ...]:
        """Group names in a deterministic topological order: upstream groups first, ties by spec order."""
        done: dict[str, None] = {}
        remaining = list(self.groups)
        while remaining:
            ready = next(group for group in remaining if all(name in done for name in group.inputs))
            done[ready.name] = None
            remaining.remove(ready)
        return tuple(done)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "version": self.version,
            "pool": self.pool,
            "spec_pool": self.spec_pool,
            "queue_timeout_s": self.queue_timeout_s,
            "exec_timeout_s": self.exec_timeout_s,
            "labels": dict(self.labels),
            "default_values": dict(self.default_values),
            "resources": [resource.to_dict() for resource in self.resources],
            "groups": [group.to_dict() for group in self.groups],
        }
