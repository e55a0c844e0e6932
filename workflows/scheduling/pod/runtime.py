"""The service's side of the task runtime (docs/runtime.md): each task's plan, its artifact URL in the
pool's artifact store, and its per-task token.

A plan is built at dispatch for pools whose backend runs the runtime (``local``; ``kubernetes`` when
``OSMO_RUNTIME_IMAGE`` is set). The task's OSMO fields are its mapping in the stored spec
(:func:`spec_runtime_fields`: ``files``, ``inputs``, ``outputs``, ``checkpoint``, the group's
``barrier``, as far as the spec parser accepted them at submission) with the command, args and
environment of the task row (:func:`task_osmo_fields`).

The token is a Django signature of the task's id and pod name (salted for the runtime): it lets the
bearer arrive at its own group's barrier and read its own task's status, nothing else, and it dies
with the pod (a re-placed task has a new pod name).

The API token (:func:`task_api_env`, another salt) is what the task's ``osmo`` command logs in with
(``OSMO_URL``, ``OSMO_TOKEN``): it acts as the workflow's submitter while the task runs in that pod
(:func:`task_api_user`), for the workflow and pool endpoints only (docs/runtime.md, "The osmo command
in a task").
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml
from django.conf import settings
from django.core import signing

from osmo import config as osmo_config
from runtime import BarrierSpec, TaskPlan, plan_from_osmo_task
from scheduler.choices import DispatchBackend

TOKEN_SALT = "osmo.runtime.task"
API_TOKEN_SALT = "osmo.runtime.api"
BARRIER_PATH = "/api/runtime/barrier/"


def runtime_backend(backend: str) -> bool:
    """Whether tasks of a pool with this backend run through the runtime (and get a plan)."""
    if backend == DispatchBackend.LOCAL:
        return True
    return backend == DispatchBackend.KUBERNETES and bool(osmo_config.kubernetes().runtime_image)


def artifact_store(pool_name: str) -> str:
    """The pool's artifact store URL (``OSMO_ARTIFACT_STORES``, else ``OSMO_ARTIFACT_STORE``)."""
    stores: Mapping[str, str] = osmo_config.runtime().artifact_stores
    return str(stores.get(pool_name) or osmo_config.runtime().artifact_store).rstrip("/")


def local_service_paths() -> tuple[str, ...]:
    """The service's own folders on its machine, which a local pool's file:// URLs may not name (docs/runtime.md,
    "What a task can and cannot do"): the checkout, the virtualenv, the data folder, the pods' folders."""
    from scheduler.dispatch.local import default_root

    paths = (settings.BASE_DIR, sys.prefix, settings.DATA_DIR, default_root())
    return tuple(sorted({os.path.realpath(str(path)) for path in paths}))


def task_artifact_url(pool_name: str, global_id: str, task_name: str) -> str:
    """Where a task's ``{{output}}`` is committed for downstream ``task`` inputs: under the workflow's
    global id, unique across users (docs/design.md §7, "Workflow ids")."""
    return f"{artifact_store(pool_name)}/{global_id}/{task_name}"


def task_token(task_id: int, pod_name: str, *, salt: str = TOKEN_SALT) -> str:
    return signing.dumps({"task": task_id, "pod": pod_name}, salt=salt, compress=True)


def task_token_read(token: str, *, salt: str = TOKEN_SALT) -> tuple[int, str] | None:
    """The (task id, pod name) a token was made for, or None when it is not one of ours."""
    try:
        data = signing.loads(token, salt=salt)
    except signing.BadSignature:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("task"), int) or not isinstance(data.get("pod"), str):
        return None
    return data["task"], data["pod"]


def task_api_env(task_id: int, pod_name: str, pool_name: str) -> dict[str, str]:
    """What the task's ``osmo`` command logs in with: the service's address and the task's API token,
    and the task's pool as its default pool (none with ``OSMO_TASK_API_ACCESS`` off)."""
    if not osmo_config.runtime().task_api_access:
        return {}
    return {"OSMO_URL": osmo_config.runtime().service_url.rstrip("/"),
            "OSMO_TOKEN": task_token(task_id, pod_name, salt=API_TOKEN_SALT), "OSMO_POOL": pool_name}


def task_api_user(token: str) -> tuple[Any, str] | None:
    """Who a task API token acts as: ``(submitter, "")`` while the token's pod is its task's and the
    task holds capacity (placed, starting or running), ``(None, why not)`` when it no longer does, and
    None when ``token`` is not a task API token at all. One query."""
    found = task_token_read(token, salt=API_TOKEN_SALT)
    if found is None:
        return None
    from workflows.choices import TASK_ACTIVE_STATUSES
    from workflows.models import Task

    task_id, pod_name = found
    task = Task.objects.select_related("workflow__submitted_by").filter(pk=task_id).first()
    if task is None or task.pod_name != pod_name:
        return None, "its task was re-placed or deleted"
    if task.status not in TASK_ACTIVE_STATUSES:
        return None, f"its task is {task.status}"
    user = task.workflow.submitted_by
    if not user.is_active:
        return None, "its workflow's submitter is inactive"
    return user, ""


@dataclass(frozen=True)
class SpecRuntimeFields:
    """The runtime's fields of a stored spec: each task's raw mapping and each group's ``barrier``."""

    tasks: dict[str, Mapping[str, Any]]
    barriers: dict[str, bool]


