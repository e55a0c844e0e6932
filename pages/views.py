"""Server-rendered status pages: thin function views over the view models of ``pages.viewmodels``.

Every page that refreshes itself renders a *partial* template when asked with ``?partial=1``; the
page's ``static/osmo/live.js`` fetches that fragment every few seconds and swaps it in (no full
reload, no build step, nothing downloaded from a CDN).
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from osmo import config as osmo_config
from osmo.errors import OsmoError
from osmo.types import signed_in
from pages.forms import WorkflowFilterForm, WorkflowSubmitForm
from pages.links import workflow_url
from pages.viewmodels.dashboard import dashboard_build
from pages.viewmodels.pools import pool_detail_build, pool_rows
from pages.viewmodels.submit import dry_run_build, spec_error_rows, spec_errors, submit_example_text, submit_examples
from pages.viewmodels.tasks import task_detail_build
from pages.viewmodels.workflows import workflow_detail_build, workflow_page_list, workflow_user_may_cancel
from scheduler.selectors import pool_get, pool_names
from scheduler.selectors import pool_list as scheduler_pool_list
from scheduler.services.access import pool_accessible, pools_visible
from workflows.errors import (
    PoolNotFoundError,
    WorkflowAmbiguousError,
    WorkflowNotCancellableError,
    WorkflowNotFoundError,
    WorkflowSpecInvalidError,
)
from workflows.models import Workflow
from workflows.scheduling.observe import task_log
from workflows.selectors import tag_names, workflow_by_id, workflow_detail_queryset
from workflows.services import workflow_cancel as workflow_cancel_service
from workflows.services import workflow_submit

WORKFLOWS_PER_PAGE = 25
#: The log download asks the backend for this many lines: the whole log, within the backend's byte
#: limit (scheduler.dispatch.base.LOG_READ_MAX_BYTES: the last 64 MiB of a longer one).
LOG_DOWNLOAD_LINES = 10_000_000


def _refresh_ms() -> int:
    return int(osmo_config.web().page_refresh_ms)


def _fields(view_model: Any) -> dict[str, Any]:
    """A view model's fields as template variables (shallow: the values are not copied)."""
    return {field.name: getattr(view_model, field.name) for field in fields(view_model)}


def _render(request: HttpRequest, template: str, partial: str, context: dict[str, Any]) -> HttpResponse:
    """The whole page, or only its live fragment when the poller asks (``?partial=1``)."""
    context.setdefault("refresh_ms", _refresh_ms())
    if request.GET.get("partial") == "1":
        return render(request, partial, context)
    return render(request, template, context)


def _page_number(request: HttpRequest) -> str:
    return request.GET.get("page") or "1"


def _live_query(request: HttpRequest) -> str:
    """The page's own query string plus ``partial=1``: what the poller fetches (filters and page kept)."""
    query = request.GET.copy()
    query["partial"] = "1"
    return query.urlencode()


# ------------------------------------------------------------------------------------------------
# Dashboard
# ------------------------------------------------------------------------------------------------
@login_required
def dashboard(request: HttpRequest) -> HttpResponse:
    context = _fields(dashboard_build(user=request.user))
    return _render(request, "pages/dashboard.html", "pages/partials/dashboard_live.html", context)


# ------------------------------------------------------------------------------------------------
# Workflows
# ------------------------------------------------------------------------------------------------
@login_required
def workflow_list(request: HttpRequest) -> HttpResponse:
    form = WorkflowFilterForm(request.GET or None, pool_names=pool_names(user=request.user), tag_names=tag_names())
    queryset = workflow_page_list(
        user=request.user,
        status=form.value("status"),
        pool=form.value("pool"),
        username=form.value("user"),
        name=form.value("name"),
        sort=form.value("sort"),
        labels=form.selectors(form.value("label")),
        tag=form.value("tag"),
    )
    if form.is_bound and not form.is_valid():
        queryset = queryset.none()  # a filter that does not parse matches nothing (its error says why)
    context = {
        "form": form,
        "page": Paginator(queryset, WORKFLOWS_PER_PAGE).get_page(_page_number(request)),
        "filtered": any(form.value(name) for name in ("status", "pool", "user", "name", "label", "tag"))
        or (form.is_bound and not form.is_valid()),
        "live_query": _live_query(request),
    }
    return _render(request, "pages/workflow_list.html", "pages/partials/workflow_table.html", context)


def _visible_workflow(request: HttpRequest, workflow_id: str) -> Workflow:
    """The workflow the page names: ``?user=`` picks the owner's when several visible workflows share
    the id (docs/design.md §7, "Workflow ids"); an id that stays ambiguous answers 404 here, the page
    links always name the owner when it is not the viewer."""
    try:
        return workflow_by_id(workflow_detail_queryset(user=request.user), workflow_id, viewer=request.user,
                              owner=request.GET.get("user") or None)
    except (WorkflowNotFoundError, WorkflowAmbiguousError) as exc:
        raise Http404(str(exc)) from exc


@login_required
def workflow_detail(request: HttpRequest, workflow_id: str) -> HttpResponse:
    workflow = _visible_workflow(request, workflow_id)
    context = _fields(workflow_detail_build(workflow, user=request.user))
    return _render(request, "pages/workflow_detail.html", "pages/partials/workflow_live.html", context)


@login_required
def task_detail(request: HttpRequest, workflow_id: str, task: str) -> HttpResponse:
    workflow = _visible_workflow(request, workflow_id)
    context = _fields(task_detail_build(workflow, task, user=request.user))
    return _render(request, "pages/task_detail.html", "pages/partials/task_live.html", context)


