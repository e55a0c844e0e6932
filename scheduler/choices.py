from django.db import models


class DispatchBackend(models.TextChoices):
    SIMULATED = "simulated", "Simulated (no process runs)"
    KUBERNETES = "kubernetes", "Kubernetes"
