"""``manage.py backends_rotate``: every backend's stored kubeconfig encrypted again with the first key of
``OSMO_CREDENTIALS_KEYS`` (the credentials' ``credentials_rotate`` for the backends)."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from scheduler.services.backends import backends_rotate


class Command(BaseCommand):
    help = ("Encrypt every backend's stored kubeconfig again with the first key of OSMO_CREDENTIALS_KEYS (run "
            "after credentials_rotate when rotating keys; the connection itself does not change).")

    def handle(self, *args, **options) -> None:
        self.stdout.write(f"{backends_rotate()} backend kubeconfig(s) encrypted with the first key")
