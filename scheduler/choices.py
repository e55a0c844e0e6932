from django.db import models


class DispatchBackend(models.TextChoices):
    SIMULATED = "simulated", "Simulated (no process runs)"
    KUBERNETES = "kubernetes", "Kubernetes"
    LOCAL = "local", "Local (sandboxed processes on this machine)"


class PoolStatus(models.TextChoices):
    """What a pool does with new and queued work (docs/design.md §9)."""

    ONLINE = "ONLINE", "Online: accepts submissions and places work"
    OFFLINE = "OFFLINE", "Offline: accepts submissions, places nothing"
    MAINTENANCE = "MAINTENANCE", "Maintenance: refuses submissions, places nothing"
