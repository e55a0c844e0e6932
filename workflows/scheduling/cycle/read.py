"""The read step of the placement cycle (docs/design.md §8): the pool's queue and what the walk needs
of the pool, as named rows (:mod:`workflows.scheduling.cycle.values`), built here and nowhere else.
Queries per cycle do not grow with the queue: one light read of the queue; gang rows fetched in
batches, only for gangs that must be solved (:class:`DatabaseSource`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from django.db.models import Case, Count, F, IntegerField, Max, Min, Q, QuerySet, Sum, TextField, Value, When
from django.db.models.functions import Cast
from django.utils import timezone

from scheduler.fairshare import fair_order
from scheduler.fairshare.usage import team_usage_by_id
from scheduler.hold import Holder, expected_end
from scheduler.models import Node, Pool, PoolPlatform, Reservation
from scheduler.placement import ClusterSnapshot, Resources
from scheduler.preemption import Candidate
from scheduler.reads.snapshot import snapshot_empty, snapshot_load_with_ids
from scheduler.resources import AMOUNT_FIELDS
from workflows.choices import PRIORITY_RANK, TASK_ACTIVE_STATUSES, TASK_TERMINAL_STATUSES, Priority, TaskStatus
from workflows.models import PoolCycleState, Task, TaskGroup, Workflow
from workflows.scheduling.cycle.values import GangRow, QueuedGang, RunningGang
from workflows.scheduling.pod.platform_nodes import PlatformNodes


def _priority_rank() -> Case:
    return Case(
        *[When(workflow__priority=name, then=Value(rank)) for name, rank in PRIORITY_RANK.items()],
        default=Value(9),
        output_field=IntegerField(),
    )


def _queued(pool_id: int) -> QuerySet[TaskGroup]:
    """The pool's queued (SCHEDULING) gangs."""
    return TaskGroup.objects.filter(workflow__pool=pool_id, status=TaskStatus.SCHEDULING)


def pool_locked(pool_id: int) -> Pool | None:
    """The pool row, locked against key changes for the cycle's transaction (None: deleted), with its
    cycle state (:class:`~workflows.models.PoolCycleState`, joined in the same query: :func:`cycle_state_of`).
    Only the pool's row is locked: the state is written by the cycle alone, under the pool's lock."""
    return (Pool.objects.select_for_update(no_key=True, of=("self",)).select_related("cycle")
            .filter(pk=pool_id).order_by("pk").first())


def cycle_state_of(pool: Pool) -> dict[str, Any] | None:
    """The stored cycle state of a pool read by :func:`pool_locked` (None: it never walked)."""
    try:
        return pool.cycle.state
    except PoolCycleState.DoesNotExist:
        return None


def waiting_groups(pool_id: int) -> list[TaskGroup]:
    """The pool's WAITING groups (those whose upstream groups may have completed)."""
    return list(TaskGroup.objects.filter(workflow__pool=pool_id, status=TaskStatus.WAITING))


def _fingerprint_of(queued: Q | None = None) -> dict[str, Any]:
    """The aggregates of :func:`~workflows.scheduling.cycle.state.fingerprint` over the queued group
    ids (``queued``: which of the rows aggregated are queued), for one aggregate query."""
    return {"n": Count("pk", filter=queued), "s": Sum("pk", filter=queued), "q": Sum(F("pk") * F("pk"), filter=queued),
            "m": Max("pk", filter=queued)}


def _fingerprint(row: Mapping[str, Any]) -> list[int]:
    return [int(row[key] or 0) for key in ("n", "s", "q", "m")]


def queue_fingerprint(pool_id: int) -> list[int]:
    """Which gangs are queued (:func:`~workflows.scheduling.cycle.state.fingerprint`), in one aggregate
    query."""
    return _fingerprint(_queued(pool_id).aggregate(**_fingerprint_of()))


