"""The rules of the run-state machine (docs/design.md §6), as pure functions over status strings.

Stdlib only: no Django, no database. The rest of :mod:`workflows.lifecycle` applies these rules to
rows; :mod:`workflows.choices` builds the Django choices from the vocabulary defined here, so each
status is spelled once. Every status change is an edge of one table (:data:`TASK_EDGES`,
:data:`GANG_EDGES`, :data:`WORKFLOW_EDGES`): :func:`transition_needed` refuses the rest.

Tasks and groups share one status vocabulary; a group (a gang) moves as one:
- a task's status follows its pod (Pending -> INITIALIZING, Running -> RUNNING, Succeeded ->
  COMPLETED, Failed -> FAILED); terminal statuses are final;
- the gang is COMPLETED once every task completed, RUNNING once any task runs or completed, and
  fails as soon as one task failed, with that task's status (the others are stopped);
- a WAITING group becomes SCHEDULING once every upstream group COMPLETED, and FAILED_UPSTREAM once any
  upstream group (directly or through other groups) ended without completing;
- the workflow is COMPLETED when every group completed; once every group is terminal, it takes the
  first real failure (not a consequence such as FAILED_UPSTREAM); RUNNING once any group got capacity
  or completed; PENDING before that.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

# -- vocabulary ------------------------------------------------------------------------------------
WAITING = "WAITING"
SCHEDULING = "SCHEDULING"
INITIALIZING = "INITIALIZING"
RUNNING = "RUNNING"
COMPLETED = "COMPLETED"
FAILED = "FAILED"
FAILED_CANCELED = "FAILED_CANCELED"
FAILED_BACKEND_ERROR = "FAILED_BACKEND_ERROR"
FAILED_QUEUE_TIMEOUT = "FAILED_QUEUE_TIMEOUT"
FAILED_UPSTREAM = "FAILED_UPSTREAM"
FAILED_SERVER_ERROR = "FAILED_SERVER_ERROR"
PENDING = "PENDING"  # workflows only

#: Every task/group status, in lifecycle order.
TASK_STATUSES: tuple[str, ...] = (
    WAITING, SCHEDULING, INITIALIZING, RUNNING, COMPLETED, FAILED, FAILED_CANCELED, FAILED_BACKEND_ERROR,
    FAILED_QUEUE_TIMEOUT, FAILED_UPSTREAM, FAILED_SERVER_ERROR,
)
#: Every workflow status.
WORKFLOW_STATUSES: tuple[str, ...] = (
    PENDING, RUNNING, COMPLETED, FAILED, FAILED_CANCELED, FAILED_BACKEND_ERROR, FAILED_QUEUE_TIMEOUT,
    FAILED_UPSTREAM, FAILED_SERVER_ERROR,
)
TERMINAL: frozenset[str] = frozenset(
    {COMPLETED, FAILED, FAILED_CANCELED, FAILED_BACKEND_ERROR, FAILED_QUEUE_TIMEOUT, FAILED_UPSTREAM,
     FAILED_SERVER_ERROR}
)
FAILURES: frozenset[str] = TERMINAL - {COMPLETED}
ACTIVE: frozenset[str] = frozenset({INITIALIZING, RUNNING})  # holding capacity
QUEUED: frozenset[str] = frozenset({WAITING, SCHEDULING})
WORKFLOW_TERMINAL: frozenset[str] = frozenset(WORKFLOW_STATUSES) - {PENDING, RUNNING}


# -- the edges ---------------------------------------------------------------------------------------
# Every status change the service makes, once (docs/design.md §6, "The edges"). A task and its gang
# share one table: the gang moves as one, its tasks with it. A terminal status is final: a late report
# against a terminal row (a pod's phase read before a cancel committed) is dropped, not an error. Any
# other change not listed raises :class:`TransitionNotAllowedError`.
_CANCEL = (FAILED_CANCELED,)
_ENDS_OF_ACTIVE = (COMPLETED, FAILED, FAILED_BACKEND_ERROR, *_CANCEL)
TASK_EDGES: frozenset[tuple[str, str]] = frozenset(
    [(WAITING, to) for to in (SCHEDULING, FAILED_UPSTREAM, *_CANCEL)]  # promoted, upstream failed
    + [(SCHEDULING, to) for to in (INITIALIZING, FAILED_QUEUE_TIMEOUT, FAILED_SERVER_ERROR, *_CANCEL)]  # placed
    + [(INITIALIZING, to) for to in (RUNNING, *_ENDS_OF_ACTIVE, SCHEDULING)]  # SCHEDULING: preempted
    + [(RUNNING, to) for to in (*_ENDS_OF_ACTIVE, SCHEDULING)]
)
#: A gang (task group) moves along the edges of its tasks.
GANG_EDGES: frozenset[tuple[str, str]] = TASK_EDGES
#: A workflow's status is derived from its groups' (:func:`workflow_status`): PENDING until a gang got
#: capacity, back to PENDING when its only running gang was preempted, terminal once every group is.
WORKFLOW_EDGES: frozenset[tuple[str, str]] = frozenset(
    [(PENDING, to) for to in (RUNNING, *WORKFLOW_TERMINAL)] + [(RUNNING, to) for to in (PENDING, *WORKFLOW_TERMINAL)]
)
EDGES: dict[str, frozenset[tuple[str, str]]] = {"task": TASK_EDGES, "gang": GANG_EDGES, "workflow": WORKFLOW_EDGES}


class TransitionNotAllowedError(Exception):
    """A status change that is not an edge of the table (a bug in its caller, never user input)."""

    def __init__(self, kind: str, current: str, new: str) -> None:
        super().__init__(f"{kind} status {current or '(new)'} -> {new} is not an edge of the lifecycle")
        self.kind, self.current, self.new = kind, current, new


def transition_needed(kind: str, current: str, new: str) -> bool:
    """Whether moving a ``kind`` ("task", "gang", "workflow") row from ``current`` to ``new`` is a
    change to write: False when it is already there or its status is terminal (final); True for an
    edge of the table; raises :class:`TransitionNotAllowedError` for anything else."""
    if current == new or current in TERMINAL:
        return False
    if (current, new) not in EDGES[kind]:
        raise TransitionNotAllowedError(kind, current, new)
    return True


def is_transition_allowed(current: str, new: str) -> bool:
    """Whether a task or gang in ``current`` moves to ``new``: a change, from a non-terminal status,
    along an edge of the table (a pure question: never raises)."""
    return current != new and current not in TERMINAL and (current, new) in TASK_EDGES


# -- workflow ---------------------------------------------------------------------------------------
def workflow_status(group_statuses: Sequence[str]) -> str:
    """The workflow's status from its groups' statuses, in group order (OSMO's aggregation)."""
    if group_statuses and all(s == COMPLETED for s in group_statuses):
        return COMPLETED
    if group_statuses and all(s in TERMINAL for s in group_statuses):
        failures = [s for s in group_statuses if s in FAILURES]
        primary = [s for s in failures if s != FAILED_UPSTREAM] or failures
        return primary[0]
    if any(s in (INITIALIZING, RUNNING, COMPLETED) for s in group_statuses):
        return RUNNING
    return PENDING


# -- gang ---------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class GangVerdict:
    """What a gang's task statuses mean for the gang.

    ``status`` is the group's new status (``None``: no change is implied). When a member failed,
    ``failed_task`` is the index of the first failed task (the one named in the message) and
    ``stop`` lists the indices of the members that must be stopped (status FAILED)."""

    status: str | None
    failed_task: int | None = None
    stop: tuple[int, ...] = ()


def gang_verdict(task_statuses: Sequence[str]) -> GangVerdict:
    """Settle a gang from its tasks' statuses (in task order)."""
    failed = [i for i, s in enumerate(task_statuses) if s in FAILURES]
    if failed:
        first = failed[0]
        status = task_statuses[first]
        stop = tuple(i for i, s in enumerate(task_statuses) if s not in TERMINAL)
        return GangVerdict(FAILED if status == FAILED_UPSTREAM else status, first, stop)
    if task_statuses and all(s == COMPLETED for s in task_statuses):
        return GangVerdict(COMPLETED)
    if any(s in (RUNNING, COMPLETED) for s in task_statuses):
        return GangVerdict(RUNNING)
    return GangVerdict(None)


# -- DAG between groups ------------------------------------------------------------------------------
def downstream_failures(failed: str, waiting: Mapping[str, Sequence[str]]) -> dict[str, str]:
    """Groups that can never start because ``failed`` ended without completing.

    ``waiting`` maps each WAITING group to its upstream group names. Returns, for every group reached
    directly or through other failing groups, the name of the failed upstream group its message
    names (the alphabetically first failed one among its own upstream groups), in the order found."""
    failed_names = {failed}
    result: dict[str, str] = {}
    remaining = dict(waiting)
    changed = True
    while changed:
        changed = False
        for name, upstream in list(remaining.items()):
            hit = failed_names.intersection(upstream)
            if hit:
                result[name] = sorted(hit)[0]
                failed_names.add(name)
                del remaining[name]
                changed = True
    return result


def waiting_group_verdict(upstream: Sequence[str], statuses: Mapping[str, str]) -> str | None:
    """For a WAITING group with these upstream groups: SCHEDULING when all completed,
    FAILED_UPSTREAM when one ended without completing, ``None`` while it must keep waiting."""
    current = [statuses.get(name) for name in upstream]
    if all(status == COMPLETED for status in current):
        return SCHEDULING
    if any(status in FAILURES for status in current):
        return FAILED_UPSTREAM
    return None
