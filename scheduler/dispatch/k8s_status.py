"""What a listed Kubernetes pod says about its task (docs/kubernetes.md §5 and §10): its phase, exit code
and message, and, when the cluster rather than the task is the cause, why (``PodState.cause``).

- ``PodScheduled=False`` with reason ``Unschedulable``: the cluster refuses to bind the pod (its node
  is full of other pods, tainted, cordoned). Reported Pending with :data:`CAUSE_UNSCHEDULABLE`, the
  cluster's message and when it first refused (the condition's ``lastTransitionTime``); the service
  requeues the gang after ``OSMO_K8S_UNSCHEDULABLE_SECONDS``. The pending timeout does not apply to it.
  A pod that is bound and slow to pull its image (``PodScheduled=True``, ``ContainerCreating``,
  ``ErrImagePull``) is not unschedulable.
- A ``DisruptionTarget`` condition (``status: True``): the pod is being taken by the infrastructure (its
  node NotReady or gone, a drain, a taint, the pod garbage collector); reported Failed with
  :data:`CAUSE_DISRUPTED` whatever its phase but Succeeded (a pod that finished first finished).
- ``status.reason: Evicted`` (the kubelet under node pressure): Failed with :data:`CAUSE_EVICTED`.
- A container that could not start (terminated ``StartError``/``ContainerCannotRun``): Failed with
  :data:`CAUSE_START_ERROR` at once; waiting on an image (``ImagePullBackOff``, ``ErrImagePull``, ...)
  or on its creation (``CreateContainerConfigError``, ``RunContainerError``, ...) past the pending
  timeout: Failed with :data:`CAUSE_IMAGE_PULL` / :data:`CAUSE_START_ERROR`.

Pure: reads ``kubernetes.client`` models, imports nothing from Django.
"""

from __future__ import annotations

from datetime import UTC, datetime

from kubernetes import client as k8s_client

from scheduler.dispatch.base import (
    CAUSE_DISRUPTED,
    CAUSE_EVICTED,
    CAUSE_IMAGE_PULL,
    CAUSE_START_ERROR,
    CAUSE_UNSCHEDULABLE,
    PodEvent,
    PodState,
)
from scheduler.dispatch.pod.manifest import CONTAINER_NAME
from scheduler.dispatch.pod.runtime_wrap import result_from_message

IMAGE_PULL_REASONS = frozenset({"ImagePullBackOff", "ErrImagePull", "InvalidImageName", "ErrImageNeverPull"})
START_WAITING_REASONS = frozenset({"CreateContainerConfigError", "CreateContainerError", "RunContainerError",
                                   "PreStartHookError", "PostStartHookError"})
START_TERMINATED_REASONS = frozenset({"StartError", "ContainerCannotRun"})
# Waiting reasons worth surfacing while a pod is Pending (the pod will not start by itself).
NOTABLE_WAITING_REASONS = IMAGE_PULL_REASONS | (START_WAITING_REASONS - {"PreStartHookError", "PostStartHookError"})


def aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _task_container_status(pod: k8s_client.V1Pod):
    statuses = (pod.status.container_statuses if pod.status else None) or []
    for status in statuses:
        if status.name == CONTAINER_NAME:
            return status
    return statuses[0] if statuses else None


def _containers(pod: k8s_client.V1Pod) -> list:
    status = pod.status
    return [*((status.init_container_statuses if status else None) or []),
            *((status.container_statuses if status else None) or [])]


def _condition(pod: k8s_client.V1Pod, kind: str, status: str):
    """The pod's condition of type ``kind`` when its status is ``status``, else None."""
    for condition in (pod.status.conditions if pod.status else None) or []:
        if condition.type == kind and condition.status == status:
            return condition
    return None


def _said(reason: str | None, message: str | None) -> str:
    text = (message or "").strip()
    return f"{reason}: {text}" if reason and text else (reason or text)


def _pending_reason(pod: k8s_client.V1Pod) -> str:
    """Why a Pending pod is not running yet: a container waiting reason, or the scheduler's condition."""
    for container in _containers(pod):
        waiting = container.state.waiting if container.state else None
        if waiting and waiting.reason and (waiting.reason in NOTABLE_WAITING_REASONS or waiting.message):
            return f"{waiting.reason}: {waiting.message}" if waiting.message else waiting.reason
    for container in (pod.status.container_statuses if pod.status else None) or []:
        waiting = container.state.waiting if container.state else None
        if waiting and waiting.reason:
            return waiting.reason
    refused = _condition(pod, "PodScheduled", "False")
    if refused is not None and refused.reason:
        return _said(refused.reason, refused.message)
    return ""


def _waiting_cause(pod: k8s_client.V1Pod) -> str:
    """The cause a Pending pod's container waiting reasons name (image pull first), or ""."""
    reasons = {container.state.waiting.reason for container in _containers(pod)
               if container.state and container.state.waiting and container.state.waiting.reason}
    if reasons & IMAGE_PULL_REASONS:
        return CAUSE_IMAGE_PULL
    if reasons & START_WAITING_REASONS:
        return CAUSE_START_ERROR
    return ""


