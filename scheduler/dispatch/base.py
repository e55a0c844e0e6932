"""The dispatch backend interface. A backend turns placed tasks into pods and reads their phases back.

Backends are chosen per pool (``Pool.backend``). Every call is idempotent: creating a pod that
already exists is success, deleting one that is gone is success. Arguments are plain values
(:class:`~scheduler.dispatch.pod.request.PodRequest`), never model instances, so backends are testable
without a database.
"""

from __future__ import annotations

import socket
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol

from scheduler.dispatch.pod.request import PodRequest

PodPhase = Literal["Pending", "Running", "Succeeded", "Failed", "Unknown", "Missing"]


class DispatchTransientError(Exception):
    """A retryable backend failure (connection refused, 5xx, 429). Celery retries with backoff."""


class DispatchPermanentError(Exception):
    """A failure retrying cannot fix (invalid manifest, forbidden): the task fails FAILED_BACKEND_ERROR."""


class DispatchForbiddenError(DispatchPermanentError):
    """The cluster refused the credentials (401/403): the backend's status says which verb on which resource."""


# Why a pod is not running, when the cluster says so (``PodState.cause``; docs/kubernetes.md §10). The
# service settles these before a task's exit actions: they are the infrastructure's doing, not the task's.
CAUSE_UNSCHEDULABLE = "unschedulable"  # Pending: the cluster's scheduler refuses to bind it (its node is full)
CAUSE_DISRUPTED = "disrupted"  # the pod carries the DisruptionTarget condition (node lost, drain, taint)
CAUSE_EVICTED = "evicted"  # the kubelet evicted it (status.reason Evicted: node pressure)
CAUSE_NODE_LOST = "node_lost"  # gone from the cluster together with its node (NotReady or deleted)
CAUSE_IMAGE_PULL = "image_pull"  # its image could not be pulled within the pending timeout
CAUSE_START_ERROR = "start_error"  # its container could not be created or started
POD_CAUSES = (CAUSE_UNSCHEDULABLE, CAUSE_DISRUPTED, CAUSE_EVICTED, CAUSE_NODE_LOST, CAUSE_IMAGE_PULL,
              CAUSE_START_ERROR)


@dataclass(frozen=True, slots=True)
class PodState:
    phase: PodPhase
    exit_code: int | None = None
    message: str = ""
    live: bool = False  # "Failed" by the service's verdict while the pod itself may still start: delete it now
    cause: str = ""  # one of POD_CAUSES when the cluster said why (empty: the pod's own doing, or unknown)
    since: datetime | None = None  # CAUSE_UNSCHEDULABLE: when the cluster first refused it


@dataclass(frozen=True, slots=True)
class ListedPod:
    """A pod of the service as the backend lists it (for reconciling against the database)."""

    name: str
    phase: str  # the backend's own phase: Pending, Running, Succeeded, Failed, Unknown
    node: str | None = None
    terminating: bool = False  # being deleted already (it lists with its phase until its grace ends)

    @property
    def finished(self) -> bool:
        """Terminated: it holds no capacity any more (kept only for its logs)."""
        return self.phase in ("Succeeded", "Failed")


#: What one log answer may read from a backend, whatever the number of lines asked for: a log can be
#: gigabytes, and a web process reads it into memory.
LOG_READ_MAX_BYTES = 64 << 20


@dataclass(frozen=True, slots=True)
class PodLog:
    """The last lines of a pod's task container log."""

    lines: tuple[str, ...]
    truncated: bool = False  # the log has more lines before these


@dataclass(frozen=True, slots=True)
class PodEvent:
    """Something the backend saw happen to a pod (a Kubernetes event, a container state reason)."""

    time: datetime
    pod_name: str  # the request's pod name (as in PodRequest), not the backend's sanitised one
    kind: str  # the backend's reason: Scheduled, Pulling, OOMKilled, ImagePullBackOff, ...
    message: str


