"""Personal access tokens and API keys in the admin: who has which, until when; an admin revokes one by
deleting it. Keys are never here (only their digests are stored), so a token is made by its user
(``osmo token set``) and an API key by ``manage.py drf_create_token``, not in the admin. Credentials
are not in the admin at all: their values are their owners' (docs/design.md §15)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from credentials.models import AccessToken, ApiKey


@admin.register(AccessToken)
class AccessTokenAdmin(admin.ModelAdmin):
    list_display = ("name", "user", "expires_at", "created_at", "description")
    list_filter = ("expires_at",)
    search_fields = ("name", "user__username", "description")
    list_select_related = ("user",)
    fields = ("user", "name", "description", "expires_at", "created_at")
    readonly_fields = ("user", "name", "created_at")

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    list_display = ("user", "created_at")
    search_fields = ("user__username",)
    list_select_related = ("user",)
    fields = ("user", "created_at")
    readonly_fields = ("user", "created_at")

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
