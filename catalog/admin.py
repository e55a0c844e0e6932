"""Apps in the admin: find one, see its versions and their specs, change its description or owner,
mark versions deleted. Versions are added through the API (osmo app update), where the spec is checked."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from catalog.models import App, AppVersion, AppVersionStatus
from catalog.services import app_queryset


class AppVersionInline(admin.TabularInline):
    model = AppVersion
    fields = readonly_fields = ("version", "status", "created_by", "created_at", "spec_text")
    extra = 0
    can_delete = False
    ordering = ("-version",)

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(App)
class AppAdmin(admin.ModelAdmin):
    list_display = ("name", "owner", "description", "latest_version", "created_at")
    search_fields = ("name", "description", "owner__username")
    list_select_related = ("owner",)
    fields = ("name", "uuid", "description", "owner", "created_at")
    readonly_fields = ("name", "uuid", "created_at")
    raw_id_fields = ("owner",)
    inlines = [AppVersionInline]
    actions = ["delete_all_versions"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[App]:
        return app_queryset()

    @admin.display(description="latest version", ordering="latest_version")
    def latest_version(self, app: App) -> int | None:
        return getattr(app, "latest_version", None)

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # an app starts with a checked spec: osmo app create

    @admin.action(description="Delete every version (the apps keep their names)")
    def delete_all_versions(self, request: HttpRequest, queryset: QuerySet[App]) -> None:
        count = AppVersion.objects.filter(app__in=queryset.values("pk")).exclude(
            status=AppVersionStatus.DELETED).update(status=AppVersionStatus.DELETED, spec_text="")
        self.message_user(request, f"{count} version(s) deleted.", messages.SUCCESS)