class PodBackend(Protocol):
    """What a dispatch backend does (the pool's `backend` choice, `scheduler.choices.DispatchBackend`, names
    which implementation)."""

    name: str

    def create_pod(self, pod: PodRequest) -> None:
        """Create the pod (idempotent: AlreadyExists is success)."""

    def delete_pod(self, *, namespace: str, pod_name: str, grace_seconds: int | None = None) -> None:
        """Delete the pod (idempotent: NotFound is success); ``grace_seconds`` overrides the pod's own
        termination grace period (preemption)."""

    def gang_finished_pods_delete(self, *, namespace: str, pool: str, workflow_id: str, group: str) -> None:
        """Delete every finished (Succeeded or Failed) pod of one gang in one call; pods still pending or
        running are never touched by it."""

    def pod_states(self, pods: Iterable[PodRequest], *, now: datetime) -> dict[str, PodState]:
        """Current state of each given pod, keyed by pod name ("Missing" when the backend has none)."""

    def pods_list(self, *, namespace: str, pool: str) -> list[ListedPod]:
        """Every pod this service created for the pool in the namespace (a constant number of paginated
        calls); a backend without real pods lists none."""

    def pods_observe(self, pods: Iterable[PodRequest], *, namespace: str, pool: str, now: datetime
                     ) -> tuple[list[ListedPod], dict[str, PodState]]:
        """:meth:`pods_list` and :meth:`pod_states` (of ``pods``, all of this namespace and pool) from
        one listing: what a pool's status sync needs."""

    def pod_log(self, pod: PodRequest, *, tail: int, now: datetime) -> PodLog:
        """The last ``tail`` lines of the pod's task container log. Raises
        :class:`DispatchTransientError` when the backend cannot be reached and
        :class:`DispatchPermanentError` when it has no log for the pod (gone, not started)."""

    def pod_events(self, pods: Iterable[PodRequest], *, now: datetime) -> list[PodEvent]:
        """What the backend saw happen to these pods, in no particular order (raises like ``pod_log``)."""


# -- sessions into a running task (``osmo workflow exec`` and ``port-forward``; docs/design.md §13) ----------
class SessionUnsupportedError(DispatchPermanentError):
    """The pool's backend opens no sessions into its tasks (the simulated backend runs no process)."""

    def __init__(self, backend: str, why: str) -> None:
        self.backend = backend
        self.why = why
        super().__init__(f"the {backend} backend does not support exec or port-forward: {why}")


class TaskExec(Protocol):
    """A command started in a running task. Blocking calls, each safe from its own thread: the session
    code reads in one thread and writes, resizes and closes from another."""

    tty: bool

    def read(self) -> tuple[int, bytes]:
        """The next output: ``(1, data)`` stdout (a terminal's output, with ``tty``), ``(2, data)`` stderr;
        ``(0, b"")`` once every output ended."""

    def write(self, data: bytes) -> None:
        """Send ``data`` to the command's stdin (its terminal, with ``tty``)."""

    def close_stdin(self) -> None:
        """End the command's input (end of file; with ``tty``, the terminal's EOF character)."""

    def resize(self, width: int, height: int) -> None:
        """Set the terminal's size (``tty`` only; the command gets SIGWINCH)."""

    def wait(self, timeout: float | None = None) -> int | None:
        """The command's exit code (128 + the signal that ended it), or None if it still runs after ``timeout``."""

    def close(self) -> None:
        """End the command and everything it started, and free what the session held (idempotent)."""


class SessionBackend(Protocol):
    """What a backend does for sessions into its running tasks; every refusal is a
    :class:`DispatchPermanentError` whose text the user sees (:class:`SessionUnsupportedError` when
    the backend has no sessions at all)."""

    name: str

    def exec_start(self, *, namespace: str, pod_name: str, argv: Sequence[str], tty: bool = False) -> TaskExec:
        """Start ``argv`` in the running task, as the task's user and confined as the task is."""

    def task_ports(self, *, namespace: str, pod_name: str) -> dict[int, str]:
        """The TCP ports the running task itself listens on."""

    def port_connect(self, *, namespace: str, pod_name: str, port: int, timeout: float = 10.0) -> socket.socket:
        """A TCP connection to a port the running task listens on (refused for any other port)."""
