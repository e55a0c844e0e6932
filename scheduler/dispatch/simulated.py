"""The simulated backend (the default): no process runs. A pod's phase is a function of the time
since it was dispatched, so the whole lifecycle can be exercised on a laptop:

    Pending  for min(0.5 s, run/4) after dispatch
    Running  for ``sim_seconds`` (pool default, or the task's ``OSMO_SIM_SECONDS`` environment entry)
    then Succeeded, or Failed with the task's ``OSMO_SIM_EXIT_CODE`` when that is non-zero.

Stateless on purpose: the task row's ``dispatched_at`` is the pod, so a restarted worker sees the
same phases and create/delete are trivially idempotent.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from scheduler.dispatch.base import ListedPod, PodRequest, PodState

SIM_SECONDS_ENV = "OSMO_SIM_SECONDS"
SIM_EXIT_CODE_ENV = "OSMO_SIM_EXIT_CODE"


def sim_exit_code(pod: PodRequest) -> int:
    try:
        return int(pod.environment.get(SIM_EXIT_CODE_ENV, "0"))
    except ValueError:
        return 1


class SimulatedBackend:
    name = "simulated"

    def create_pod(self, pod: PodRequest) -> None:
        return None

    def delete_pod(self, *, namespace: str, pod_name: str, grace_seconds: int | None = None) -> None:
        return None

    def pods_list(self, *, namespace: str, pool: str) -> list[ListedPod]:
        return []  # the task rows are the pods: nothing can be orphaned

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

    @staticmethod
    def next_change_in(pod: PodRequest) -> tuple[float, float]:
        """Seconds after dispatch at which the pod starts running and finishes."""
        pending = min(0.5, pod.sim_seconds / 4)
        return pending, pending + pod.sim_seconds
