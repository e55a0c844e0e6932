"""The rules of the run-state machine (docs/design.md §6), as pure functions over status strings.

Stdlib only: no Django, no database. The rest of :mod:`workflows.lifecycle` applies these rules to
rows; :mod:`workflows.choices` builds the Django choices from the vocabulary defined here, so each
status is spelled once. Every status change is an edge of one table (:data:`TASK_EDGES`,
:data:`GANG_EDGES`, :data:`WORKFLOW_EDGES`): :func:`transition_needed` refuses the rest.

Tasks and groups share one status vocabulary; a group (a gang) moves as one:
- a task's status follows its pod (Pending -> INITIALIZING, Running -> RUNNING); its exit code is
  settled by its exit action (:func:`exit_verdict`: 0 -> COMPLETED, anything else -> FAILED or the
  infrastructure failure the code names, ``exitActions`` override, RESCHEDULE sends its gang back to
  the queue through RESCHEDULED up to the pool's retry limit); terminal statuses are final;
- a gang's outcome is its lead's (OSMO's ``ignoreNonleadStatus: true``, the default): it ends when
  the lead ends, the members still going are stopped; with ``ignoreNonleadStatus: false`` it fails as
  soon as one task failed, with that task's status, and completes once every task completed
  (:func:`gang_verdict`); RUNNING once any task runs or completed;
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
FAILED_PREEMPTED = "FAILED_PREEMPTED"
FAILED_EVICTED = "FAILED_EVICTED"
FAILED_IMAGE_PULL = "FAILED_IMAGE_PULL"
FAILED_START_ERROR = "FAILED_START_ERROR"
FAILED_START_TIMEOUT = "FAILED_START_TIMEOUT"
FAILED_EXEC_TIMEOUT = "FAILED_EXEC_TIMEOUT"
RESCHEDULED = "RESCHEDULED"  # a gang sent back to the queue (history only: the row moves on to SCHEDULING)
PENDING = "PENDING"  # workflows only

#: Every task/group status, in lifecycle order.
#: Failures after OSMO's status reference that the service sets (its own and the infrastructure's).
_FAILED_STATUSES: tuple[str, ...] = (
    FAILED, FAILED_CANCELED, FAILED_BACKEND_ERROR, FAILED_QUEUE_TIMEOUT, FAILED_UPSTREAM, FAILED_SERVER_ERROR,
    FAILED_PREEMPTED, FAILED_EVICTED, FAILED_IMAGE_PULL, FAILED_START_ERROR, FAILED_START_TIMEOUT,
    FAILED_EXEC_TIMEOUT,
)
TASK_STATUSES: tuple[str, ...] = (
    WAITING, SCHEDULING, INITIALIZING, RUNNING, RESCHEDULED, COMPLETED, *_FAILED_STATUSES,
)
#: Every workflow status (a failed workflow takes its first failed group's status).
WORKFLOW_STATUSES: tuple[str, ...] = (PENDING, RUNNING, COMPLETED, *_FAILED_STATUSES)
TERMINAL: frozenset[str] = frozenset({COMPLETED, *_FAILED_STATUSES})
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
#: How a task that holds capacity ends: its exit (COMPLETED, FAILED or an infrastructure failure the
#: exit code names), a backend or service verdict, a cancel.
_ENDS_OF_ACTIVE = (COMPLETED, FAILED, FAILED_BACKEND_ERROR, FAILED_EVICTED, FAILED_IMAGE_PULL, FAILED_START_ERROR,
                   FAILED_START_TIMEOUT, FAILED_EXEC_TIMEOUT, FAILED_PREEMPTED, *_CANCEL)
TASK_EDGES: frozenset[tuple[str, str]] = frozenset(
    [(WAITING, to) for to in (SCHEDULING, FAILED_UPSTREAM, *_CANCEL)]  # promoted, upstream failed
    + [(SCHEDULING, to) for to in (INITIALIZING, FAILED_QUEUE_TIMEOUT, FAILED_SERVER_ERROR, *_CANCEL)]  # placed
    # RESCHEDULED: preempted, or an exit action sent the gang back; it is queued again at once, in the
    # same transaction (the row's status is SCHEDULING, the history shows both moves)
    + [(INITIALIZING, to) for to in (RUNNING, *_ENDS_OF_ACTIVE, RESCHEDULED)]
    + [(RUNNING, to) for to in (*_ENDS_OF_ACTIVE, RESCHEDULED)]
    + [(RESCHEDULED, SCHEDULING)]
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


def gang_verdict(task_statuses: Sequence[str], *, lead: int | None = None, ignore_nonlead: bool = True
                 ) -> GangVerdict:
    """Settle a gang from its tasks' statuses (in task order).

    With a ``lead`` (its index) and ``ignore_nonlead`` (OSMO's ``ignoreNonleadStatus``, default true)
    the lead decides: the gang ends when the lead ends, with the lead's outcome, and the members still
    going are stopped; another member's failure does not end it. Otherwise (``ignoreNonleadStatus:
    false``, or no lead known) any member's failure fails the gang, which completes once all did."""
    if lead is not None and ignore_nonlead:
        status = task_statuses[lead]
        if status in TERMINAL:
            stop = tuple(i for i, s in enumerate(task_statuses) if s not in TERMINAL)
            if status == COMPLETED:
                return GangVerdict(COMPLETED, stop=stop)
            return GangVerdict(FAILED if status == FAILED_UPSTREAM else status, lead, stop)
        if any(s in (RUNNING, COMPLETED) for s in task_statuses):
            return GangVerdict(RUNNING)
        return GangVerdict(None)
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