def _failed_state(pod: k8s_client.V1Pod) -> PodState:
    container = _task_container_status(pod)
    terminated = None
    if container is not None:
        terminated = (container.state.terminated if container.state else None) or (
            container.last_state.terminated if container.last_state else None)
    parts: list[str] = []
    exit_code = None
    cause = ""
    if terminated is not None:
        exit_code = terminated.exit_code
        if terminated.reason:
            parts.append(terminated.reason)
            if terminated.reason in START_TERMINATED_REASONS:
                cause = CAUSE_START_ERROR
        result = result_from_message(terminated.message) if terminated.message else None
        if result is not None:  # the task runtime's result: OSMO's code and its message
            exit_code, text = result
            if text:
                parts.append(text)
        elif terminated.message:
            parts.append(terminated.message.strip())
    if pod.status and pod.status.reason and pod.status.reason not in parts:
        parts.append(pod.status.reason)
    if pod.status and pod.status.message and pod.status.message not in parts:
        parts.append(pod.status.message.strip())
    if pod.status and pod.status.reason == "Evicted":
        cause = CAUSE_EVICTED
    return PodState("Failed", exit_code, ": ".join(parts), cause=cause)


def _disrupted_state(pod: k8s_client.V1Pod, condition: k8s_client.V1PodCondition, phase: str) -> PodState:
    """A pod the infrastructure takes (``DisruptionTarget``): Failed, with the condition's words; a pod
    not finished yet (Running while its dead node cannot confirm, or terminating) is to be deleted."""
    node = pod.spec.node_name if pod.spec else None
    said = _said(condition.reason, condition.message) or "DisruptionTarget"
    where = f" on node {node}" if node else ""
    exit_code = _failed_state(pod).exit_code if phase == "Failed" else None
    return PodState("Failed", exit_code, f"disrupted{where}: {said}", live=phase != "Failed", cause=CAUSE_DISRUPTED)


def container_events(pod: k8s_client.V1Pod, pod_name: str, *, now: datetime) -> list[PodEvent]:
    """The reasons the pod's containers are waiting or terminated, and the pod's own (Evicted), as
    events: a terminated container at its finish time, a waiting one (ImagePullBackOff, ...) now."""
    status = pod.status
    events: list[PodEvent] = []
    for container in _containers(pod):
        state = container.state
        terminated = state.terminated if state else None
        waiting = state.waiting if state else None
        if terminated is not None and terminated.reason:
            text = f"container {container.name} exited with code {terminated.exit_code}"
            if terminated.message:
                text = f"{text}: {terminated.message.strip()}"
            moment = terminated.finished_at or terminated.started_at or now
            events.append(PodEvent(aware(moment), pod_name, terminated.reason, text))
        elif waiting is not None and waiting.reason in NOTABLE_WAITING_REASONS:
            text = f"container {container.name} is waiting"
            if waiting.message:
                text = f"{text}: {waiting.message.strip()}"
            events.append(PodEvent(aware(now), pod_name, waiting.reason, text))
    if status is not None and status.reason:
        finished = [c.state.terminated.finished_at for c in status.container_statuses or []
                    if c.state and c.state.terminated and c.state.terminated.finished_at]
        events.append(PodEvent(aware(max(finished) if finished else now), pod_name, status.reason,
                               (status.message or "").strip()))
    return events


def pod_state(pod: k8s_client.V1Pod, *, dispatched_at: datetime | None, now: datetime,
              pending_timeout_s: float) -> PodState:
    """Map one listed pod to a :class:`PodState` (see the module docstring)."""
    phase = (pod.status.phase if pod.status else None) or "Pending"
    if phase == "Succeeded":
        return PodState("Succeeded", 0, "")
    disruption = _condition(pod, "DisruptionTarget", "True")
    if disruption is not None:
        return _disrupted_state(pod, disruption, phase)
    if phase == "Failed":
        return _failed_state(pod)
    if phase == "Running":
        return PodState("Running")
    if phase == "Pending":
        refused = _condition(pod, "PodScheduled", "False")
        if refused is not None and refused.reason == "Unschedulable":
            since = refused.last_transition_time or dispatched_at or (
                pod.metadata.creation_timestamp if pod.metadata else None) or now
            return PodState("Pending", None, _said(refused.reason, refused.message), cause=CAUSE_UNSCHEDULABLE,
                            since=aware(since))
        reason = _pending_reason(pod)
        started = dispatched_at or (pod.metadata.creation_timestamp if pod.metadata else None)
        if started is not None:
            waited = (aware(now) - aware(started)).total_seconds()
            if waited > pending_timeout_s:
                because = f" (reason: {reason})" if reason else ""
                return PodState("Failed", None,
                                f"pod stayed Pending for {int(waited)} s; no kubelet started it{because}", live=True,
                                cause=_waiting_cause(pod))
        return PodState("Pending", None, reason)
    return PodState("Unknown", None, (pod.status.reason or "") if pod.status else "")
