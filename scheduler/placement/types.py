"""Solver input and output types (docs/design.md §5). Pure: stdlib, the resource table and the tree
types; frozen values, ids are strings.

Units: ``gpu`` whole devices, ``cpu`` millicores, ``memory`` and ``storage`` bytes (the spec package's
quantity parser produces these). ``NodeState.labels`` holds one value per topology key of the
snapshot, coarsest first, ``None`` where the node lacks the label. Domain identity at level ``i`` is
``labels[: i + 1]`` (the whole path), so ``rack=r1`` in two zones is two racks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal

from scheduler.resources import RESOURCE_NAMES as RESOURCE_NAMES  # the order of every resource vector
from topology.tree import ConstraintTree, NodePath

#: A resource vector in :data:`RESOURCE_NAMES` order: (gpu, cpu millicores, memory bytes, storage bytes).
#: The one definition: the index, the search, the CP-SAT adapter and preemption import it from here.
Vec = tuple[int, int, int, int]


@dataclass(frozen=True, slots=True)
class Resources:
    gpu: int = 0
    cpu: int = 0  # millicores
    memory: int = 0  # bytes
    storage: int = 0  # bytes

    def as_tuple(self) -> tuple[int, int, int, int]:
        return (self.gpu, self.cpu, self.memory, self.storage)

    def as_dict(self) -> dict[str, int]:
        return {"gpu": self.gpu, "cpu": self.cpu, "memory": self.memory, "storage": self.storage}


@dataclass(frozen=True, slots=True)
class NodeState:
    """A machine as the solver sees it: free capacity after external usage and reservations."""

    name: str
    labels: tuple[str | None, ...]
    free: Resources
    schedulable: bool = True


@dataclass(frozen=True, slots=True)
class ClusterSnapshot:
    pool: str
    keys: tuple[str, ...]  # topology key names, coarsest first
    nodes: tuple[NodeState, ...]


@dataclass(frozen=True, slots=True)
class TaskRequest:
    name: str
    resources: Resources
    nodes_excluded: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class GangRequest:
    """One gang: its constraint tree and every task's request (tasks named as in the tree)."""

    name: str
    tree: ConstraintTree
    tasks: tuple[TaskRequest, ...]


@dataclass(frozen=True, slots=True)
class Policy:
    """Search limits. ``max_steps`` bounds the work of one solve (steps of even cost, see
    :class:`scheduler.placement.budget.Budget`) and decides the result deterministically; ``max_seconds``
    is a wall-clock ceiling for overloaded machines (``None``, the default: none, so equal inputs give
    equal outputs; the placement cycle sets ``OSMO_SOLVE_MAX_SECONDS``). Either one running out before a
    placement is found makes the result "undecided", never "unschedulable"; the ceiling reached while
    relaxing preferences keeps the placement found so far (fewer preferences met)."""

    max_steps: int = 200_000
    max_seconds: float | None = None


@dataclass(frozen=True, slots=True)
class ConstraintReport:
    """How one constraint node was met: ``met_key`` is the key whose single domain holds all its
    tasks (the node's own key when met), or ``None`` when its tasks span several zones."""

    path: NodePath
    key: str
    requirement: str
    met: bool
    met_key: str | None
    domains: tuple[tuple[str | None, ...], ...] = ()  # label paths of the domains used at ``key``


@dataclass(frozen=True, slots=True)
class Placement:
    status: Literal["placed"]
    assignments: tuple[tuple[str, str], ...]  # (task, node), sorted by task
    report: tuple[ConstraintReport, ...] = ()

    @property
    def tasks(self) -> dict[str, str]:
        return dict(self.assignments)

    @property
    def nodes(self) -> frozenset[str]:
        """The machines the placement uses."""
        return frozenset(node for _task, node in self.assignments)


class ReasonCode(StrEnum):
    """Why a gang is not placed: the ``code`` of every stored reason (docs/design.md §5). The solver
    proves the first five; ``undecided`` means its budget ran out; the placement cycle adds the rest
    without solving."""

    UNKNOWN_KEY = "unknown_key"  # a required constraint names a key the pool does not have
    NO_DOMAIN = "no_domain"  # no domain of a required key can hold the node's tasks
    NO_ROOM_FOR_GROUPS = "no_room_for_groups"  # no domain holds enough copies of identical child groups
    INSUFFICIENT_CAPACITY = "insufficient_capacity"  # the pool's usable machines cannot hold the gang
    COMBINATION = "combination"  # each constraint fits alone, not all together
    UNDECIDED = "undecided"
    POOL_KEYS_CHANGED = "pool_keys_changed"
    BEHIND_STARVING_GROUP = "behind_starving_group"
    QUOTA_EXCEEDED = "quota_exceeded"  # the team's HIGH/NORMAL work would hold more GPUs than its quota
    POOL_NOT_ONLINE = "pool_not_online"  # the pool is OFFLINE or in MAINTENANCE: nothing is placed
    BACKEND_NOT_ONLINE = "backend_not_online"  # the pool's backend does not answer (or is in MAINTENANCE)
    CLUSTER_REFUSED = "cluster_refused"  # the cluster refused to schedule a placed pod: the gang is queued again


@dataclass(frozen=True, slots=True)
class Unplaceable:
    """Cannot place now. ``status`` is "unschedulable" (proven infeasible on this snapshot) or
    "undecided" (the step budget ran out first). ``reason`` is structured for pages and the API, with
    a :class:`ReasonCode` under ``code``; ``message`` is one line for people."""

    status: Literal["unschedulable", "undecided"]
    reason: dict[str, Any] = field(default_factory=dict)
    message: str = ""