# -- a task's exit --------------------------------------------------------------------------------
COMPLETE, FAIL, RESCHEDULE = "COMPLETE", "FAIL", "RESCHEDULE"  # OSMO's exit actions
#: The runtime's OSMO exit code for a task that did not start in time (runtime/exitcodes.py).
EXIT_START_TIMEOUT = 3005
#: Exit codes that name an infrastructure failure, and the status a failing task takes for them.
EXIT_STATUSES: Mapping[int, str] = {EXIT_START_TIMEOUT: FAILED_START_TIMEOUT}

ExitActions = Sequence[tuple[str, Sequence[tuple[int, int]]]]


def exit_action(code: int, actions: ExitActions = ()) -> str:
    """The action for a task's exit ``code``: the spec's ``exitActions`` (action, inclusive code
    ranges) when one names the code, else OSMO's default: 0 -> COMPLETE, anything else -> FAIL."""
    for action, ranges in actions:
        if any(low <= code <= high for low, high in ranges):
            return action
    return COMPLETE if code == 0 else FAIL


@dataclass(frozen=True, slots=True)
class ExitVerdict:
    """What a task's exit means: its status (None: the gang is rescheduled) and the message."""

    status: str | None
    message: str


def exit_verdict(code: int, actions: ExitActions = (), *, retries: int = 0, max_retries: int = 0,
                 message: str = "") -> ExitVerdict:
    """Apply the exit action for ``code``. RESCHEDULE sends the gang back to the queue while it was
    rescheduled fewer than ``max_retries`` times (the pool's limit); past it the task fails, and the
    message says the limit. A failure takes the status its code names (:data:`EXIT_STATUSES`)."""
    action = exit_action(code, actions)
    said = message or f"exit code {code}"
    if action == COMPLETE:
        return ExitVerdict(COMPLETED, "")
    if action == RESCHEDULE:
        if retries < max_retries:
            return ExitVerdict(None, f"{said}: rescheduled (retry {retries + 1} of {max_retries})")
        return ExitVerdict(FAILED, f"{said}: RESCHEDULE refused, the pool's limit of {max_retries} "
                                   f"retries is reached")
    return ExitVerdict(EXIT_STATUSES.get(code, FAILED), said)


