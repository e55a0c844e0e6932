"""Backends, reservations and worker heartbeats in the admin (:mod:`scheduler.admin`)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest

from osmo.errors import ValidationFailedError
from scheduler.choices import BUILTIN_BACKENDS
from scheduler.models import (
    Backend,
    Reservation,
    WorkerHeartbeat,
)


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
