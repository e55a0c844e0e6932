"""The values the placement cycle's three steps hand each other (docs/design.md §8): what the read
step gives the walk (:class:`CycleInput` with its :class:`QueuedGang` rows, and a :class:`GangSource`
for what is read only when a gang must be solved), and what the walk gives the apply step (a frozen
:class:`Decision`). No database here: a test builds these by hand."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from scheduler.hold import Holder
from scheduler.placement import ClusterSnapshot, Placement
from scheduler.preemption import Candidate

if TYPE_CHECKING:
    from workflows.scheduling.pod.platform_nodes import PlatformNodes


@dataclass(frozen=True, slots=True)
class QueuedGang:
    """A queued (SCHEDULING) gang as the walk sees it: one light row; its constraint tree and task
    requests come from :meth:`GangSource.gang_rows` when it must be solved."""

    pk: int
    workflow_id: int
    name: str
    rank: int  # priority rank (HIGH 0, NORMAL 1, LOW 2)
    order: list[Any]  # the queue order key, JSON-able (the cursor stores one)
    scheduling_since: datetime | None
    proof_epoch: int | None  # capacity epoch at which it was proven unschedulable
    signature: str  # :func:`scheduler.placement.signature.gang_signature` of its request
    reason_code: str
    reason_digest: str  # digest of the reason it carries (not rewritten when unchanged)
    idle_fit: bool | None  # whether it fits the idle pool, at ``idle_fit_epoch`` (an inventory epoch)
    idle_fit_epoch: int | None
    keys_version: int  # the pool's keys version at submission
    team_id: int | None = None
    preemptions: int = 0
    workflow_label: str = ""  # the workflow's id as users see it
    exec_timeout_s: int | None = None  # its workflow's exec_timeout (EASY backfill onto held machines)


class GangRow:
    """What solving a gang needs of its row besides :class:`QueuedGang`: its constraint tree and task
    requests (``TaskGroup.task_requests``). :meth:`from_json` keeps them as the database's JSON text
    and decodes each on first use: the walk reads rows in batches ahead of the gangs it reaches, and
    most of those take an identical gang's verdict without being solved (a large gang's requests take
    ~0.1 ms to decode)."""

    __slots__ = ("_tree", "_requests", "_tree_json", "_requests_json")

    def __init__(self, constraint_tree: dict[str, Any], task_requests: list[list[Any]]) -> None:
        self._tree: dict[str, Any] | None = constraint_tree
        self._requests: list[list[Any]] | None = task_requests
        self._tree_json = self._requests_json = ""

    @classmethod
    def from_json(cls, constraint_tree: str, task_requests: str | None) -> GangRow:
        """The row from its columns' JSON text (``task_requests`` None or ``null``: no requests)."""
        row = cls.__new__(cls)
        row._tree = row._requests = None
        row._tree_json, row._requests_json = constraint_tree, task_requests or "null"
        return row

    @property
    def constraint_tree(self) -> dict[str, Any]:
        if self._tree is None:
            self._tree = json.loads(self._tree_json)
        return self._tree

    @property
    def task_requests(self) -> list[list[Any]]:
        if self._requests is None:
            self._requests = json.loads(self._requests_json) or []
        return self._requests


@dataclass(frozen=True, slots=True)
class RunningGang:
    """A running LOW gang the walk may evict (docs/design.md §9), with what it holds."""

    group_id: int
    workflow_id: int
    team_id: int | None
    candidate: Candidate  # ``borrowing`` is set when searched (quotas as they stand then)
    preemptible_at: float = 0.0  # epoch seconds: its start plus the pool's minimum runtime


class GangSource(Protocol):
    """What the walk reads on demand (so that an idle or proven queue costs no more queries)."""

    def gang_rows(self, pks: Sequence[int]) -> Mapping[int, GangRow]:
        """Constraint trees and task requests of these gangs."""
        ...

    def pool_keys(self, workflow_id: int) -> list[list[str]]:
        """The pool's (key, label) pairs as the workflow's submission saw them."""
        ...

    def snapshot(self) -> tuple[ClusterSnapshot, dict[str, int]]:
        """The pool now (reservations taken off), and each machine's id by name."""
        ...

    def platforms(self) -> Mapping[str, PlatformNodes]:
        """The pool's platforms that select nodes
        (:func:`~workflows.scheduling.pod.platform_nodes.platform_exclusions`)."""
        ...

    def idle_snapshot(self) -> ClusterSnapshot:
        """The pool as if nothing of ours ran on it."""
        ...

    def running_low(self) -> list[RunningGang]:
        """The pool's running LOW gangs none of whose tasks finished, in start order."""
        ...

    def holders(self, now: float) -> list[Holder]:
        """The pool's placed gangs (any priority) with what they hold and when each is expected to end
        (:func:`scheduler.hold.expected_end` at ``now``, epoch seconds): the starvation guard's
        hold by expected end (docs/design.md §6)."""
        ...