class QueueFacts(NamedTuple):
    """What one aggregate read says of the pool's SCHEDULING and WAITING groups (:func:`queue_facts`)."""

    fingerprint: list[int]  # :func:`queue_fingerprint`
    waiting: int  # how many groups are WAITING
    # Of the queued gangs whose workflow has a queue timeout: the earliest queued since, and the
    # shortest timeout. No gang is past its timeout unless ``now - since > timeout`` (each gang's wait
    # is at most now - the earliest, and its timeout at least the shortest).
    since: datetime | None
    timeout_s: int | None

    def timeouts_maybe_due(self, now: datetime) -> bool:
        return self.since is not None and self.timeout_s is not None and now - self.since > timedelta(
            seconds=self.timeout_s)


def queue_facts(pool_id: int) -> QueueFacts:
    """The queue's fingerprint, whether any group waits, and whether a queued gang may be past its
    queue timeout, in one query: a cycle that finds no WAITING group and no gang that may have timed
    out reads neither."""
    queued = Q(status=TaskStatus.SCHEDULING)
    timed = Q(status=TaskStatus.SCHEDULING, workflow__queue_timeout_s__isnull=False, scheduling_since__isnull=False)
    row = (TaskGroup.objects.filter(workflow__pool=pool_id, status__in=(TaskStatus.SCHEDULING, TaskStatus.WAITING))
           .aggregate(**_fingerprint_of(queued), waiting=Count("pk", filter=Q(status=TaskStatus.WAITING)),
                      since=Min("scheduling_since", filter=timed),
                      timeout_s=Min("workflow__queue_timeout_s", filter=timed)))
    return QueueFacts(_fingerprint(row), int(row["waiting"] or 0), row["since"], row["timeout_s"])


def queue_read(pool: Pool, now: datetime | None = None, *,
               usage: Mapping[int | None, float] | None = None) -> list[QueuedGang]:
    """The pool's SCHEDULING gangs in queue order: one query of small columns. With fair share on (the
    pool's ``fairshare_half_life``, docs/design.md §9), each team's recent usage: ``usage`` when given
    (a resumed walk keeps the order its first cycle saw), else one more query
    (:func:`scheduler.fairshare.usage.team_usage_by_id`, as seen at ``now``); within a priority the gangs of
    teams that used less come first, and their order key carries the team's place by usage between
    the rank and the submission time (the walk compares keys: a starving gang holds machines against
    the gangs after it in this order)."""
    rows = list(
        _queued(pool.pk)
        .annotate(rank=_priority_rank(), submitted_at=F("workflow__submitted_at"),
                  keys_version=F("workflow__pool_keys_version"), team_id=F("workflow__team_id"),
                  workflow_label=F("workflow__workflow_id"), exec_timeout_s=F("workflow__exec_timeout_s"))
        .order_by("rank", "workflow__submitted_at", "workflow_id", "position")
        .values("pk", "workflow_id", "name", "rank", "submitted_at", "position", "scheduling_since",
                "proof_epoch", "signature", "reason_code", "reason_digest", "idle_fit", "idle_fit_epoch",
                "keys_version", "team_id", "preemptions", "workflow_label", "exec_timeout_s"))
    place: dict[int | None, int] | None = None
    if pool.fairshare_half_life > 0 and rows:
        if usage is None:
            usage = team_usage_by_id(pool, now=now or timezone.now())
        rows = fair_order(rows, rank=lambda row: row["rank"], team=lambda row: row["team_id"], usage=usage)
        teams = {row["team_id"]: usage.get(row["team_id"], 0.0) for row in rows}
        level = {value: i for i, value in enumerate(sorted(set(teams.values())))}
        place = {team: level[value] for team, value in teams.items()}

    def order(row: dict[str, Any]) -> list[Any]:
        submitted = [row["submitted_at"].isoformat(), row["workflow_id"], row["position"]]
        return [row["rank"], *submitted] if place is None else [row["rank"], place[row["team_id"]], *submitted]

    return [
        QueuedGang(
            pk=row["pk"], workflow_id=row["workflow_id"], name=row["name"], rank=row["rank"], order=order(row),
            scheduling_since=row["scheduling_since"], proof_epoch=row["proof_epoch"], signature=row["signature"],
            reason_code=row["reason_code"], reason_digest=row["reason_digest"], idle_fit=row["idle_fit"],
            idle_fit_epoch=row["idle_fit_epoch"], keys_version=row["keys_version"], team_id=row["team_id"],
            preemptions=row["preemptions"], workflow_label=row["workflow_label"],
            exec_timeout_s=row["exec_timeout_s"],
        )
        for row in rows
    ]


