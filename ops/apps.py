from django.apps import AppConfig


class OpsConfig(AppConfig):
    """Operations: the probes (/healthz, /readyz) and the Prometheus scrape (/metrics). A top app beside
    pages: it reads both workflows and scheduler, and nothing below imports it."""

    name = "ops"
    verbose_name = "Operations"