@dataclass(frozen=True, slots=True)
class CycleInput:
    """Everything the walk decides from, read at the start of the cycle (besides :class:`GangSource`)."""

    pool_id: int
    pool_name: str
    keys_version: int
    key_labels: tuple[tuple[str, str], ...]
    now: datetime
    capacity_epoch: int
    inventory_epoch: int
    queue: tuple[QueuedGang, ...]  # in queue order
    cursor: list[Any] | None = None  # where the previous cycle stopped, out of time
    # fair share: each team's usage the queue was ordered by (None: fair share off); a walk that
    # stops out of time keeps it, so the cycles that resume it see the order it saw
    usage: Mapping[int | None, float] | None = None
    proofs: Mapping[str, int] = field(default_factory=dict)  # signature -> epoch, proven at this epoch
    starvation: timedelta = timedelta(seconds=0)
    max_holds: int = 1  # OSMO_STARVATION_MAX_HOLDS: starving gangs holding machines at once
    budget_seconds: float = float("inf")
    preemption: bool = False  # OSMO_PREEMPTION_ENABLED
    min_runtime: float = 0.0  # the pool's minimum runtime, seconds (docs/design.md §9)
    # With a minimum runtime: when each queued HIGH/NORMAL gang first did not fit within its team's
    # quota (group id -> epoch seconds), carried from cycle to cycle: it evicts LOW work only once it
    # has waited the minimum runtime since (docs/design.md §9, waiting before evicting).
    blocked_since: Mapping[int, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Placed:
    """A gang placed by the walk (on the index, or by evicting LOW gangs)."""

    gang: QueuedGang
    placement: Placement


@dataclass(frozen=True, slots=True)
class Verdict:
    """One reason written to the gangs that share it (one UPDATE)."""

    group_ids: tuple[int, ...]
    reason: dict[str, Any]
    proof: int | None  # the capacity epoch it proves them unschedulable at (None: no proof)
    code: str
    digest: str


@dataclass(frozen=True, slots=True)
class Eviction:
    """A running LOW gang evicted for ``preemptor`` (a workflow label)."""

    group_id: int
    workflow_id: int
    preemptor: str


@dataclass(frozen=True)
class Decision:
    """What one walk decided; :mod:`workflows.scheduling.cycle.apply` writes it."""

    placements: tuple[Placed, ...] = ()
    node_ids: Mapping[str, int] = field(default_factory=dict)  # machine name -> id (placed gangs)
    verdicts: tuple[Verdict, ...] = ()
    proofs_only: tuple[tuple[int | None, tuple[int, ...]], ...] = ()  # gangs whose reason stands: (proof, ids)
    idle_fits: tuple[tuple[bool, tuple[int, ...]], ...] = ()  # (fits the idle pool, ids), at the inventory epoch
    evictions: tuple[Eviction, ...] = ()
    failed: tuple[QueuedGang, ...] = ()  # solver errors: FAILED_SERVER_ERROR
    unschedulable: tuple[int, ...] = ()  # every gang left queued with a verdict (waiting ones included)
    undecided: tuple[int, ...] = ()
    cursor: list[Any] | None = None  # where this walk stopped, out of time
    proofs: Mapping[str, int] = field(default_factory=dict)  # signature -> capacity epoch of its proof
    wake_at: str | None = None  # when a queued gang next crosses the starvation threshold
    blocked_since: Mapping[int, float] = field(default_factory=dict)  # :attr:`CycleInput.blocked_since`, updated
    retry: bool = False  # a verdict that is no proof was made: the next cycle walks again
    solved: int = 0
    proven: int = 0
    shared: int = 0
    resumed: bool = False
    budget_exhausted: bool = False