class TimeoutCandidate(NamedTuple):
    """A queued gang whose workflow has a queue timeout."""

    pk: int
    workflow_id: int
    scheduling_since: datetime
    queue_timeout_s: int


def timeout_candidates(pool_id: int) -> list[TimeoutCandidate]:
    """The queued gangs that may have waited past their workflow's queue timeout (one query)."""
    rows = (_queued(pool_id).filter(workflow__queue_timeout_s__isnull=False, scheduling_since__isnull=False)
            .order_by("pk").values_list("pk", "workflow_id", "scheduling_since", "workflow__queue_timeout_s"))
    return [TimeoutCandidate._make(row) for row in rows]


def running_low_read(pool_id: int, min_runtime: int = 0) -> list[RunningGang]:
    """Running LOW gangs of the pool none of whose tasks finished, in start order, with what they hold
    (one query when no LOW work holds capacity in the pool, the common case; three otherwise). A gang
    with a finished member is nearly done: restarting it would run finished work again. Each says
    when it may be preempted: its start plus the pool's ``min_runtime`` seconds (docs/design.md §9)."""
    # What LOW work holds: reservations carry whether their work is preemptible (copied at placement).
    held = list(Reservation.objects.filter(pool=pool_id, released_at__isnull=True, preemptible=True)
                .values("task_id", "node__name", *AMOUNT_FIELDS))
    if not held:
        return []
    groups = list(
        TaskGroup.objects.filter(workflow__pool=pool_id, workflow__priority=Priority.LOW,
                                 status__in=TASK_ACTIVE_STATUSES)
        .annotate(finished=Count("tasks", filter=Q(tasks__status__in=TASK_TERMINAL_STATUSES)))
        .filter(finished=0)
        .order_by("started_at", "placed_at", "pk")
        .values("pk", "workflow_id", "workflow__team_id", "started_at", "placed_at")
    )
    if not groups:
        return []
    # Reservations name their task by id only (the scheduler app keeps no relation into workflows).
    group_of = dict(Task.objects.filter(pk__in=[row["task_id"] for row in held], group_id__in=[g["pk"] for g in groups])
                    .values_list("pk", "group_id"))
    holdings: dict[int, list[tuple[str, Resources]]] = {}
    # By node name, as the database orders them (a deleted node's, None, last).
    for row in sorted(held, key=lambda row: (row["node__name"] is None, row["node__name"] or "")):
        if row["task_id"] in group_of:
            holdings.setdefault(group_of[row["task_id"]], []).append(
                (row["node__name"], Resources(*(row[name] for name in AMOUNT_FIELDS))))
    running: list[RunningGang] = []
    for g in groups:
        held_here = holdings.get(g["pk"])
        if not held_here:
            continue
        since = g["started_at"] or g["placed_at"]
        began = since.timestamp() if since is not None else 0.0
        running.append(RunningGang(g["pk"], g["workflow_id"], g["workflow__team_id"], Candidate(
            key=str(g["pk"]), holdings=tuple(held_here), borrowing=False, started=began),
            preemptible_at=began + min_runtime if min_runtime > 0 else 0.0))
    return running


