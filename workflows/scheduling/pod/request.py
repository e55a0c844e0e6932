"""A task's pod as the backends are asked for it (:class:`~scheduler.dispatch.PodRequest`): from a
task row, with OSMO's pod fields (its tokens resolved, files, host name and the group's Service, the
workflow's labels, and what the task's platform gives its pods: node selector, tolerations,
``privileged``, ``hostNetwork`` and ``volumeMounts`` where the platform allows them; docs/spec.md).
Dispatch (:mod:`workflows.scheduling.pods`) creates pods from these; reading a task's log and events
names its pod by one.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, NamedTuple

from django.db.models import QuerySet

from osmo.rows import named_rows
from scheduler.choices import DispatchBackend
from scheduler.dispatch import PodRequest
from scheduler.dispatch.pod.naming import group_service_name, pod_hostname
from scheduler.dispatch.simulated import SIM_SECONDS_ENV
from scheduler.models import Pool, PoolPlatform
from scheduler.resources import amounts_of
from workflows.choices import TaskStatus
from workflows.models import Task
from workflows.scheduling.pod.podspec import (
    TaskPodFields,
    WorkflowPods,
    mount_allowed,
    resolve_task,
    token_context,
    token_hosts,
    workflow_pods,
)
from workflows.spec import TokenUnresolvedError

ACTIVE = (TaskStatus.INITIALIZING, TaskStatus.RUNNING)


def pod_request(task: Task, pool: Pool) -> PodRequest:
    """The pod of one task, for reading its log and events. On the simulated backend, whose log shows
    the command, with the texts as dispatch rendered them (tokens resolved)."""
    request = _pod_request(
        pool, pod_name=task.pod_name, node_name=task.node.name if task.node is not None else "",
        workflow_id=task.workflow.global_id, workflow_label=task.workflow.workflow_id, group=task.group.name,
        task=task.name, image=task.image,
        command=task.command, args=task.args, environment=task.environment, amounts=amounts_of(task),
        dispatched_at=task.dispatched_at, workflow_pk=task.workflow_id, owner_pk=task.workflow.submitted_by_id,
    )
    if pool.backend != DispatchBackend.SIMULATED:
        return request
    try:
        return pod_osmo_fields(request, pool, pods=workflow_pods(task.workflow.spec_text or ""),
                               labels=task.workflow.pod_labels or {}, platforms={})
    except TokenUnresolvedError:
        return request


@dataclass(frozen=True, slots=True)
class PlatformPod:
    """What a pool platform gives its tasks' pods."""

    node_selector: dict[str, str]
    tolerations: tuple[dict[str, Any], ...]
    allow_privileged: bool
    allow_host_network: bool
    host_mounts: tuple[str, ...] = ()  # the host path prefixes ``volumeMounts`` may use


def pool_platforms(pool: Pool) -> dict[str, PlatformPod]:
    """The pool's platforms by name (one query)."""
    return {name: PlatformPod({str(k): str(v) for k, v in (selector or {}).items()},
                              tuple(dict(item) for item in tolerations or () if isinstance(item, dict)),
                              privileged, host_network, tuple(str(prefix) for prefix in mounts or ()))
            for name, selector, tolerations, privileged, host_network, mounts in PoolPlatform.objects.filter(pool=pool)
            .values_list("name", "node_selector", "tolerations", "allow_privileged", "allow_host_network",
                         "host_mounts")}


