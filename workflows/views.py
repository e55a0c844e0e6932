"""Server-rendered status pages: function views over selectors (style guide §5).

Every page that refreshes itself renders a *partial* template when asked with ``?partial=1``; the
page's ``static/osmo/live.js`` fetches that fragment every few seconds and swaps it in (no full
reload, no build step, nothing downloaded from a CDN).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from scheduler.models import Node, Pool
from scheduler.selectors import pool_get, pool_keys
from workflows import page_selectors
from workflows.errors import PoolNotFoundError, WorkflowNotCancellableError, WorkflowSpecInvalidError
from workflows.forms import WorkflowFilterForm, WorkflowSubmitForm, yaml_line_for_path
from workflows.models import TaskGroup, Workflow
from workflows.preview import workflow_dry_run
from workflows.selectors import task_domains, workflow_detail_queryset, workflow_transitions
from workflows.services import workflow_submit
from workflows.templatetags.osmo_pages import status_colour

WORKFLOWS_PER_PAGE = 25
NODES_PER_PAGE = 25
HISTORY_LIMIT = 500
EXAMPLES_DIR = Path(settings.BASE_DIR) / "examples"


def _refresh_ms() -> int:
    return int(getattr(settings, "OSMO_PAGE_REFRESH_MS", 4000))


def _render(request: HttpRequest, template: str, partial: str, context: dict[str, Any]) -> HttpResponse:
    """The whole page, or only its live fragment when the poller asks (``?partial=1``)."""
    context.setdefault("refresh_ms", _refresh_ms())
    if request.GET.get("partial") == "1":
        return render(request, partial, context)
    return render(request, template, context)


def _page_number(request: HttpRequest) -> str:
    return request.GET.get("page") or "1"


# ------------------------------------------------------------------------------------------------
# Dashboard
# ------------------------------------------------------------------------------------------------
@login_required
def dashboard(request: HttpRequest) -> HttpResponse:
    context = page_selectors.dashboard_data(user=request.user)
    return _render(request, "workflows/dashboard.html", "workflows/partials/dashboard_live.html", context)


# ------------------------------------------------------------------------------------------------
# Workflows
# ------------------------------------------------------------------------------------------------
@login_required
def workflow_list(request: HttpRequest) -> HttpResponse:
    pool_names = list(Pool.objects.order_by("name").values_list("name", flat=True))
    form = WorkflowFilterForm(request.GET or None, pool_names=pool_names)
    queryset = page_selectors.workflow_page_list(
        user=request.user,
        status=form.value("status"),
        pool=form.value("pool"),
        username=form.value("user"),
        name=form.value("name"),
        sort=form.value("sort"),
    )
    page = Paginator(queryset, WORKFLOWS_PER_PAGE).get_page(_page_number(request))
    filtered = any(form.value(name) for name in ("status", "pool", "user", "name"))
    live_query = request.GET.copy()
    live_query["partial"] = "1"
    context = {"form": form, "page": page, "filtered": filtered, "live_query": live_query.urlencode()}
    return _render(request, "workflows/workflow_list.html", "workflows/partials/workflow_table.html", context)


def _group_rows(workflow: Workflow, groups: list[TaskGroup], key_pairs: list[tuple[str, str]]) -> list[dict[str, Any]]:
    rows = []
    for group in groups:
        tasks = list(group.tasks.all())
        task_info = {
            task.name: {"status": task.status, "node": task.node.name if task.node else "",
                        "colour": status_colour(task.status)}
            for task in tasks
        }
        report = group.placement_report or []
        rows.append(
            {
                "group": group,
                "tasks": [{"task": task, "domains": task_domains(task, key_pairs)} for task in tasks],
                "task_info": task_info,
                "report": report,
                "preferred": [item for item in report if item.get("requirement") == "preferred"],
                "waiting": bool(group.unschedulable_reason) and not group.is_terminal
                and group.status in ("SCHEDULING", "WAITING"),
                "gpu": sum(task.gpu for task in tasks),
            }
        )
    return rows


def _visible_workflow(request: HttpRequest, workflow_id: str) -> Workflow:
    return get_object_or_404(workflow_detail_queryset(user=request.user), workflow_id=workflow_id)


@login_required
def workflow_detail(request: HttpRequest, workflow_id: str) -> HttpResponse:
    workflow = _visible_workflow(request, workflow_id)
    keys = pool_keys(workflow.pool)
    key_pairs = [(key.key, key.label) for key in keys]
    groups = list(workflow.groups.all())
    rows = _group_rows(workflow, groups, key_pairs)
    transitions = list(workflow_transitions(workflow)[:HISTORY_LIMIT])
    context = {
        "workflow": workflow,
        "keys": [key.key for key in keys],
        "groups": rows,
        "waiting": [row for row in rows if row["waiting"]],
        "transitions": transitions,
        "history_truncated": len(transitions) == HISTORY_LIMIT,
        "placement": page_selectors.workflow_placement_map(workflow, groups, keys),
        "can_cancel": workflow.can_cancel()
        and (request.user.is_staff or workflow.submitted_by_id == request.user.pk),
        "task_count": sum(len(row["tasks"]) for row in rows),
    }
    return _render(request, "workflows/workflow_detail.html", "workflows/partials/workflow_live.html", context)


@login_required
@require_POST
def workflow_cancel(request: HttpRequest, workflow_id: str) -> HttpResponse:
    workflow = _visible_workflow(request, workflow_id)
    if not (request.user.is_staff or workflow.submitted_by_id == request.user.pk):
        raise Http404("Workflow not found.")
    try:
        from workflows.services import workflow_cancel as cancel

        cancel(workflow_id=workflow.workflow_id, user=request.user)
    except WorkflowNotCancellableError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Workflow {workflow.workflow_id} was cancelled.")
    return redirect("workflow-detail", workflow_id=workflow.workflow_id)


# ------------------------------------------------------------------------------------------------
# Pools
# ------------------------------------------------------------------------------------------------
@login_required
def pool_list(request: HttpRequest) -> HttpResponse:
    context = {"pools": page_selectors.pool_rows()}
    return _render(request, "workflows/pool_list.html", "workflows/partials/pool_table.html", context)


@login_required
def pool_detail(request: HttpRequest, name: str) -> HttpResponse:
    pool = pool_get(name=name)
    if pool is None:
        raise Http404("Pool not found.")
    keys = pool_keys(pool)
    heat = page_selectors.pool_heat_map(pool, keys, user=request.user)
    page = Paginator(page_selectors.pool_nodes_page_queryset(pool, keys), NODES_PER_PAGE).get_page(
        _page_number(request)
    )
    nodes = [
        {"node": node, "values": [getattr(node, f"v{index}") or "—" for index in range(len(keys))]}
        for node in page.object_list
    ]
    live_query = request.GET.copy()
    live_query["partial"] = "1"
    context = {
        "pool": pool,
        "keys": [key.key for key in keys],
        "heat": heat,
        "page": page,
        "nodes": nodes,
        "live_query": live_query.urlencode(),
    }
    return _render(request, "workflows/pool_detail.html", "workflows/partials/pool_live.html", context)


# ------------------------------------------------------------------------------------------------
# Submit
# ------------------------------------------------------------------------------------------------
def _examples() -> list[str]:
    return sorted(path.stem for path in EXAMPLES_DIR.glob("*.yaml"))


def _spec_errors(text: str, errors: list[dict[str, str]]) -> list[dict[str, Any]]:
    lines = text.splitlines()
    result = []
    for error in errors:
        path = error.get("path", "")
        line = yaml_line_for_path(text, path) if path and path != "pool" else None
        result.append(
            {
                "path": path or "(whole spec)",
                "message": error.get("message", ""),
                "line": line,
                "text": lines[line - 1] if line and line <= len(lines) else "",
            }
        )
    return result


def _preview_groups(pool_name: str, preview: dict[str, Any]) -> list[dict[str, Any]]:
    """The dry run's groups, with the domain values of every planned node (one query)."""
    pool = pool_get(name=pool_name)
    keys = pool_keys(pool) if pool else []
    names = {node for group in preview["groups"] for node in group["placement"]["tasks"].values()}
    labels = dict(Node.objects.filter(pool=pool, name__in=names).values_list("name", "labels")) if names else {}
    groups = []
    for group in preview["groups"]:
        placement = group["placement"]
        tasks = []
        for task, node in placement["tasks"].items():
            node_labels = labels.get(node) or {}
            tasks.append({"task": task, "node": node, "values": [node_labels.get(key.label, "—") for key in keys]})
        task_info = {row["task"]: {"status": "planned", "node": row["node"], "colour": "blue"} for row in tasks}
        groups.append({**group, "tasks": tasks, "task_info": task_info,
                       "preferred": [r for r in placement.get("report") or [] if r.get("requirement") == "preferred"]})
    return groups


