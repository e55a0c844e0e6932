"""Pools in the admin: topology keys, platforms, grants and team quotas inline, the hierarchy view
(:mod:`scheduler.admin`)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import QuerySet
from django.forms.models import BaseInlineFormSet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html

from osmo.errors import ValidationFailedError
from scheduler import selectors
from scheduler.inventory import KeySpec, sync_record_words, topology_keys_validate
from scheduler.models import (
    Pool,
    PoolGrant,
    PoolPlatform,
    TeamQuota,
    TopologyKey,
)
from scheduler.reads.domains import pool_domain_tree
from scheduler.services import pool_keys_set
from scheduler.services.access import pool_status_set, quotas_lock, quotas_total_validate
from scheduler.services.reservations import pool_capacity_changed, pool_epochs_bump

HIERARCHY_MACHINE_LIMIT = 2000


class TopologyKeyInlineFormSet(BaseInlineFormSet):
    """Validates the whole ordered key list at once (so positions can be swapped in one save) and
    hands it to the service instead of saving rows one by one."""

    ordered_keys: list[KeySpec]

    def clean(self) -> None:
        super().clean()
        if any(self.errors):
            return
        rows = []
        positions: set[int] = set()
        for form in self.forms:
            data = getattr(form, "cleaned_data", None)
            if not data or data.get("DELETE") or not data.get("key"):
                continue
            if data["position"] in positions:
                raise ValidationError(f"Two keys have position {data['position']}; positions must differ.")
            positions.add(data["position"])
            rows.append((data["position"], data["key"], data["label"]))
        rows.sort()
        specs, errors = topology_keys_validate([{"key": key, "label": label} for _pos, key, label in rows])
        if errors:
            raise ValidationError([f"{error['path']}: {error['message']}" for error in errors])
        self.ordered_keys = specs

    def save(self, commit: bool = True) -> list[Any]:
        # Rows are written by pool_keys_set (PoolAdmin.save_related); the admin's change message
        # still reads these attributes.
        self.new_objects, self.changed_objects, self.deleted_objects = [], [], []
        return []


class PoolPlatformInline(admin.TabularInline):
    """The pool's platforms (docs/spec.md): what a spec's resources may name, and what they allow."""

    model = PoolPlatform
    extra = 0
    fields = ("name", "node_selector", "tolerations", "allow_privileged", "allow_host_network", "host_mounts")


class TopologyKeyInline(admin.TabularInline):
    model = TopologyKey
    formset = TopologyKeyInlineFormSet
    fields = ("position", "key", "label")
    ordering = ("position",)
    extra = 1
    verbose_name = "topology key (coarsest first: position 0)"
    verbose_name_plural = "topology keys (coarsest first; edit position to reorder)"


class PoolGrantInline(admin.TabularInline):
    model = PoolGrant
    fields = ("team", "user")
    extra = 1
    verbose_name = "access grant (a team or a user; a pool without grants is open to everyone)"
    verbose_name_plural = "access grants (a pool without grants is open to everyone)"


class TeamQuotaInlineFormSet(BaseInlineFormSet):
    """The quotas of a pool may add up to at most its GPUs (docs/design.md §9)."""

    def clean(self) -> None:
        super().clean()
        if any(self.errors):
            return
        total = sum(
            form.cleaned_data.get("gpu") or 0
            for form in self.forms
            if getattr(form, "cleaned_data", None) and not form.cleaned_data.get("DELETE")
        )
        quotas_lock(self.instance)  # the admin's change view is one transaction: held until saved
        try:
            quotas_total_validate(pool=self.instance, total=total)
        except ValidationFailedError as exc:
            message = exc.details["errors"][0]["message"]
            raise ValidationError(f"{message[:1].upper()}{message[1:]}. Lower one of them.") from exc


class TeamQuotaInline(admin.TabularInline):
    model = TeamQuota
    formset = TeamQuotaInlineFormSet
    fields = ("team", "gpu")
    extra = 1
    verbose_name = "team quota (GPUs for the team's HIGH and NORMAL work; LOW work borrows beyond it)"
    verbose_name_plural = "team quotas (GPUs for HIGH and NORMAL work; no quota: the whole pool)"


@admin.register(Pool)
class PoolAdmin(admin.ModelAdmin):
    list_display = ("name", "status", "description", "backend_ref", "keys_display", "node_count", "gpu_display",
                    "hierarchy_link")
    list_filter = ("status",)
    search_fields = ("name", "description")
    readonly_fields = ("keys_version", "hierarchy_link", "k8s_synced_at", "k8s_sync_display", "created_at",
                       "updated_at")
    fields = (
        "name",
        "description",
        "status",
        "backend_ref",
        "sim_task_seconds",
        "max_retries",
        "k8s_namespace",
        "k8s_node_selector",
        "min_runtime",
        "fairshare_half_life",
        "browser_forwarding",
        "starvation_wait",
        "preemption_grace",
        "refuse_never_fits",
        "k8s_synced_at",
        "k8s_sync_display",
        "keys_version",
        "hierarchy_link",
        "created_at",
        "updated_at",
    )
    inlines = [TopologyKeyInline, PoolGrantInline, TeamQuotaInline, PoolPlatformInline]
    change_form_template = "admin/scheduler/pool/change_form.html"

    def get_queryset(self, request: HttpRequest) -> QuerySet[Pool]:
        return selectors.pool_list()

    def get_changelist_instance(self, request: HttpRequest) -> Any:
        changelist = super().get_changelist_instance(request)
        # One totals query for the whole page instead of one per row.
        totals = selectors.pools_totals(pool.pk for pool in changelist.result_list)
        for pool in changelist.result_list:
            pool.page_totals = totals[pool.pk]
        return changelist

    def _pool_totals(self, pool: Pool) -> selectors.Totals:
        totals = getattr(pool, "page_totals", None)
        return totals if totals is not None else selectors.pools_totals([pool.pk])[pool.pk]

    @admin.display(description="keys (coarsest first)")
    def keys_display(self, pool: Pool) -> str:
        return " > ".join(key.key for key in selectors.pool_keys(pool)) or "-"

    @admin.display(description="nodes")
    def node_count(self, pool: Pool) -> str:
        totals = self._pool_totals(pool)
        return f"{totals.node_count} ({totals.schedulable_node_count} schedulable)"

    @admin.display(description="GPU free / capacity")
    def gpu_display(self, pool: Pool) -> str:
        totals = self._pool_totals(pool)
        return f"{totals.free['gpu']} / {totals.capacity['gpu']}"

    @admin.display(description="last Kubernetes sync changed")
    def k8s_sync_display(self, pool: Pool) -> str:
        return sync_record_words(pool.k8s_sync) if pool.backend == "kubernetes" else "-"

    @admin.display(description="hierarchy")
    def hierarchy_link(self, pool: Pool) -> str:
        if pool.pk is None:
            return "-"
        url = reverse("admin:scheduler_pool_hierarchy", args=[pool.pk])
        return format_html('<a href="{}">View hierarchy</a>', url)

    def save_model(self, request: HttpRequest, obj: Pool, form: Any, change: bool) -> None:
        status = obj.status
        if change and "status" in form.changed_data:
            obj.status = Pool.objects.get(pk=obj.pk).status  # set through the service below (epochs)
        super().save_model(request, obj, form, change)
        if change and obj.status != status:
            obj.status = pool_status_set(pool=obj, status=status).status

    def save_related(self, request: HttpRequest, form: Any, formsets: list[Any], change: bool) -> None:
        form.save_m2m()
        for formset in formsets:
            if isinstance(formset, TeamQuotaInlineFormSet):
                self.save_formset(request, form, formset, change=change)
                if formset.has_changed():
                    pool_capacity_changed(form.instance.pk)  # more quota may let waiting work start
                continue
            if isinstance(formset, TopologyKeyInlineFormSet):
                formset.save()
                pool = form.instance
                changed = pool_keys_set(pool=pool, keys=formset.ordered_keys, new_pool=not change)
                if changed and change:
                    self.message_user(
                        request,
                        f"Topology keys of {pool.name} changed; keys_version is now {pool.keys_version}. Queued "
                        "groups that use a removed or reordered key will not be placed (they say why); running "
                        "ones keep going.",
                        level=messages.WARNING,
                    )
            else:
                self.save_formset(request, form, formset, change=change)
                if formset.model is PoolPlatform and formset.has_changed():
                    # submissions validate against cached pool facts keyed by the inventory epoch
                    pool_epochs_bump([form.instance.pk], inventory=True)

    def get_urls(self) -> list[Any]:
        custom = [
            path(
                "<path:object_id>/hierarchy/",
                self.admin_site.admin_view(self.hierarchy_view),
                name="scheduler_pool_hierarchy",
            )
        ]
        return custom + super().get_urls()

    def hierarchy_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        pool = get_object_or_404(selectors.pool_list(), pk=object_id)
        if not self.has_view_permission(request, pool):
            raise PermissionDenied
        keys = selectors.pool_keys(pool)
        every_machine = request.GET.get("machines") == "1"
        tree = pool_domain_tree(
            pool, keys=keys, machines=True, machine_limit=None if every_machine else HIERARCHY_MACHINE_LIMIT
        )
        context = {
            **self.admin_site.each_context(request),
            "title": f"Hierarchy of pool {pool.name}",
            "opts": self.model._meta,
            "original": pool,
            "pool": pool,
            "keys": keys,
            "root": tree.root,
            "show_machines": tree.machines_loaded,
            "machine_limit": HIERARCHY_MACHINE_LIMIT,
            "node_changelist_url": reverse("admin:scheduler_node_changelist"),
            "has_view_permission": True,
        }
        return TemplateResponse(request, "admin/scheduler/pool/hierarchy.html", context)
