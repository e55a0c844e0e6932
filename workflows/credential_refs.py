"""The submission's check of the spec's ``credentials`` against the credential store (docs/spec.md,
"credentials"): a credential the submitting user does not own is a 400 naming
``workflow.tasks[N].credentials.<name>`` (or ``workflow.groups[G].tasks[N]...``), before anything is
stored. And the spec's references restated for the store's dispatch hook."""

from __future__ import annotations

from typing import Any

from credentials.services import CredentialRef, credentials_missing
from osmo.types import User, Viewer
from parsing.errors import join_path
from workflows.spec import SpecError, SpecInvalidError, SpecLimits, TaskSpec, WorkflowSpec
from workflows.spec.loader import load_document


def _task_paths(source: str | dict[str, Any]) -> dict[str, str]:
    """Each task's path in the (rendered) spec by name; a spec that parsed loads again."""
    try:
        document = load_document(source, SpecLimits(), warnings=[])
    except SpecInvalidError:
        return {}
    body = document.get("workflow")
    body = body if isinstance(body, dict) else {}
    paths: dict[str, str] = {}
    owners: list[tuple[str, object]] = [("workflow.tasks", body.get("tasks"))]
    groups = body.get("groups")
    if isinstance(groups, list):
        owners += [(f"workflow.groups[{index}].tasks", group.get("tasks"))
                   for index, group in enumerate(groups) if isinstance(group, dict)]
    for prefix, tasks in owners:
        if isinstance(tasks, list):
            for index, task in enumerate(tasks):
                if isinstance(task, dict) and isinstance(task.get("name"), str):
                    paths.setdefault(task["name"], f"{prefix}[{index}]")
    return paths


def spec_credentials_check(spec: WorkflowSpec, source: str | dict[str, Any], user: Viewer) -> None:
    """Raise ``SpecInvalidError`` naming every task credential ``user`` does not own (one query)."""
    names = {ref.name for task in spec.tasks() for ref in task.credentials}
    owner = user if isinstance(user, User) else None
    missing = credentials_missing(owner=owner, names=names)
    if not missing:
        return
    paths = _task_paths(source)
    errors = []
    for task in spec.tasks():
        task_path = paths.get(task.name, join_path("workflow.tasks", task.name))
        for ref in task.credentials:
            if ref.name in missing:
                errors.append(SpecError(
                    join_path(join_path(task_path, "credentials"), ref.name),
                    f"you have no credential named {ref.name!r}; create it with `osmo credential set {ref.name} "
                    "...` (osmo credential list shows yours)"))
    raise SpecInvalidError(errors)


def task_credential_refs(task: TaskSpec) -> tuple[CredentialRef, ...]:
    """The task's ``credentials`` as the store's dispatch hook takes them
    (:func:`credentials.services.task_secret_payload`)."""
    return tuple(CredentialRef(name=ref.name, environment=ref.environment, path=ref.path) for ref in task.credentials)


__all__ = ["spec_credentials_check", "task_credential_refs"]
