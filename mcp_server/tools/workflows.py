"""Workflows: list, query, logs, events and spec; validate, submit, cancel and restart. Each tool reads and
writes through the selectors and services of ``/api/workflows/`` (workflows/api/views.py), with the same
visibility (your own workflows; staff see all), the same pool checks and the same refusals."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Annotated, Any, Literal

from django.http import QueryDict
from django_filters.utils import translate_validation
from pydantic import Field

from mcp_server.registry import tool
from osmo.types import User
from workflows import selectors, services
from workflows.api.filters import WorkflowFilterSet
from workflows.api.serializers import (
    TaskLogOutputSerializer,
    WorkflowEventsOutputSerializer,
    WorkflowOutputSerializer,
    WorkflowSubmitInputSerializer,
    WorkflowSummaryOutputSerializer,
)
from workflows.api.views import submission_labels
from workflows.choices import WorkflowStatus
from workflows.models import Workflow
from workflows.preview import workflow_dry_run
from workflows.scheduling import observe

LIST_DEFAULT = 20
LIST_MAX = 100
#: A stored spec longer than this is answered as its first characters, marked ``truncated``.
SPEC_MAX_CHARS = 64_000

WorkflowId = Annotated[str, Field(description="The workflow's id, as `osmo workflow list` shows it (name-N)")]
Owner = Annotated[str | None, Field(description="The owner's username, when several workflows you can see "
                                                "share the id (staff)")]
Pool = Annotated[str | None, Field(description="The pool (default: the spec's workflow.pool)")]
Spec = Annotated[str, Field(description="The workflow spec: YAML text, a Jinja template like `osmo workflow "
                                        "submit` takes (reference credentials by name; never paste secrets)")]
Priority = Annotated[Literal["LOW", "NORMAL", "HIGH"], Field(description="LOW work is preemptible")]
Values = Annotated[dict[str, Any] | None, Field(description="Template values (the CLI's --set NAME=VALUE)")]
Env = Annotated[dict[str, str] | None, Field(description="Environment variables set on every task (--set-env)")]
Team = Annotated[str | None, Field(description="The team whose quota it counts against (default: your one team "
                                               "with a quota in the pool, else your one team)")]
Labels = Annotated[dict[str, str] | None, Field(
    description="Workflow labels (Kubernetes label syntax) over the spec's workflow.labels "
                "(the CLI's --label KEY=VALUE)")]
IdempotencyKey = Annotated[str | None, Field(
    max_length=Workflow._meta.get_field("idempotency_key").max_length, pattern=r"^[^\x00-\x1f\x7f]*$",
    description="Any unique text (a UUID): a retry with the same key and arguments answers the workflow the "
                "first call made instead of making another (the API's Idempotency-Key)")]


def _workflow(user: User, workflow_id: str, owner: str | None, queryset: Any = None) -> Workflow:
    """The workflow as the API's detail routes find it (404 unseen, 409 ambiguous without ``owner``)."""
    return selectors.workflow_by_id(queryset if queryset is not None else selectors.workflow_detail_queryset(
        user=user), workflow_id, viewer=user, owner=owner or None)


def _summary(user: User, workflow: Workflow, **extra: Any) -> dict[str, Any]:
    row = selectors.workflow_list(user=user).get(pk=workflow.pk)
    return {**WorkflowSummaryOutputSerializer(row).data, **extra}


def _submission(user: User, *, spec: str, pool: str | None, priority: str, values: dict[str, Any] | None,
                env: dict[str, str] | None, team: str | None, labels: dict[str, str] | None = None) -> dict[str, Any]:
    """The submission's fields, checked by the API's input serializer (its 400s, naming the field)."""
    serializer = WorkflowSubmitInputSerializer(data={
        "spec": spec, "pool": pool or "", "priority": priority, "team": team or "", "set": values or {},
        "set_env": env or {}, "labels": labels or {}})
    serializer.is_valid(raise_exception=True)
    data = serializer.validated_data
    return {"pool_name": data.get("pool") or None, "spec": data["spec"], "priority": data["priority"],
            "team": data.get("team") or None, "values": dict(data["set"]) or None, "env": dict(data["set_env"]) or None,
            "labels": submission_labels(data)}


