"""The simulated backend (the default): no process runs. A pod's phase is a function of the time
since it was dispatched, so the whole lifecycle can be exercised on a laptop:

    Pending  for min(0.5 s, run/4) after dispatch
    Running  for ``sim_seconds`` (pool default, or the task's ``OSMO_SIM_SECONDS`` environment entry)
    then Succeeded, or Failed with the task's ``OSMO_SIM_EXIT_CODE`` when that is non-zero.

Stateless on purpose: the task row's ``dispatched_at`` is the pod, so a restarted worker sees the
same phases and create/delete are trivially idempotent. Its log shows the command, the host name and
the files as dispatch rendered them (OSMO's tokens resolved), then progress lines.
"""

from __future__ import annotations

import shlex
import socket
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta

from scheduler.dispatch.base import (
    DispatchPermanentError,
    ListedPod,
    PodEvent,
    PodLog,
    PodState,
    SessionUnsupportedError,
    TaskExec,
)
from scheduler.dispatch.pod.request import PodRequest

SIM_SECONDS_ENV = "OSMO_SIM_SECONDS"
SIM_EXIT_CODE_ENV = "OSMO_SIM_EXIT_CODE"
SIM_PROGRESS_LINES = 10  # a finished simulated task logged this many progress lines


SIM_FILE_LINES = 12  # the lines of each of a task's files the log shows


def _pod_objects(pod: PodRequest) -> list[str]:
    """What the pod would be given beside its command, as dispatch rendered it (tokens resolved): its
    host name in its group's headless Service, and its files (at most ``SIM_FILE_LINES`` lines each)."""
    lines = []
    if pod.hostname and pod.subdomain:
        lines.append(f"host name {pod.hostname}.{pod.subdomain}.{pod.namespace}.svc "
                     f"(headless Service {pod.subdomain})")
    for path, contents in pod.files:
        text = contents.splitlines()
        lines.append(f"file {path} ({len(text)} lines)")
        lines += [f"  {line}" for line in text[:SIM_FILE_LINES]]
        if len(text) > SIM_FILE_LINES:
            lines.append(f"  ... {len(text) - SIM_FILE_LINES} more lines")
    return lines


def sim_exit_code(pod: PodRequest) -> int:
    try:
        return int(pod.environment.get(SIM_EXIT_CODE_ENV, "0"))
    except ValueError:
        return 1


class SimulatedBackend:
    name = "simulated"

    # -- sessions (scheduler.dispatch.base.SessionBackend): a simulated pod runs no process to enter
    def exec_start(self, *, namespace: str, pod_name: str, argv: Sequence[str], tty: bool = False) -> TaskExec:
        raise SessionUnsupportedError(self.name, "its tasks are simulated and run no process")

    def task_ports(self, *, namespace: str, pod_name: str) -> dict[int, str]:
        raise SessionUnsupportedError(self.name, "its tasks are simulated and run no process")

    def port_connect(self, *, namespace: str, pod_name: str, port: int, timeout: float = 10.0) -> socket.socket:
        raise SessionUnsupportedError(self.name, "its tasks are simulated and run no process")

    def create_pod(self, pod: PodRequest) -> None:
        return None

    def delete_pod(self, *, namespace: str, pod_name: str, grace_seconds: int | None = None) -> None:
        return None

    def gang_finished_pods_delete(self, *, namespace: str, pool: str, workflow_id: str, group: str) -> None:
        return None

    def pods_list(self, *, namespace: str, pool: str) -> list[ListedPod]:
        return []  # the task rows are the pods: nothing can be orphaned

    def pods_observe(self, pods: Iterable[PodRequest], *, namespace: str, pool: str, now: datetime
                     ) -> tuple[list[ListedPod], dict[str, PodState]]:
        return self.pods_list(namespace=namespace, pool=pool), self.pod_states(pods, now=now)

    def pod_states(self, pods: Iterable[PodRequest], *, now: datetime) -> dict[str, PodState]:
        states: dict[str, PodState] = {}
        for pod in pods:
            if pod.dispatched_at is None:
                states[pod.pod_name] = PodState("Missing")
                continue
            elapsed = (now - pod.dispatched_at).total_seconds()
            pending = min(0.5, pod.sim_seconds / 4)
            if elapsed < pending:
                states[pod.pod_name] = PodState("Pending")
            elif elapsed < pending + pod.sim_seconds:
                states[pod.pod_name] = PodState("Running")
            else:
                code = sim_exit_code(pod)
                if code:
                    states[pod.pod_name] = PodState("Failed", code, f"simulated exit code {code}")
                else:
                    states[pod.pod_name] = PodState("Succeeded", 0)
        return states

    def pod_log(self, pod: PodRequest, *, tail: int, now: datetime) -> PodLog:
        """A log made up from the task and the time, as a real pod would have written it so far: a start
        line once it runs, one progress line per tenth of its run time, a finish line with the exit code.
        Deterministic: the same task at the same moment always shows the same log."""
        if pod.dispatched_at is None:
            raise DispatchPermanentError(f"pod {pod.pod_name} was never created")
        started, finished = self.next_change_in(pod)
        elapsed = (now - pod.dispatched_at).total_seconds()
        if elapsed < started:
            raise DispatchPermanentError(f'container "task" in pod {pod.pod_name} is waiting to start: '
                                         "ContainerCreating")
        run = pod.sim_seconds

        def stamp(offset: float) -> str:
            assert pod.dispatched_at is not None
            return (pod.dispatched_at + timedelta(seconds=offset)).isoformat().replace("+00:00", "Z")

        command = shlex.join([*pod.command, *pod.args]) or "(image entrypoint)"
        shown = pod.workflow_label or pod.workflow_id
        lines = [f"{stamp(started)} [osmo-sim] task {pod.task} of {shown} started on {pod.node_name} "
                 f"({pod.gpu} GPU): {pod.image} {command}"]
        lines += [f"{stamp(started)} [osmo-sim] task {pod.task}: {line}" for line in _pod_objects(pod)]
        for step in range(1, SIM_PROGRESS_LINES + 1):
            offset = started + run * step / (SIM_PROGRESS_LINES + 1)
            if offset > min(elapsed, finished):
                break
            lines.append(f"{stamp(offset)} [osmo-sim] task {pod.task}: step {step}/{SIM_PROGRESS_LINES}")
        if elapsed >= finished:
            code = sim_exit_code(pod)
            lines.append(f"{stamp(finished)} [osmo-sim] task {pod.task} finished: exit code {code}")
        return PodLog(tuple(lines[-tail:]), truncated=len(lines) > tail)

    def pod_events(self, pods: Iterable[PodRequest], *, now: datetime) -> list[PodEvent]:
        """What a kubelet would report, at the simulated times: Scheduled and Started; no events
        for a pod not dispatched."""
        events: list[PodEvent] = []
        for pod in pods:
            if pod.dispatched_at is None:
                continue
            events.append(PodEvent(pod.dispatched_at, pod.pod_name, "Scheduled",
                                   f"Successfully assigned {pod.pod_name} to {pod.node_name} (simulated)"))
            started, _finished = self.next_change_in(pod)
            at = pod.dispatched_at + timedelta(seconds=started)
            if at <= now:
                events.append(PodEvent(at, pod.pod_name, "Started", "Started container task (simulated)"))
        return events

    @staticmethod
    def next_change_in(pod: PodRequest) -> tuple[float, float]:
        """Seconds after dispatch at which the pod starts running and finishes."""
        pending = min(0.5, pod.sim_seconds / 4)
        return pending, pending + pod.sim_seconds
