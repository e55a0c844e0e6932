"""Intermediate, mutable records of a spec being parsed (drafts), shared by the parser and the
cross-checks. A field is ``None`` when its value was invalid (the error is already recorded), so
later checks can skip what they cannot judge instead of reporting the same mistake twice."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from workflows.spec.model import (
    CheckpointSpec,
    CredentialSpec,
    ExitAction,
    FileSpec,
    InputSpec,
    OutputSpec,
    ResourceSpec,
    TopologyEntry,
    VolumeMount,
)

DEFAULT_RESOURCE = "default"
MAX_LISTED = 10


@dataclass(slots=True)
class TaskDraft:
    path: str
    group_index: int
    name: str | None = None
    lead: bool | None = None
    image: str | None = None
    command: tuple[str, ...] | None = None
    args: tuple[str, ...] = ()
    environment: tuple[tuple[str, str], ...] = ()
    resource: str = DEFAULT_RESOURCE
    inputs: list[tuple[str, str]] = field(default_factory=list)  # (task name, path)
    input_specs: list[InputSpec] = field(default_factory=list)  # every input, in spec order
    outputs: tuple[OutputSpec, ...] = ()
    files: tuple[FileSpec, ...] = ()
    credentials: tuple[CredentialSpec, ...] = ()
    exit_actions: tuple[ExitAction, ...] = ()
    checkpoints: tuple[CheckpointSpec, ...] = ()
    volume_mounts: tuple[VolumeMount, ...] = ()
    privileged: bool = False
    host_network: bool = False
    texts: list[tuple[str, str]] = field(default_factory=list)  # (path, text) that may hold tokens


@dataclass(slots=True)
class GroupDraft:
    path: str
    name: str | None
    tasks: list[TaskDraft] = field(default_factory=list)
    derived: bool = False  # a bare task's group, named after it
    barrier: bool = True
    ignore_nonlead_status: bool = True


@dataclass(slots=True)
class ResourceDraft:
    path: str
    spec: ResourceSpec | None  # None: some field is invalid
    topology: tuple[TopologyEntry, ...] | None  # None: some topology entry is invalid


IMPLICIT_DEFAULT = ResourceDraft(path="", spec=ResourceSpec(name=DEFAULT_RESOURCE), topology=())


def listing(names: Sequence[str]) -> str:
    """Names joined by ', ', cut after ``MAX_LISTED`` with a count of the rest."""
    shown = ", ".join(names[:MAX_LISTED])
    return f"{shown} and {len(names) - MAX_LISTED} more" if len(names) > MAX_LISTED else shown