@tool("osmo_list_workflows", title="List workflows")
def workflow_list(
    user: User,
    status: Annotated[list[WorkflowStatus] | None, Field(description="Only workflows in one of these statuses")] = None,
    pool: Annotated[str | None, Field(description="Only workflows of this pool")] = None,
    name: Annotated[str | None, Field(description="Only workflows whose name contains this text")] = None,
    submitted_by: Annotated[str | None, Field(description="Only this user's workflows (staff see everyone's)")] = None,
    label: Annotated[list[str] | None, Field(description="KEY=SELECTOR label selectors, all must match: an exact "
                                                         "value, * wildcards or (a|b) alternatives")] = None,
    tag: Annotated[list[str] | None, Field(description="Tag names, all must be on the workflow")] = None,
    limit: Annotated[int, Field(ge=1, le=LIST_MAX, description="At most this many, newest first")] = LIST_DEFAULT,
    offset: Annotated[int, Field(ge=0, description="Skip this many first")] = 0,
) -> dict[str, Any]:
    """Your workflows, newest first (`osmo workflow list`): id, name, pool, status, priority, owner, times,
    failure message and task count. ``count`` is how many match; page with ``offset``."""
    query = QueryDict(mutable=True)
    query.setlist("status", [str(each) for each in status or []])
    query.setlist("label", list(label or []))
    query.setlist("tag", list(tag or []))
    for key, value in (("pool", pool), ("name", name), ("user", submitted_by)):
        if value:
            query[key] = value
    filters = WorkflowFilterSet(data=query, queryset=selectors.workflow_list(user=user))
    if not filters.is_valid():
        raise translate_validation(filters.errors)  # the API's 400 (django-filter's DRF backend does the same)
    rows = filters.qs
    count = filters.count_by_label(user)  # one label selector alone: counted on the label rows (as the API)
    return {"count": rows.count() if count is None else count, "offset": offset,
            "results": WorkflowSummaryOutputSerializer(rows[offset:offset + limit], many=True).data}


@tool("osmo_get_workflow", title="Query a workflow")
def workflow_query(user: User, workflow_id: WorkflowId, owner: Owner = None) -> dict[str, Any]:
    """One workflow in full (`osmo workflow query`): status, groups with their tasks (status, node, pod,
    exit code), why a group waits, and the status history."""
    workflow = _workflow(user, workflow_id, owner)
    # (the serializer says who holds what as its request's user sees it)
    return WorkflowOutputSerializer(workflow, context={"request": SimpleNamespace(user=user)}).data


@tool("osmo_get_workflow_logs", title="A workflow's logs")
def workflow_logs(
    user: User, workflow_id: WorkflowId,
    task: Annotated[str | None, Field(description="Only this task's log (default: every task's, each line "
                                                  "prefixed [task])")] = None,
    tail: Annotated[int | None, Field(ge=1, le=observe.LOG_TAIL_MAX,
                                      description="The last N lines of each task")] = None,
    owner: Owner = None,
) -> dict[str, Any]:
    """The last lines of a workflow's task logs (`osmo workflow logs`), read through the pool's backend."""
    workflow = _workflow(user, workflow_id, owner, selectors.workflow_visible_to(user).select_related("pool"))
    lines = observe.log_tail_parse(None if tail is None else str(tail))
    return TaskLogOutputSerializer(observe.task_log(workflow, task_name=task or None, tail=lines)).data


@tool("osmo_get_workflow_events", title="A workflow's events")
def workflow_events(user: User, workflow_id: WorkflowId, owner: Owner = None) -> dict[str, Any]:
    """What happened to a workflow, oldest first (`osmo workflow events`): the service's status changes
    and the backend's pod events (``backend_error`` says why those are missing, if they are)."""
    workflow = _workflow(user, workflow_id, owner, selectors.workflow_visible_to(user).select_related("pool"))
    return WorkflowEventsOutputSerializer(observe.workflow_events(workflow)).data


