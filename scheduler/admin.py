"""Admin for pools, their topology keys and nodes.

- Pools: keys inline in order (edit ``position`` to reorder); saving goes through
  :func:`scheduler.services.pools.pool_keys_set`, so a change bumps ``keys_version``. A read-only
  hierarchy view (zone > ... > nodes, GPU totals per domain: :func:`scheduler.reads.domains.pool_domain_tree`,
  the tree the status pages draw too) is linked from the pool's page.
- Nodes: capacity/used/reserved/free columns from the one free-capacity query
  (:func:`scheduler.selectors.node_queryset_with_usage`), a filter per topology key of the selected
  pool, search by name, by any label value, or by ``key=value`` (``rack=rack-0003``), and cordon/uncordon.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import Q, QuerySet
from django.forms.models import BaseInlineFormSet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe

from osmo.errors import ValidationFailedError
from scheduler import selectors
from scheduler.choices import BUILTIN_BACKENDS
from scheduler.forms import NodeAdminForm
from scheduler.inventory import KeySpec, sync_record_words, topology_keys_validate
from scheduler.models import (
    Backend,
    Node,
    Pool,
    PoolGrant,
    PoolPlatform,
    Reservation,
    TeamQuota,
    TopologyKey,
    WorkerHeartbeat,
)
from scheduler.reads.domains import pool_domain_tree
from scheduler.resources import RESOURCES
from scheduler.services import nodes_set_schedulable, pool_keys_set
from scheduler.services.access import pool_status_set, quotas_lock, quotas_total_validate
from scheduler.services.reservations import pool_capacity_changed, pool_epochs_bump

GIB = 1024**3
MAX_FILTER_CHOICES = 60
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


def _topology_filter(key: TopologyKey) -> type[admin.SimpleListFilter]:
    """A list filter on one topology key's label value (the pool's keys are only known per request)."""

    class TopologyKeyFilter(admin.SimpleListFilter):
        title = f"{key.key} ({key.label})"
        parameter_name = f"topology_{key.key}"

        def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
            values = (
                Node.objects.filter(pool_id=key.pool_id)
                .annotate(value=selectors.label_text(key.label))
                .exclude(value__isnull=True)
                .order_by("value")
                .values_list("value", flat=True)
                .distinct()[:MAX_FILTER_CHOICES]
            )
            return [(value, value) for value in values]

        def queryset(self, request: HttpRequest, queryset: QuerySet[Node]) -> QuerySet[Node]:
            if self.value() is None:
                return queryset
            return queryset.alias(**{self.parameter_name: selectors.label_text(key.label)}).filter(
                **{self.parameter_name: self.value()}
            )

    return TopologyKeyFilter


@admin.action(description="Cordon selected nodes (no new tasks; running ones keep going)")
def cordon_nodes(modeladmin: NodeAdmin, request: HttpRequest, queryset: QuerySet[Node]) -> None:
    count = nodes_set_schedulable(node_ids=queryset.values_list("pk", flat=True), schedulable=False)
    modeladmin.message_user(request, f"Cordoned {count} node(s).", level=messages.SUCCESS)


@admin.action(description="Uncordon selected nodes")
def uncordon_nodes(modeladmin: NodeAdmin, request: HttpRequest, queryset: QuerySet[Node]) -> None:
    count = nodes_set_schedulable(node_ids=queryset.values_list("pk", flat=True), schedulable=True)
    modeladmin.message_user(request, f"Uncordoned {count} node(s).", level=messages.SUCCESS)


@admin.register(Node)
class NodeAdmin(admin.ModelAdmin):
    list_display = (
        "name",
        "pool",
        "schedulable",
        "domains_display",
        "gpu",
        "used_gpu",
        "reserved_gpu_display",
        "free_gpu_display",
        "free_cpu_display",
        "free_memory_display",
    )
    list_filter = ("pool", "schedulable")
    list_select_related = ("pool",)
    search_fields = ("name",)
    search_help_text = "Node name, any label value, or key=value (e.g. rack=rack-0003 or a full label key)."
    actions = [cordon_nodes, uncordon_nodes]
    form = NodeAdminForm  # quantities as 512Gi / 500m, labels as key/value rows (scheduler/forms.py)
    readonly_fields = ("created_at", "updated_at", "usage_display")
    list_per_page = 100
    fields = (
        "pool",
        "name",
        "labels",
        "schedulable",
        *((r.capacity_field, r.used_field) for r in RESOURCES),
        "usage_display",
        "created_at",
        "updated_at",
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet[Node]:
        return selectors.node_queryset_with_usage().select_related("pool")

    # An edit here writes the row directly, so the pools' epochs are moved on here (a cycle is asked
    # for: a node may have grown); what is cached by the inventory epoch is read again.
    def save_model(self, request: HttpRequest, obj: Node, form: Any, change: bool) -> None:
        before = Node.objects.filter(pk=obj.pk).values_list("pool_id", flat=True).first() if change else None
        super().save_model(request, obj, form, change)
        pool_capacity_changed(obj.pool_id)
        if before is not None and before != obj.pool_id:
            pool_epochs_bump([before], inventory=True)

    def delete_model(self, request: HttpRequest, obj: Node) -> None:
        super().delete_model(request, obj)
        pool_epochs_bump([obj.pool_id], inventory=True)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Node]) -> None:
        pool_ids = sorted(set(queryset.values_list("pool_id", flat=True)))
        super().delete_queryset(request, queryset)
        pool_epochs_bump(pool_ids, inventory=True)

    def _selected_pool_keys(self, request: HttpRequest) -> list[TopologyKey]:
        if not hasattr(request, "_osmo_pool_keys"):
            pool_id = request.GET.get("pool__id__exact")
            keys: list[TopologyKey] = []
            if pool_id and pool_id.isdigit():
                keys = list(TopologyKey.objects.filter(pool_id=int(pool_id)).order_by("position"))
            request._osmo_pool_keys = keys  # type: ignore[attr-defined]
        return request._osmo_pool_keys  # type: ignore[attr-defined]

    def get_list_filter(self, request: HttpRequest) -> list[Any]:
        return [*self.list_filter, *(_topology_filter(key) for key in self._selected_pool_keys(request))]

    def get_search_results(self, request: HttpRequest, queryset: QuerySet[Node], search_term: str) -> Any:
        for index, term in enumerate(search_term.split()):
            if "=" in term:
                name, _sep, value = term.partition("=")
                labels = set(TopologyKey.objects.filter(key=name).values_list("label", flat=True)) or {name}
                condition = Q()
                for label_index, label in enumerate(sorted(labels)):
                    alias = f"search_{index}_{label_index}"
                    queryset = queryset.alias(**{alias: selectors.label_text(label)})
                    condition |= Q(**{alias: value})
            else:
                condition = Q(name__icontains=term) | Q(labels__icontains=term)
            queryset = queryset.filter(condition)
        return queryset, False

    @admin.display(description="domains")
    def domains_display(self, node: Node) -> str:
        keys = self._keys_for_pool(node)
        values = [node.labels.get(key.label, "—") for key in keys]
        return " / ".join(values) if values else "-"

    def _keys_for_pool(self, node: Node) -> list[TopologyKey]:
        keys = getattr(node, "page_keys", None)
        if keys is None:
            keys = list(TopologyKey.objects.filter(pool_id=node.pool_id).order_by("position"))
        return keys

    def get_changelist_instance(self, request: HttpRequest) -> Any:
        changelist = super().get_changelist_instance(request)
        # One query for the keys of every pool on the page, not one per row.
        pool_ids = {node.pool_id for node in changelist.result_list}
        keys: dict[int, list[TopologyKey]] = {pool_id: [] for pool_id in pool_ids}
        for key in TopologyKey.objects.filter(pool_id__in=pool_ids).order_by("pool_id", "position"):
            keys[key.pool_id].append(key)
        for node in changelist.result_list:
            node.page_keys = keys[node.pool_id]
        return changelist

    @admin.display(description="GPU reserved", ordering="reserved_gpu")
    def reserved_gpu_display(self, node: Node) -> int:
        return node.reserved_gpu  # type: ignore[attr-defined]  # annotated by the changelist queryset

    @admin.display(description="GPU free", ordering="free_gpu")
    def free_gpu_display(self, node: Node) -> int:
        return node.free_gpu  # type: ignore[attr-defined]  # annotated by the changelist queryset

    @admin.display(description="CPU free (cores)", ordering="free_cpu_millis")
    def free_cpu_display(self, node: Node) -> str:
        return f"{node.free_cpu_millis / 1000:g}"  # type: ignore[attr-defined]  # annotated by the changelist

    @admin.display(description="memory free (GiB)", ordering="free_memory_bytes")
    def free_memory_display(self, node: Node) -> str:
        return f"{node.free_memory_bytes / GIB:.1f}"  # type: ignore[attr-defined]  # annotated by the changelist

    @admin.display(description="usage")
    def usage_display(self, node: Node) -> str:
        if node.pk is None:
            return "-"
        fresh = selectors.node_queryset_with_usage().get(pk=node.pk)
        usage = selectors.node_usage_dict(fresh)
        rows = [
            format_html(
                "<tr><th>{}</th><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                name,
                usage["capacity"][name],
                usage["used"][name],
                usage["reserved"][name],
                usage["free"][name],
            )
            for name in selectors.RESOURCE_API_NAMES
        ]
        header = mark_safe("<tr><th></th><th>capacity</th><th>used</th><th>reserved</th><th>free</th></tr>")
        return format_html("<table>{}{}</table>", header, format_html_join("", "{}", ((row,) for row in rows)))


@admin.register(Reservation)
class ReservationAdmin(admin.ModelAdmin):
    list_display = ("task_id", "node", "node_name", "pool", "team", "preemptible", "gpu", "cpu_millis",
                    "memory_bytes", "created_at", "released_at")
    list_filter = ("pool", "preemptible", ("released_at", admin.EmptyFieldListFilter))
    list_select_related = ("node", "pool", "team")
    search_fields = ("node_name",)
    raw_id_fields = ("node",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(WorkerHeartbeat)
class WorkerHeartbeatAdmin(admin.ModelAdmin):
    list_display = ("hostname", "token", "at")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


class BackendAdminForm(forms.ModelForm):
    """A backend's fields, and its kubeconfig as a file or pasted text: written only (the stored one is
    never shown back), replacing the stored one whole, checked with the client before anything is saved."""

    kubeconfig_file = forms.FileField(required=False, label="Replace the kubeconfig (file)")
    kubeconfig_text = forms.CharField(required=False, label="Replace the kubeconfig (text)",
                                      widget=forms.Textarea(attrs={"rows": 6, "autocomplete": "off"}))

    class Meta:
        model = Backend
        fields = ["name", "kind", "description", "status", "in_cluster", "context", "namespace", "scheduler_name",
                  "node_conditions", "tolerated_taints", "dashboard_links"]

    def clean(self) -> dict[str, Any]:
        from scheduler.services.backends import kubeconfig_check, kubeconfig_open

        cleaned = super().clean() or {}
        upload = cleaned.get("kubeconfig_file")
        text = cleaned.get("kubeconfig_text") or ""
        if upload is not None:
            try:
                text = upload.read().decode("utf-8")
            except UnicodeDecodeError:
                self.add_error("kubeconfig_file", "The kubeconfig is not UTF-8 text.")
                return cleaned
        self.new_kubeconfig = text or None
        context = cleaned.get("context") or ""
        name = cleaned.get("name") or self.instance.name
        if name in BUILTIN_BACKENDS and (self.new_kubeconfig is not None or cleaned.get("in_cluster")):
            self.add_error("kubeconfig_text", f"The built-in backend {name!r} reads the worker processes' "
                           "environment; make a backend of another name for this connection.")
            return cleaned
        try:
            if self.new_kubeconfig is not None:
                kubeconfig_check(self.new_kubeconfig, context=context)
            elif self.instance.pk and self.instance.kubeconfig_sealed and "context" in self.changed_data:
                kubeconfig_check(kubeconfig_open(self.instance), context=context)
        except ValidationFailedError as exc:
            for error in exc.details["errors"]:
                field = "kubeconfig_text" if error["path"] == "kubeconfig" else error["path"]
                self.add_error(field if field in self.fields else None, error["message"])
        if self.instance.pk and "kind" in self.changed_data and self.instance.pools.exists():
            self.add_error("kind", "The backend has pools; its kind cannot change.")
        return cleaned


@admin.register(Backend)
class BackendAdmin(admin.ModelAdmin):
    form = BackendAdminForm
    list_display = ("name", "kind", "status", "last_contact", "pool_count", "description")
    list_filter = ("kind", "status")
    search_fields = ("name", "description")
    readonly_fields = ("connection_display", "kubeconfig_version", "last_contact", "offline_since", "last_error",
                       "permission_error",
                       "created_at", "updated_at")

    def get_readonly_fields(self, request: HttpRequest, obj: Backend | None = None) -> Any:
        # The sealed kubeconfig is bound to the name, and the built-in names are what documents say.
        return (*self.readonly_fields, "name") if obj is not None else self.readonly_fields

    @admin.display(description="pools")
    def pool_count(self, backend: Backend) -> int:
        return backend.pools.count()

    @admin.display(description="connection")
    def connection_display(self, backend: Backend) -> str:
        if backend.kind != "kubernetes":
            return "-"
        if backend.in_cluster:
            return "in-cluster service account"
        if backend.kubeconfig_sealed:
            return f"kubeconfig stored, encrypted (version {backend.kubeconfig_version}); upload one to replace it"
        return "the worker processes' environment (KUBECONFIG, OSMO_K8S_CONTEXT)"

    def save_model(self, request: HttpRequest, obj: Backend, form: Any, change: bool) -> None:
        from scheduler.services.backends import kubeconfig_seal

        new = getattr(form, "new_kubeconfig", None)
        if new is not None:
            obj.kubeconfig_sealed = kubeconfig_seal(name=obj.name, text=new)
            obj.in_cluster = False
        elif obj.in_cluster:
            obj.kubeconfig_sealed = ""
        if new is not None or {"in_cluster", "context", "name"} & set(form.changed_data):
            obj.kubeconfig_version += 1
            obj.permission_error = ""
        super().save_model(request, obj, form, change)

    def delete_model(self, request: HttpRequest, obj: Backend) -> None:
        from scheduler.services.backends import backend_delete

        backend_delete(name=obj.name)
