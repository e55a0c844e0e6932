"""``manage.py credentials_rotate``: encrypt every stored credential with the first key of
OSMO_CREDENTIALS_KEYS, so an old key can be dropped afterwards (docs/operations.md "Credentials")."""

from typing import Any

from django.core.management.base import BaseCommand

from credentials.services import credentials_rotate


class Command(BaseCommand):
    help = "Re-encrypt every stored credential with the first key of OSMO_CREDENTIALS_KEYS."

    def handle(self, *args: Any, **options: Any) -> None:
        count = credentials_rotate()
        self.stdout.write(f"re-encrypted {count} credential(s) with the first key")
