"""Prometheus event metrics: the counters and histograms that processes record (docs/operations.md,
"Metrics"; docs/design.md §10). The scrape itself (``/metrics``, and the gauges read from the
database) is :mod:`ops.metrics`, in the ops app, which may read both apps; this module is imported by
the task modules that record, so it reads no app at import.

The web process answers the scrape, but much of the work happens in Celery worker processes
(often other containers), so the metrics come from two places:

- **State, from the database at scrape time** (:class:`ops.metrics.DatabaseCollector`): queue depth per pool and
  priority, tasks by status, GPUs per pool, the age of the scheduler's heartbeats. Always exact, and
  correct whichever process did the work or whether it is still alive.
- **Events, observed where they happen** (placement cycles and pod dispatches in workers):
  prometheus_client's multiprocess mode. Every process writes its counters and histograms to
  memory-mapped files in ``OSMO_METRICS_DIR``; the scrape sums the files of every process. Web and
  workers must therefore share that directory (compose: the ``/data`` volume; ``make run``: ``var/``).
  Files are named by host and process id, so containers sharing a volume never write the same file;
  counters of processes that exited stay in the sum, as Prometheus expects of a counter.

Recording: :func:`cycle_observe` (called by the placement-cycle task), :func:`gang_dispatch_observe`
(called by the dispatch tasks) and Celery signal handlers for every task's CPU and the dispatch
tasks' retries and failures (connected when a worker imports this module: ``CELERY_IMPORTS``).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any

from celery.signals import task_failure, task_postrun, task_prerun, task_retry
from prometheus_client import Counter, Histogram, values

from osmo import config as osmo_config
from workflows.jobs import GROUP_DISPATCH, GROUPS_DISPATCH, POD_DELETE  # the dispatch tasks' names

logger = logging.getLogger(__name__)

# ------------------------------------------------------------------------------------------------
# Multiprocess mode: set up before any metric below is created
# ------------------------------------------------------------------------------------------------
_HOST = socket.gethostname().replace("_", "-")


def _process_identifier() -> str:
    # prometheus_client names its files "<type>_<identifier>.db" and splits on "_": no "_" in here.
    return f"{_HOST}-{os.getpid()}"


def metrics_dir() -> str:
    directory = str(osmo_config.observability().metrics_dir)
    os.makedirs(directory, exist_ok=True)
    return directory


os.environ["PROMETHEUS_MULTIPROC_DIR"] = metrics_dir()
# What prometheus_client does itself when PROMETHEUS_MULTIPROC_DIR is set before it is imported, with
# the host in the file names (process ids repeat across containers that share the directory).
_MultiProcessValue = values.MultiProcessValue(process_identifier=_process_identifier)

#: A value is written to the shared directory only while it has this much room. prometheus_client's
#: files are sparse and memory-mapped: a page it first touches on a full volume kills the process with
#: SIGBUS, which no exception handler sees. Files start at 64 KiB and double when full, so this margin
#: covers any one growth of a process's files but the largest.
METRICS_MIN_FREE_BYTES = 16 << 20
_unusable_said = False


def _metrics_dir_problem() -> str | None:
    """Why the metrics directory cannot take a new value now (read-only, nearly full), or None."""
    directory = os.environ["PROMETHEUS_MULTIPROC_DIR"]
    try:
        stats = os.statvfs(directory)
    except OSError as error:
        return f"{error.__class__.__name__}: {error}"
    if stats.f_flag & os.ST_RDONLY:
        return f"OSError: [Errno 30] Read-only file system: {directory!r}"
    free = stats.f_bavail * stats.f_frsize
    if free < METRICS_MIN_FREE_BYTES:
        return f"OSError: [Errno 28] No space left on device: {directory!r} has {free} bytes free"
    return None


def _value(*args: Any, **kwargs: Any) -> Any:
    """The value of one metric child: in the shared directory, or, when the directory cannot take it
    (full, read-only, unwritable), in this process's memory only, so recording never fails the work
    that records (its events are then missing from the scrape; ``metrics.dir_unusable`` says so once
    per process)."""
    global _unusable_said
    problem = _metrics_dir_problem()
    if problem is None:
        try:
            return _MultiProcessValue(*args, **kwargs)
        except OSError as error:
            problem = f"{error.__class__.__name__}: {error}"
    if not _unusable_said:
        _unusable_said = True
        logger.error("metrics.dir_unusable", extra={"reason": problem})
    return values.MutexValue(*args, **kwargs)


values.ValueClass = _value

# ------------------------------------------------------------------------------------------------
# Event metrics (observed in worker processes)
# ------------------------------------------------------------------------------------------------
CYCLE_SECONDS = Histogram(
    "osmo_placement_cycle_duration_seconds",
    "Duration of placement cycles that held their pool's lock.",
    ["pool"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60),
)
CYCLE_GANGS = Counter(
    "osmo_placement_gangs",
    "Gangs decided by placement cycles, by outcome: placed; unschedulable (proven not to fit now); undecided "
    "(the solver's budget ran out); waiting (held behind an older gang that does not fit yet); queue_timeout. "
    "A gang that stays queued is counted again by every cycle that tries it.",
    ["pool", "outcome"],
)
SUBMIT_TO_DISPATCHED_SECONDS = Histogram(
    "osmo_submit_to_dispatched_seconds",
    "From a gang becoming ready to place (its workflow's submission, or its upstream groups' completion) "
    "to its last pod created.",
    ["pool"],
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600),
)
DISPATCH_ERRORS = Counter(
    "osmo_dispatch_errors",
    "Errors of the dispatch tasks (pod creation and deletion), by kind: retry (a transient backend error, "
    "retried with backoff); failed (the task gave up or crashed); permanent (the backend refused a gang's "
    "pods: the gang failed with FAILED_BACKEND_ERROR).",
    ["task", "kind"],
)

TASK_CPU_SECONDS = Counter(
    "osmo_worker_task_cpu_seconds",
    "CPU time (user + system, of the thread that ran it) spent by Celery tasks, by task name; the count of "
    "runs is osmo_worker_tasks_total.",
    ["task"],
)
TASK_RUNS = Counter("osmo_worker_tasks", "Celery task runs that finished (any state), by task name.", ["task"])

K8S_SYNC_SECONDS = Histogram(
    "osmo_k8s_sync_duration_seconds",
    "Duration of periodic Kubernetes syncs of a pool (nodes and other pods listed, rows written).",
    ["pool"],
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120),
)
K8S_SYNC_CHANGES = Counter(
    "osmo_k8s_sync_changes",
    "Node rows a Kubernetes sync changed, by kind: created; updated (labels, capacity, readiness, taints or "
    "foreign usage); cordoned (no longer listed).",
    ["pool", "kind"],
)
K8S_FOREIGN_PODS = Counter(
    "osmo_k8s_sync_foreign_pods",
    "Pods not created by this service found on a pool's nodes by Kubernetes syncs (counted per sync).",
    ["pool"],
)
K8S_SYNC_ERRORS = Counter("osmo_k8s_sync_errors", "Kubernetes syncs of a pool that failed.", ["pool"])
# Sessions into running tasks (workflows.sessions), observed in the web process that carried them.
TASK_SESSIONS = Counter(
    "osmo_task_sessions",
    "Sessions into running tasks (osmo workflow exec, port-forward) that ended, by kind and how they ended: "
    "exited (exec: the command ended), closed (either side closed), idle, max_length, task_ended, error.",
    ["kind", "end"],
)
TASK_SESSION_BYTES = Counter(
    "osmo_task_session_bytes",
    "Bytes carried by sessions into running tasks, by kind and direction (in: to the task, out: from it).",
    ["kind", "direction"],
)
TASK_SESSION_SECONDS = Histogram(
    "osmo_task_session_duration_seconds",
    "How long sessions into running tasks lasted, by kind.",
    ["kind"],
    buckets=(0.1, 1, 10, 60, 300, 1800, 3600, 4 * 3600, 12 * 3600),
)
BROWSER_SESSIONS = Counter(
    "osmo_browser_sessions",
    "Of osmo_task_sessions, those the web pages opened: the task page's terminal (exec) and each request or "
    "websocket of its \"Open port\" proxy (port-forward), by kind.",
    ["kind"],
)


def task_session_observe(kind: str, end: str, *, bytes_in: int, bytes_out: int, seconds: float,
                         browser: bool = False) -> None:
    if browser:
        BROWSER_SESSIONS.labels(kind=kind).inc()
    TASK_SESSIONS.labels(kind=kind, end=end).inc()
    TASK_SESSION_BYTES.labels(kind=kind, direction="in").inc(bytes_in)
    TASK_SESSION_BYTES.labels(kind=kind, direction="out").inc(bytes_out)
    TASK_SESSION_SECONDS.labels(kind=kind).observe(seconds)
K8S_REQUEUES = Counter(
    "osmo_k8s_requeues",
    "Gangs whose pod the cluster refused to schedule for OSMO_K8S_UNSCHEDULABLE_SECONDS, by outcome: requeued "
    "(queued again), failed (past OSMO_K8S_UNSCHEDULABLE_REQUEUES).",
    ["pool", "outcome"],
)
K8S_RESCHEDULES = Counter(
    "osmo_k8s_reschedules",
    "Gangs that lost a pod to the infrastructure, by cause (disrupted, evicted, node_lost) and outcome: rescheduled, "
    "failed (past the pool's max_retries).",
    ["pool", "cause", "outcome"],
)

OUTCOMES = ("placed", "unschedulable", "undecided", "waiting", "queue_timeout")


def cycle_observe(*, pool: str, seconds: float, placed: int = 0, unschedulable: int = 0, undecided: int = 0,
                  waiting: int = 0, queue_timeout: int = 0) -> None:
    """Record one placement cycle of ``pool``: its duration and how many gangs got each outcome."""
    CYCLE_SECONDS.labels(pool=pool).observe(seconds)
    counts = {"placed": placed, "unschedulable": unschedulable, "undecided": undecided, "waiting": waiting,
              "queue_timeout": queue_timeout}
    for outcome, count in counts.items():
        if count:
            CYCLE_GANGS.labels(pool=pool, outcome=outcome).inc(count)


def k8s_sync_observe(*, pool: str, seconds: float, created: int = 0, updated: int = 0, cordoned: int = 0,
                     foreign_pods: int = 0) -> None:
    """Record one Kubernetes sync of ``pool``: its duration, the node rows it changed, the foreign pods."""
    K8S_SYNC_SECONDS.labels(pool=pool).observe(seconds)
    for kind, count in (("created", created), ("updated", updated), ("cordoned", cordoned)):
        if count:
            K8S_SYNC_CHANGES.labels(pool=pool, kind=kind).inc(count)
    if foreign_pods:
        K8S_FOREIGN_PODS.labels(pool=pool).inc(foreign_pods)


def k8s_sync_failed(*, pool: str) -> None:
    """Record a Kubernetes sync of ``pool`` that failed (the cluster unreachable or refusing)."""
    K8S_SYNC_ERRORS.labels(pool=pool).inc()


def cluster_verdicts_observe(*, pool: str, requeued: int = 0, requeue_failed: int = 0,
                             rescheduled: Mapping[str, int] | None = None,
                             reschedule_failed: Mapping[str, int] | None = None) -> None:
    """Record what a pod sync of ``pool`` did about pods the cluster refused (requeued, failed) and pods
    it lost (rescheduled, failed; by cause)."""
    for outcome, count in (("requeued", requeued), ("failed", requeue_failed)):
        if count:
            K8S_REQUEUES.labels(pool=pool, outcome=outcome).inc(count)
    for outcome, by_cause in (("rescheduled", rescheduled or {}), ("failed", reschedule_failed or {})):
        for cause, count in by_cause.items():
            if count:
                K8S_RESCHEDULES.labels(pool=pool, cause=cause, outcome=outcome).inc(count)


def cycle_result_observe(result: Any, *, seconds: float) -> None:
    """:func:`cycle_observe` for a placement cycle's ``CycleResult``. Its ``unschedulable`` list mixes
    every gang not placed; the reason each one just stored tells them apart (one query, only when there
    are such gangs)."""
    if not result.pool:
        return
    not_placed: dict[str, int] = {}
    if result.unschedulable:
        from django.db.models import Count

        from workflows.models import TaskGroup

        for status, count in (
            TaskGroup.objects.filter(pk__in=result.unschedulable)
            .values_list("unschedulable_reason__status")
            .annotate(count=Count("pk"))
            .order_by()
        ):
            outcome = status if status in ("undecided", "waiting") else "unschedulable"
            not_placed[outcome] = not_placed.get(outcome, 0) + count
    cycle_observe(pool=result.pool, seconds=seconds, placed=len(result.placed),
                  unschedulable=not_placed.get("unschedulable", 0), undecided=not_placed.get("undecided", 0),
                  waiting=not_placed.get("waiting", 0), queue_timeout=len(result.timed_out))


# ------------------------------------------------------------------------------------------------
# Dispatch: Celery signals in the worker process that ran the task
# ------------------------------------------------------------------------------------------------
DISPATCH_TASKS = frozenset({GROUP_DISPATCH, GROUPS_DISPATCH, POD_DELETE})
_cpu_lock = threading.Lock()
_cpu_started: dict[str, float] = {}  # task id -> thread CPU time when it started


@task_prerun.connect(dispatch_uid="osmo.metrics.prerun")
def _on_task_prerun(sender: Any = None, task_id: str | None = None, **_: Any) -> None:
    if task_id:
        with _cpu_lock:
            _cpu_started[task_id] = time.thread_time()


@task_postrun.connect(dispatch_uid="osmo.metrics.postrun")
def _on_task_postrun(sender: Any = None, task_id: str | None = None, **_: Any) -> None:
    name = getattr(sender, "name", None)
    if task_id and name:
        with _cpu_lock:
            cpu_started = _cpu_started.pop(task_id, None)
        if cpu_started is not None:
            TASK_CPU_SECONDS.labels(task=name).inc(max(0.0, time.thread_time() - cpu_started))
            TASK_RUNS.labels(task=name).inc()


@task_retry.connect(dispatch_uid="osmo.metrics.retry")
def _on_task_retry(sender: Any = None, **_: Any) -> None:
    name = getattr(sender, "name", None)
    if name in DISPATCH_TASKS:
        DISPATCH_ERRORS.labels(task=name, kind="retry").inc()


@task_failure.connect(dispatch_uid="osmo.metrics.failure")
def _on_task_failure(sender: Any = None, **_: Any) -> None:
    name = getattr(sender, "name", None)
    if name in DISPATCH_TASKS:
        DISPATCH_ERRORS.labels(task=name, kind="failed").inc()


def dispatch_handed_over() -> None:
    """A gang of a ``workflows.groups_dispatch`` batch met a transient error and went on in its own
    ``workflows.group_dispatch`` message (which retries with backoff): a retry of the batch task."""
    DISPATCH_ERRORS.labels(task=GROUPS_DISPATCH, kind="retry").inc()


def gang_dispatch_observe(outcome: Any, *, task: str = GROUP_DISPATCH) -> None:
    """After a dispatch run of a gang (``outcome``: ``workflows.scheduling.gang_dispatch.gang_dispatch``'s
    ``GangDispatch``, or None when it had nothing to do): if the
    run recorded the gang's last pod, observe the gang's latency; if the backend refused the gang,
    count a permanent dispatch error. A re-dispatch of a gang that was complete already observes
    nothing. No query: the run knows both."""
    if outcome is None:
        return
    if outcome.refused:
        DISPATCH_ERRORS.labels(task=task, kind="permanent").inc()
    elif outcome.ready_to_dispatched is not None:
        SUBMIT_TO_DISPATCHED_SECONDS.labels(pool=outcome.pool).observe(
            max(0.0, outcome.ready_to_dispatched.total_seconds()))


# Workflows submitted, by the label dimensions of the admin's label policy (workflows.labels): each key a
# bounded allow-list of values (any other value is "other", an unset one ""), never the free-form label.
WORKFLOW_LABEL_SUBMISSIONS = Counter(
    "osmo_workflow_label_submissions",
    "Workflows submitted, per metric dimension of the label policy: pool, label key, its value when "
    'allow-listed ("other" when not, "" when unset).',
    ["pool", "label", "value"],
)


def workflow_label_observe(*, pool: str, dimensions: Iterable[tuple[str, str]]) -> None:
    for key, value in dimensions:
        WORKFLOW_LABEL_SUBMISSIONS.labels(pool=pool, label=key, value=value).inc()