def pod_osmo_fields(request: PodRequest, pool: Pool, *, pods: WorkflowPods, labels: dict[str, Any],
                    platforms: dict[str, PlatformPod], hosts: dict[str, str] | None = None) -> PodRequest:
    """``request`` with its tokens resolved (docs/spec.md, "Tokens") and OSMO's pod fields set: the
    group's Service name and the task's host name (a group some ``{{host:...}}`` names), its files,
    the workflow's labels, the platform's node selector and tolerations, and ``privileged`` and
    ``hostNetwork`` and ``volumeMounts`` where the platform allows them.
    ``hosts``: the workflow's ``{{host:...}}`` values when the caller computed them for several tasks.
    Raises ``TokenUnresolvedError``."""
    if hosts is None:
        hosts = token_hosts(pool.backend, global_id=request.workflow_id, groups=pods.groups,
                            namespace=request.namespace)
    fields = pods.tasks.get(request.task, TaskPodFields())
    shown_id = request.workflow_label or request.workflow_id
    resolved = resolve_task(token_context(request.task, pods, workflow_id=shown_id, hosts=hosts),
                            command=request.command, args=request.args, environment=request.environment,
                            files=fields.files)
    platform = platforms.get(fields.platform) if fields.platform is not None else None
    named = request.group in pods.host_groups
    return replace(
        request, command=resolved.command, args=resolved.args, environment=resolved.environment,
        files=resolved.files, hostname=pod_hostname(request.task) if named else "",
        subdomain=group_service_name(request.workflow_id, request.group) if named else "",
        labels={str(k): str(v) for k, v in labels.items()},
        node_selector=platform.node_selector if platform is not None else {},
        tolerations=platform.tolerations if platform is not None else (),
        privileged=fields.privileged and platform is not None and platform.allow_privileged,
        host_network=fields.host_network and platform is not None and platform.allow_host_network,
        host_mounts=tuple(mount for mount in fields.volume_mounts
                          if platform is not None and mount_allowed(mount[0], platform.host_mounts)),
    )


def _pod_request(
    pool: Pool, *, pod_name: str, node_name: str, workflow_id: str, workflow_label: str, group: str, task: str,
    image: str, command: list[str] | None, args: list[str] | None, environment: dict[str, object] | None,
    amounts: dict[str, Any], dispatched_at: datetime | None, workflow_pk: int = 0, owner_pk: int = 0,
) -> PodRequest:
    """``workflow_id``: the workflow's global id; ``workflow_label``: its id as its owner sees it; ``amounts``:
    what the task requests, by model field (:func:`scheduler.resources.amounts_of`)."""
    env = {str(k): str(v) for k, v in (environment or {}).items()}
    try:
        sim_seconds = float(env.get(SIM_SECONDS_ENV, pool.sim_task_seconds))
    except ValueError:
        sim_seconds = pool.sim_task_seconds
    return PodRequest(
        pod_name=pod_name,
        namespace=pool.pod_namespace,
        node_name=node_name,
        workflow_id=workflow_id,
        workflow_label=workflow_label,
        group=group,
        task=task,
        pool=pool.name,
        image=image,
        command=tuple(command or ()),
        args=tuple(args or ()),
        environment=env,
        **amounts,
        dispatched_at=dispatched_at,
        sim_seconds=max(sim_seconds, 0.0),
        workflow_pk=workflow_pk,
        owner_pk=owner_pk,
    )


# What a pod sync reads of every active task, and a dispatch of the tasks it creates pods for: plain
# rows (a sync reads every active task of the pool, most of them unchanged; model instances for the
# task and its node, workflow and group cost most of its CPU).
class PodRow(NamedTuple):
    """A task as its pod is made or watched (read by :func:`pod_rows`: each field from its own column or
    the one ``_POD_COLUMNS`` names)."""

    pk: int
    status: str
    workflow_id: int
    group_id: int
    pod_name: str
    node_name: str | None
    workflow_label: str  # the id as its owner sees it
    workflow_global: str  # unique across users: what names outside the database are built from
    group: str
    task: str
    image: str
    command: list[str] | None
    args: list[str] | None
    environment: dict[str, object] | None
    gpu: int
    cpu_millis: int
    memory_bytes: int
    storage_bytes: int
    dispatched_at: datetime | None
    owner_pk: int  # the workflow's submitter


# The fields of PodRow read from a column of another name (the rest: from their own).
_POD_COLUMNS = {"node_name": "node__name", "workflow_label": "workflow__workflow_id",
                "workflow_global": "workflow__global_id", "group": "group__name", "task": "name",
                "owner_pk": "workflow__submitted_by_id"}


def pod_rows(tasks: QuerySet[Task]) -> list[PodRow]:
    return named_rows(tasks, PodRow, _POD_COLUMNS)


def row_pod_request(row: PodRow, pool: Pool) -> PodRequest:
    return _pod_request(pool, pod_name=row.pod_name, node_name=row.node_name or "", workflow_id=row.workflow_global,
                        workflow_label=row.workflow_label, group=row.group, task=row.task, image=row.image,
                        command=row.command, args=row.args, environment=row.environment, amounts=amounts_of(row),
                        dispatched_at=row.dispatched_at, workflow_pk=row.workflow_id, owner_pk=row.owner_pk)