# -- what the cluster did ------------------------------------------------------------------------------
# The causes a backend names (``scheduler.dispatch.base.CAUSE_*``; spelled again here, this module imports
# no app code) and what each does to a task (docs/design.md §6, "When the cluster is the cause").
CAUSE_UNSCHEDULABLE, CAUSE_DISRUPTED, CAUSE_EVICTED, CAUSE_NODE_LOST = (
    "unschedulable", "disrupted", "evicted", "node_lost")
CAUSE_IMAGE_PULL, CAUSE_START_ERROR = "image_pull", "start_error"
#: A task lost to the infrastructure is rescheduled with its gang while the pool's retry limit allows;
#: past it, it fails with this status.
LOST_STATUSES: Mapping[str, str] = {CAUSE_DISRUPTED: FAILED_EVICTED, CAUSE_EVICTED: FAILED_EVICTED,
                                    CAUSE_NODE_LOST: FAILED_BACKEND_ERROR}
#: A pod that never ran for a reason of its own (its image, its container's creation) fails with this
#: status, whatever its exit actions say (the task never ran).
START_FAILURE_STATUSES: Mapping[str, str] = {CAUSE_IMAGE_PULL: FAILED_IMAGE_PULL,
                                             CAUSE_START_ERROR: FAILED_START_ERROR}
#: A gang whose pods the cluster kept refusing to schedule fails with this status past the requeue limit.
REFUSED_STATUS = FAILED_BACKEND_ERROR


def lost_verdict(cause: str, *, retries: int, max_retries: int, message: str) -> ExitVerdict:
    """A task lost to the infrastructure (``cause`` a key of :data:`LOST_STATUSES`): its gang is
    rescheduled (status None) while it was rescheduled fewer than ``max_retries`` times, else the task
    fails with the cause's status; the message quotes the cluster."""
    if retries < max_retries:
        return ExitVerdict(None, f"{message}: rescheduled (retry {retries + 1} of {max_retries})")
    return ExitVerdict(LOST_STATUSES[cause], f"{message}: not rescheduled, the pool's limit of {max_retries} "
                                             f"retries is reached")


def refused_verdict(*, requeues: int, max_requeues: int, message: str) -> ExitVerdict:
    """A gang whose pod the cluster refused to schedule: queued again (status None) while it was
    requeued fewer than ``max_requeues`` times, else :data:`REFUSED_STATUS`; the message quotes the
    cluster."""
    if requeues < max_requeues:
        return ExitVerdict(None, f"the cluster refused to schedule it: {message} (queued again, "
                                 f"{requeues + 1} of {max_requeues})")
    return ExitVerdict(REFUSED_STATUS, f"the cluster refused to schedule it {requeues + 1} times: {message}")


def exit_codes_parse(value: object) -> tuple[tuple[int, int], ...]:
    """A validated spec's ``exitActions.<action>`` value (``3``, ``"1,2,10-20"`` or a list of those)
    as inclusive ranges (the parser refused anything else at submission; what does not read is skipped)."""
    parts = list(value) if isinstance(value, list | tuple) else [value]
    ranges: list[tuple[int, int]] = []
    for part in parts:
        for item in str(part).split(","):
            low, _, high = item.strip().partition("-")
            try:
                ranges.append((int(low), int(high or low)))
            except ValueError:
                continue
    return tuple(ranges)


def exit_actions_parse(raw: object) -> tuple[tuple[str, tuple[tuple[int, int], ...]], ...]:
    """A validated spec's ``exitActions`` mapping as (action, ranges) pairs; () for anything else."""
    if not isinstance(raw, Mapping):
        return ()
    return tuple((str(action), exit_codes_parse(codes)) for action, codes in raw.items()
                 if action in (COMPLETE, FAIL, RESCHEDULE))


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
