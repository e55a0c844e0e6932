"""Nodes in the admin: capacity and use columns, a filter per topology key, search, cordon and
uncordon (:mod:`scheduler.admin`)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import Q, QuerySet
from django.http import HttpRequest
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe

from scheduler import selectors
from scheduler.forms import NodeAdminForm
from scheduler.models import (
    Node,
    TopologyKey,
)
from scheduler.resources import RESOURCES
from scheduler.services import nodes_set_schedulable
from scheduler.services.reservations import pool_capacity_changed, pool_epochs_bump

GIB = 1024**3
MAX_FILTER_CHOICES = 60


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
