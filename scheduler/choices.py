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


class BackendStatus(models.TextChoices):
    """Whether a backend's cluster answers (docs/design.md §6, "Backends")."""

    ONLINE = "ONLINE", "Online: its syncs succeed"
    OFFLINE = "OFFLINE", "Offline: its last sync failed; its pools place nothing"
    MAINTENANCE = "MAINTENANCE", "Maintenance (set by an admin): its pools place nothing"


#: The backends every service has, named as their kinds (``kubernetes`` is the cluster of the worker
#: processes' environment: KUBECONFIG, OSMO_K8S_CONTEXT, OSMO_K8S_IN_CLUSTER).
BUILTIN_BACKENDS = ("simulated", "kubernetes", "local")