@login_required
def task_log_download(request: HttpRequest, workflow_id: str, task: str) -> HttpResponse:
    """The task's whole log as a text file (the page shows and follows its last lines)."""
    workflow = _visible_workflow(request, workflow_id)
    if not workflow.tasks.filter(name=task).exists():
        raise Http404("Task not found.")
    try:
        answer = task_log(workflow, task_name=task, tail=LOG_DOWNLOAD_LINES)
    except OsmoError as exc:  # not started yet, its pod gone, the backend unreachable: the API's words
        return HttpResponse(exc.message + "\n", status=exc.http_status, content_type="text/plain; charset=utf-8")
    text = "".join(line + "\n" for line in answer["lines"])
    response = HttpResponse(text, content_type="text/plain; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{workflow.workflow_id}-{task}.log"'
    response["X-Log-Truncated"] = "true" if answer["truncated"] else "false"
    return response


@login_required
@require_POST
def workflow_cancel(request: HttpRequest, workflow_id: str) -> HttpResponse:
    workflow = _visible_workflow(request, workflow_id)
    if not workflow_user_may_cancel(workflow, request.user):
        raise Http404("Workflow not found.")
    try:
        workflow_cancel_service(workflow_pk=workflow.pk, user=signed_in(request))
    except WorkflowNotCancellableError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Workflow {workflow.workflow_id} was cancelled.")
    return redirect(workflow_url(workflow.workflow_id, workflow.submitted_by.get_username(),
                                 viewer=request.user.get_username()))


# ------------------------------------------------------------------------------------------------
# Pools
# ------------------------------------------------------------------------------------------------
@login_required
def pool_list(request: HttpRequest) -> HttpResponse:
    context = {"pools": pool_rows(pools_visible(scheduler_pool_list(), user=request.user))}
    return _render(request, "pages/pool_list.html", "pages/partials/pool_table.html", context)


@login_required
def backend_list(request: HttpRequest) -> HttpResponse:
    """Every backend with its status, last contact, the pools the viewer may see on it and their nodes."""
    from django.db.models import Count, Prefetch, Q

    from scheduler.models import Backend

    visible = pools_visible(scheduler_pool_list(), user=request.user)
    backends = (Backend.objects.order_by("name")
                .annotate(node_count=Count("pools__nodes", filter=Q(pools__in=visible.values("pk"))))
                .prefetch_related(Prefetch("pools", queryset=visible, to_attr="visible_pools")))
    return render(request, "pages/backend_list.html", {"backends": backends})


@login_required
def pool_detail(request: HttpRequest, name: str) -> HttpResponse:
    pool = pool_get(name=name)
    if pool is None:
        raise Http404("Pool not found.")
    if not pool_accessible(pool, user=request.user):
        raise PermissionDenied(f"You have no access to pool {pool.name}: ask an administrator to grant it to you or "
                               "your team.")
    context = _fields(pool_detail_build(pool, user=request.user, page_number=_page_number(request)))
    context["live_query"] = _live_query(request)
    return _render(request, "pages/pool_detail.html", "pages/partials/pool_live.html", context)


# ------------------------------------------------------------------------------------------------
# Submit
# ------------------------------------------------------------------------------------------------
@login_required
@require_http_methods(["GET", "POST"])
def submit(request: HttpRequest) -> HttpResponse:
    names = pool_names(user=request.user)
    context: dict[str, Any] = {"examples": submit_examples(), "pool_names": names}
    if request.method == "GET":
        initial: dict[str, Any] = {"pool": request.GET.get("pool") or (names[0] if names else "")}
        example = submit_example_text(request.GET.get("example", ""))
        if example is not None:
            initial["spec"] = example
        context["form"] = WorkflowSubmitForm(initial=initial, pool_names=names)
        return render(request, "pages/submit.html", context)

    form = WorkflowSubmitForm(request.POST, request.FILES, pool_names=names)
    context["form"] = form
    if not form.is_valid():
        return render(request, "pages/submit.html", context, status=400)
    text = form.cleaned_data["spec"]
    if form.cleaned_data.get("spec_file") is not None:
        data = form.data.copy()  # type: ignore[attr-defined]  # a QueryDict: the POST the form was bound to
        data["spec"] = text  # show the uploaded text in the editor
        form.data = data
    pool_name = form.cleaned_data["pool"]
    try:
        if request.POST.get("action", "dry_run") == "submit":
            workflow, _created = workflow_submit(
                user=signed_in(request), pool_name=pool_name, spec=text, priority=form.cleaned_data["priority"]
            )
            messages.success(request, f"Submitted {workflow.workflow_id} to pool {pool_name}.")
            return redirect("workflow-detail", workflow_id=workflow.workflow_id)
        context.update(_fields(dry_run_build(pool_name=pool_name, spec=text, user=request.user,
                                             priority=form.cleaned_data["priority"])))
    except (WorkflowSpecInvalidError, PoolNotFoundError) as exc:
        found = spec_errors(text, exc.details.get("errors", []))
        context.update(errors=found.rows, problems=found.problems, errors_hidden=found.hidden)
        return render(request, "pages/submit.html", context, status=400)
    except OsmoError as exc:  # no access, maintenance, a team to choose: one line, the API's words
        context["errors"] = spec_error_rows(text, [{"path": "pool", "message": exc.message}])
        context["problems"] = 1
        return render(request, "pages/submit.html", context, status=exc.http_status)
    return render(request, "pages/submit.html", context)