@login_required
@require_http_methods(["GET", "POST"])
def submit(request: HttpRequest) -> HttpResponse:
    pool_names = list(Pool.objects.order_by("name").values_list("name", flat=True))
    context: dict[str, Any] = {"examples": _examples(), "pool_names": pool_names}
    if request.method == "GET":
        initial: dict[str, Any] = {"pool": request.GET.get("pool") or (pool_names[0] if pool_names else "")}
        example = request.GET.get("example", "")
        if example in context["examples"]:
            initial["spec"] = (EXAMPLES_DIR / f"{example}.yaml").read_text()
        context["form"] = WorkflowSubmitForm(initial=initial, pool_names=pool_names)
        return render(request, "workflows/submit.html", context)

    form = WorkflowSubmitForm(request.POST, request.FILES, pool_names=pool_names)
    context["form"] = form
    if not form.is_valid():
        return render(request, "workflows/submit.html", context, status=400)
    text = form.cleaned_data["spec"]
    if form.cleaned_data.get("spec_file") is not None:
        form.data = form.data.copy()
        form.data["spec"] = text  # show the uploaded text in the editor
    pool_name = form.cleaned_data["pool"]
    action = request.POST.get("action", "dry_run")
    context["spec_text"] = text
    try:
        if action == "submit":
            workflow, _created = workflow_submit(
                user=request.user, pool_name=pool_name, spec=text, priority=form.cleaned_data["priority"]
            )
            messages.success(request, f"Submitted {workflow.workflow_id} to pool {pool_name}.")
            return redirect("workflow-detail", workflow_id=workflow.workflow_id)
        preview = workflow_dry_run(pool_name=pool_name, spec=text)
    except (WorkflowSpecInvalidError, PoolNotFoundError) as exc:
        context["errors"] = _spec_errors(text, exc.details.get("errors", []))
        context["error_lines"] = sorted({e["line"] for e in context["errors"] if e["line"]})
        return render(request, "workflows/submit.html", context, status=400)
    context["preview"] = preview
    context["preview_groups"] = _preview_groups(pool_name, preview)
    context["pool_keys"] = [key.key for key in pool_keys(pool_get(name=pool_name))]
    return render(request, "workflows/submit.html", context)
