"""The apps pages: the list of apps, and one app with its versions, parameters, spec and a form
that launches it (through :func:`catalog.services.app_submit`, the workflow submission path)."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from catalog.parameters import value_from_text
from catalog.services import AppNotFoundError, AppVersionDeletedError, app_list, app_show, app_submit
from osmo.errors import OsmoError
from osmo.types import signed_in
from pages.app_forms import AppLaunchForm, AppListForm
from pages.links import workflow_url
from pages.viewmodels.apps import app_page_build
from scheduler.selectors import pool_names

APPS_PER_PAGE = 25


@login_required
def apps(request: HttpRequest) -> HttpResponse:
    form = AppListForm(request.GET or None)
    mine = form.value("scope") != "all"
    queryset = app_list(viewer=request.user, name=form.value("name") or None, all_users=not mine)
    page = Paginator(queryset, APPS_PER_PAGE).get_page(request.GET.get("page") or "1")
    return render(request, "pages/app_list.html", {"form": form, "page": page, "mine": mine})


def _version(request: HttpRequest) -> int | None:
    raw = request.GET.get("version") or request.POST.get("version") or ""
    return int(raw) if raw.isdigit() and int(raw) > 0 else None


@login_required
@require_http_methods(["GET", "POST"])
def app_detail(request: HttpRequest, name: str) -> HttpResponse:
    try:
        shown = app_show(name, version=_version(request))
    except (AppNotFoundError, AppVersionDeletedError) as exc:
        raise Http404(exc.message) from exc
    user = signed_in(request)
    view = app_page_build(shown, may_change=user.is_staff or shown.app.owner_id == user.pk)
    names = pool_names(user=request.user)
    context: dict[str, Any] = {"page": view, "pool_names": names}
    if request.method == "GET":
        context["form"] = AppLaunchForm(fields=view.fields, pool_names=names,
                                        initial={"pool": names[0] if names else ""})
        return render(request, "pages/app_detail.html", context)
    form = AppLaunchForm(request.POST, fields=view.fields, pool_names=names)
    context["form"] = form
    if not form.is_valid():
        return render(request, "pages/app_detail.html", context, status=400)
    # Only the values changed from their defaults are sent: an unchanged one keeps its default's type.
    values = {field.name: value_from_text(form.cleaned_data[f"param_{field.name}"]) for field in view.fields
              if field.editable and form.cleaned_data[f"param_{field.name}"] != field.default_text}
    dry_run = request.POST.get("action") == "dry_run"
    try:
        submission = app_submit(user=user, name=shown.app.name, version=shown.version.version, values=values,
                                pool_name=form.cleaned_data["pool"], priority=form.cleaned_data["priority"],
                                dry_run=dry_run)
    except OsmoError as exc:
        context["errors"] = exc.details.get("errors") or [{"path": "", "message": exc.message}]
        context["error_message"] = exc.message
        return render(request, "pages/app_detail.html", context, status=exc.http_status)
    if submission.dry_run is not None:
        context["dry_run"] = submission.dry_run
        return render(request, "pages/app_detail.html", context)
    assert submission.workflow is not None
    workflow = submission.workflow
    messages.success(request, f"Started {workflow.workflow_id} from app {shown.app.name} version "
                              f"{shown.version.version} in pool {workflow.pool.name}.")
    return redirect(workflow_url(workflow.workflow_id, user.get_username(), viewer=user.get_username()))
