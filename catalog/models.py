"""Apps and their versions. An app's name is global (one app of a name, whoever owns it); each
update adds a version, and the versions before it are kept. Deleting a version keeps its row (its
number is never given again and ``osmo app info`` lists it as DELETED) but drops its spec."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models

from catalog.parameters import DESCRIPTION_MAX, NAME_MAX


class AppVersionStatus(models.TextChoices):
    READY = "READY", "ready"
    DELETED = "DELETED", "deleted"


class App(models.Model):
    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False,
                            help_text="Stays when the app is renamed: workflows started from it keep it.")
    name = models.CharField(max_length=NAME_MAX, unique=True)
    description = models.CharField(max_length=DESCRIPTION_MAX, blank=True)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="catalog_apps")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        verbose_name = "app"

    def __str__(self) -> str:
        return self.name


class AppVersion(models.Model):
    app = models.ForeignKey(App, on_delete=models.CASCADE, related_name="versions")
    version = models.PositiveIntegerField()
    spec_text = models.TextField(blank=True, help_text="The spec template as written (empty once deleted).")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    status = models.CharField(max_length=16, choices=AppVersionStatus.choices, default=AppVersionStatus.READY)

    class Meta:
        ordering = ["app", "version"]
        constraints = [models.UniqueConstraint(fields=["app", "version"], name="app_version_unique")]

    def __str__(self) -> str:
        return f"{self.app.name}:{self.version}"
