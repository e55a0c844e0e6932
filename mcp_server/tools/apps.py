"""Apps (OSMO's stored, parameterised workflow templates): list, show, spec and submit, through the services of
``/api/apps/`` (catalog/api.py) with their checks and refusals: the same input serializer, the submission
path of workflows (pool access, quotas, dry run) and a value that is no parameter of the app refused."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from catalog import services
from catalog.api import AppOutputSerializer, AppSubmitInputSerializer, AppVersionOutputSerializer
from mcp_server.registry import tool
from mcp_server.tools.workflows import (
    LIST_DEFAULT,
    LIST_MAX,
    Env,
    IdempotencyKey,
    Labels,
    Pool,
    Team,
    Values,
    _summary,
)
from osmo.types import User
from workflows.api.views import submission_labels

AppName = Annotated[str, Field(description="The app's name, as `osmo app list` shows it")]
Version = Annotated[int | None, Field(ge=1, description="A version (default: the newest not deleted)")]


@tool("osmo_list_apps", title="List apps")
def app_list(
    user: User,
    name: Annotated[str | None, Field(description="Only apps whose name contains this text")] = None,
    users: Annotated[list[str] | None, Field(description="Only apps these users own")] = None,
    all_users: Annotated[bool, Field(description="Every app (default: yours: you made a version of it or "
                                                 "started a workflow from it)")] = False,
    limit: Annotated[int, Field(ge=1, le=LIST_MAX, description="At most this many, newest first")] = LIST_DEFAULT,
) -> dict[str, Any]:
    """Apps (`osmo app list`): stored workflow templates with versions, that anyone may launch with their own
    values. Name, description, owner, newest version, created."""
    apps = services.app_list(viewer=user, name=name or None, users=users or None, all_users=all_users)
    return {"count": apps.count(), "apps": AppOutputSerializer(apps[:limit], many=True).data}


@tool("osmo_get_app", title="Show an app")
def app_show(user: User, name: AppName, version: Version = None) -> dict[str, Any]:
    """One app (`osmo app show` and `osmo app info`): its description, its versions, and the parameters of
    a version (the newest by default), each with its default and the comment documenting it: the values
    `osmo_submit_app` takes."""
    shown = services.app_show(name, version=version)
    versions = services.app_versions(shown.app, order="desc")
    return {**AppOutputSerializer(shown.app).data, "version": shown.version.version,
            "parameters": [parameter.to_dict() for parameter in shown.parameters],
            "versions": AppVersionOutputSerializer(versions, many=True).data}


@tool("osmo_get_app_spec", title="An app's spec")
def app_spec(user: User, name: AppName, version: Version = None) -> dict[str, Any]:
    """The spec template of an app version (the newest by default), as written (`osmo app spec`)."""
    app = services.app_get(name)
    row = services.app_version_get(app, version)
    return {"name": app.name, "version": row.version, "spec": row.spec_text}


@tool("osmo_submit_app", title="Launch an app", read_only=False, idempotent=False)
def app_submit(user: User, name: AppName, version: Version = None, values: Values = None, pool: Pool = None,
               priority: Annotated[Literal["LOW", "NORMAL", "HIGH"], Field(description="LOW work is preemptible")]
               = "NORMAL", env: Env = None, team: Team = None,
               dry_run: Annotated[bool, Field(description="Validate against the pool and answer the plan; store "
                                                          "nothing")] = False,
               labels: Labels = None, idempotency_key: IdempotencyKey = None) -> dict[str, Any]:
    """Start a workflow from an app (`osmo app submit NAME --set K=V`): ``values`` over the parameters'
    defaults (names of `osmo_get_app`'s parameters only). It uses real compute unless ``dry_run``. Answers
    the new workflow, which records the app and version, or the dry run's plan."""
    body: dict[str, Any] = {"pool": pool or "", "priority": priority, "team": team or "", "set": values or {},
                            "set_env": env or {}, "dry_run": dry_run, "labels": labels or {}}
    if version is not None:
        body["version"] = version
    serializer = AppSubmitInputSerializer(data=body)
    serializer.is_valid(raise_exception=True)
    data = serializer.validated_data
    submission = services.app_submit(
        user=user, name=name, version=data.get("version"), values=dict(data["set"]), env=dict(data["set_env"]),
        pool_name=data.get("pool") or None, priority=data["priority"], team=data.get("team") or None,
        dry_run=data["dry_run"], idempotency_key=None if data["dry_run"] else idempotency_key or None,
        labels=submission_labels(data))
    if submission.dry_run is not None:
        return {"dry_run": submission.dry_run}
    assert submission.workflow is not None
    return _summary(user, submission.workflow, warnings=list(submission.warnings), created=submission.created,
                    app={"name": submission.app.name, "version": submission.version.version})