def spec_runtime_fields(spec_text: str) -> SpecRuntimeFields:
    """Read the stored (validated, rendered) spec for what the runtime executes: every task's own
    mapping (``files``, ``inputs``, ``outputs``, ``checkpoint``, ... whatever the parser accepted) and
    every group's ``barrier``. Tasks of a spec without groups count as one group each."""
    try:
        document = yaml.safe_load(spec_text or "") or {}
    except yaml.YAMLError:
        return SpecRuntimeFields({}, {})
    workflow = document.get("workflow") if isinstance(document, dict) else None
    if not isinstance(workflow, dict):
        return SpecRuntimeFields({}, {})
    tasks: dict[str, Mapping[str, Any]] = {}
    barriers: dict[str, bool] = {}
    groups = workflow.get("groups") or [{"name": t.get("name"), "tasks": [t]} for t in workflow.get("tasks") or ()
                                        if isinstance(t, dict)]
    for group in groups:
        if not isinstance(group, dict):
            continue
        barriers[str(group.get("name"))] = bool(group.get("barrier", False))
        for task in group.get("tasks") or ():
            if isinstance(task, dict) and task.get("name") is not None:
                tasks[str(task["name"])] = task
    return SpecRuntimeFields(tasks, barriers)


def task_osmo_fields(raw: Mapping[str, Any] | None, *, command: list[str] | None, args: list[str] | None,
                     environment: Mapping[str, Any] | None) -> dict[str, Any]:
    """The task's OSMO fields as :func:`runtime.plan_from_osmo_task` takes them: the spec's own task
    mapping (``raw``), with the command, args and environment the task row stores (rendered and
    validated at submission)."""
    fields = dict(raw or {})
    fields.update({"command": list(command or ()), "args": list(args or ()), "environment": dict(environment or {})})
    return fields


def task_plan(*, pool_name: str, backend: str, workflow_id: str, task_id: int, task_name: str, pod_name: str,
              fields: Mapping[str, Any], upstream_tasks: Mapping[str, str] | None = None,
              group_size: int = 1, barrier: bool = False, global_id: str | None = None) -> TaskPlan:
    """One task's plan. ``workflow_id``: the id its owner sees (``{{workflow_id}}``); ``global_id``:
    the one artifact URLs are built from (default ``workflow_id``). ``upstream_tasks``: name of each
    task this one may read (``inputs: - task:``) -> its workflow's global id (its artifact URL is
    derived). ``fields`` arrive with their tokens resolved by dispatch
    (:mod:`workflows.scheduling.pod.podspec`, the one place tokens are resolved); ``backend`` is kept for
    the caller's symmetry."""
    artifact_for = {name: task_artifact_url(pool_name, upstream_workflow, name)
                    for name, upstream_workflow in (upstream_tasks or {}).items()}
    spec = None
    if barrier:
        spec = BarrierSpec(url=osmo_config.runtime().service_url.rstrip("/") + BARRIER_PATH,
                           token=task_token(task_id, pod_name), group_size=group_size)
    return plan_from_osmo_task(fields, workflow_id=workflow_id, artifact_url_for=artifact_for,
                               artifact_url=task_artifact_url(pool_name, global_id or workflow_id, task_name),
                               barrier=spec, start_timeout_s=osmo_config.runtime().task_start_timeout_seconds,
                               artifact_store=artifact_store(pool_name))


def task_barrier_arrive(*, task_id: int, pod_name: str) -> dict[str, Any] | None:
    """Record that the task's pod arrived at its group's barrier and say whether the barrier is open
    (every task of the group arrived with its current pod). None when the token's pod is no longer the
    task's (re-placed or gone). ``abort`` when the task or its group stopped: its runtime must not
    start the command."""
    from workflows.choices import TASK_ACTIVE_STATUSES, TASK_TERMINAL_STATUSES
    from workflows.models import Task

    task = Task.objects.select_related("group").filter(pk=task_id).only(
        "pk", "pod_name", "status", "group__status", "group_id").first()
    if task is None or task.pod_name != pod_name:
        return None
    if task.status not in TASK_ACTIVE_STATUSES or task.group.status in TASK_TERMINAL_STATUSES:
        return {"arrived": 0, "size": 0, "open": False, "abort": True,
                "reason": f"the task is {task.status}, its group {task.group.status}"}
    # Each task writes only its own row, then counts: no lock. Two tasks arriving together each see at
    # least their own arrival; the one that arrives last, or the next poll, sees every arrival.
    Task.objects.filter(pk=task_id, pod_name=pod_name).exclude(barrier_pod=pod_name).update(barrier_pod=pod_name)
    rows = list(Task.objects.filter(group_id=task.group_id).values_list("pod_name", "barrier_pod"))
    arrived = sum(1 for current, arrived_pod in rows if current and arrived_pod == current)
    return {"arrived": arrived, "size": len(rows), "open": arrived == len(rows), "abort": False, "reason": ""}


def task_runtime_status(*, task_id: int, pod_name: str) -> dict[str, Any] | None:
    """The task's own status and its group's, for its runtime (None as for the barrier)."""
    from workflows.models import Task

    task = Task.objects.select_related("group").filter(pk=task_id).only(
        "pk", "name", "pod_name", "status", "group__status", "group__name").first()
    if task is None or task.pod_name != pod_name:
        return None
    return {"task": task.name, "status": task.status, "group": task.group.name, "group_status": task.group.status}