@tool("osmo_get_workflow_spec", title="A workflow's spec")
def workflow_spec(user: User, workflow_id: WorkflowId, owner: Owner = None) -> dict[str, Any]:
    """The spec a workflow was submitted with, as stored (rendered from its template), and the template
    values (`osmo workflow spec`). A very long spec is cut, and ``truncated`` says so."""
    workflow = _workflow(user, workflow_id, owner)
    text = workflow.spec_text or ""
    return {"workflow": workflow.workflow_id, "pool": workflow.pool.name, "priority": workflow.priority,
            "spec": text[:SPEC_MAX_CHARS], "truncated": len(text) > SPEC_MAX_CHARS,
            "template_values": workflow.template_values or {}}


@tool("osmo_validate_workflow", title="Validate a workflow spec")
def workflow_validate(user: User, spec: Spec, pool: Pool = None, priority: Priority = "NORMAL",
                      values: Values = None, env: Env = None, team: Team = None,
                      labels: Labels = None) -> dict[str, Any]:
    """Check a spec against a pool without submitting anything (`osmo workflow validate`): every problem
    with its path, or per group its constraint tree and where it would be placed now. Stores nothing."""
    fields = _submission(user, spec=spec, pool=pool, priority=priority, values=values, env=env, team=team,
                         labels=labels)
    return workflow_dry_run(user=user, **fields)


@tool("osmo_submit_workflow", title="Submit a workflow", read_only=False, idempotent=False)
def workflow_submit(user: User, spec: Spec, pool: Pool = None, priority: Priority = "NORMAL",
                    values: Values = None, env: Env = None, team: Team = None, labels: Labels = None,
                    idempotency_key: IdempotencyKey = None) -> dict[str, Any]:
    """Submit a workflow (`osmo workflow submit`): it uses real compute. Answers the new workflow (id,
    pool, status), what validation accepted but says (``warnings``), and ``created`` (false: an
    ``idempotency_key`` already used answered its workflow). Not retried on failure: pass an
    ``idempotency_key`` to retry safely, or list your workflows before submitting again."""
    warnings: list[dict[str, str]] = []
    workflow, created = services.workflow_submit(user=user, warnings=warnings, idempotency_key=idempotency_key or None,
                                                 **_submission(user, spec=spec, pool=pool, priority=priority,
                                                               values=values, env=env, team=team, labels=labels))
    return _summary(user, workflow, warnings=warnings, created=created)


@tool("osmo_cancel_workflow", title="Cancel a workflow", read_only=False, destructive=True, idempotent=False)
def workflow_cancel(user: User, workflow_id: WorkflowId, owner: Owner = None) -> dict[str, Any]:
    """Cancel a workflow (`osmo workflow cancel`): its remaining groups fail and its pods are deleted. It
    cannot be undone; `osmo_restart_workflow` submits its spec again as a new workflow."""
    workflow = _workflow(user, workflow_id, owner)
    services.workflow_cancel(workflow_pk=workflow.pk, user=user)
    return _summary(user, workflow)


@tool("osmo_restart_workflow", title="Restart a workflow", read_only=False, idempotent=False)
def workflow_restart(user: User, workflow_id: WorkflowId,
                     pool: Annotated[str | None, Field(description="Another pool to run it in (default: its own)")]
                     = None, owner: Owner = None, labels: Labels = None,
                     idempotency_key: IdempotencyKey = None) -> dict[str, Any]:
    """Submit a workflow's stored spec again as a new workflow of yours (`osmo workflow restart`), with its
    priority and template values; it uses real compute. Answers the new workflow (``created`` as for
    `osmo_submit_workflow`)."""
    workflow, created = services.workflow_restart(workflow=_workflow(user, workflow_id, owner), user=user,
                                                  pool_name=pool or None, idempotency_key=idempotency_key or None,
                                                  labels=submission_labels({"labels": labels or {}}))
    return _summary(user, workflow, warnings=[], created=created)
