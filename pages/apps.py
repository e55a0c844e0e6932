from django.apps import AppConfig


class PagesConfig(AppConfig):
    """The server-rendered status pages: the top app, reading workflows and scheduler."""

    name = "pages"
    verbose_name = "Status pages"