def holders_read(pool_id: int, now: float) -> list[Holder]:
    """The pool's gangs that hold capacity (any priority, placed or running), each with what it holds
    and when it is expected to end: its start (or placement, before it starts) plus its workflow's
    ``exec_timeout``, else as long again as it has run (:func:`scheduler.hold.expected_end`).
    Two queries whatever the number of gangs (the active reservations; their tasks' gangs), read only
    when a gang starves (docs/design.md §6)."""
    held = list(Reservation.objects.filter(pool=pool_id, released_at__isnull=True)
                .values_list("task_id", "node__name", *AMOUNT_FIELDS))
    if not held:
        return []
    # Reservations name their task by id only (the scheduler app keeps no relation into workflows).
    facts = {pk: (group_id, since_started, since_placed, limit) for pk, group_id, since_started, since_placed, limit
             in Task.objects.filter(pk__in=[row[0] for row in held])
             .values_list("pk", "group_id", "group__started_at", "group__placed_at", "workflow__exec_timeout_s")}
    holdings: dict[int, list[tuple[str, Resources]]] = {}
    since: dict[int, tuple[float, int | None]] = {}
    for task_id, node, gpu, cpu, memory, storage in held:
        fact = facts.get(task_id)
        if fact is None or node is None:
            continue
        group_id, started_at, placed_at, limit = fact
        holdings.setdefault(group_id, []).append((node, Resources(gpu, cpu, memory, storage)))
        at = started_at or placed_at
        since[group_id] = (at.timestamp() if at is not None else now, limit)
    out = []
    for group_id in sorted(holdings):
        began, limit = since[group_id]
        ends, bounded = expected_end(began, now, limit)
        out.append(Holder(str(group_id), tuple(sorted(holdings[group_id], key=lambda h: h[0])), ends, bounded))
    return out


def platform_exclusions(pool_id: int) -> dict[str, PlatformNodes]:
    """The pool's platforms that select nodes, by name: one query, two when some platform selects."""
    selectors = {name: {str(k): str(v) for k, v in (selector or {}).items()}
                 for name, selector in PoolPlatform.objects.filter(pool=pool_id).values_list("name", "node_selector")
                 if selector}
    if not selectors:
        return {}
    nodes = list(Node.objects.filter(pool=pool_id).values_list("name", "labels"))
    found = {}
    for name, selector in selectors.items():
        lacking = frozenset(node for node, labels in nodes
                            if any((labels or {}).get(key) != value for key, value in selector.items()))
        found[name] = PlatformNodes(selector, lacking, len(nodes) - len(lacking), len(nodes))
    return found



class DatabaseSource:
    """What the walk reads on demand, from the database (see
    :class:`~workflows.scheduling.cycle.values.GangSource`)."""

    def __init__(self, pool: Pool, key_labels: list[tuple[str, str]]) -> None:
        self.pool, self.key_labels = pool, key_labels
        self._platforms: Mapping[str, PlatformNodes] | None = None

    def gang_rows(self, pks: Sequence[int]) -> Mapping[int, GangRow]:
        # As JSON text, decoded when a gang is solved (:meth:`GangRow.from_json`).
        return {row["pk"]: GangRow.from_json(row["tree_json"], row["requests_json"])
                for row in TaskGroup.objects.filter(pk__in=list(pks))
                .annotate(tree_json=Cast("constraint_tree", TextField()),
                          requests_json=Cast("task_requests", TextField()))
                .values("pk", "tree_json", "requests_json")}

    def pool_keys(self, workflow_id: int) -> list[list[str]]:
        keys: list[list[str]] = Workflow.objects.filter(pk=workflow_id).values_list("pool_keys", flat=True).get()
        return keys or []

    def snapshot(self) -> tuple[ClusterSnapshot, dict[str, int]]:
        return snapshot_load_with_ids(self.pool, key_labels=self.key_labels)

    def platforms(self) -> Mapping[str, PlatformNodes]:
        if self._platforms is None:  # once per cycle, and only when some gang is solved
            self._platforms = platform_exclusions(self.pool.pk)
        return self._platforms

    def idle_snapshot(self) -> ClusterSnapshot:
        return snapshot_empty(self.pool, key_labels=self.key_labels)

    def running_low(self) -> list[RunningGang]:
        return running_low_read(self.pool.pk, self.pool.min_runtime)

    def holders(self, now: float) -> list[Holder]:
        return holders_read(self.pool.pk, now)
