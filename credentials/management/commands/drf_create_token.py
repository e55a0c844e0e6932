"""``manage.py drf_create_token USER``: make a user's API key and print it, in the words of DRF's command
it replaces (scripts read ``Generated token <key> for user <user>``). Only the key's digest is stored
(docs/operations.md "Secrets"), so the key is printed this once; a user who has one keeps it unless
``--reset`` replaces it."""

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from credentials.tokens import ApiKeyExistsError, api_key_create


class Command(BaseCommand):
    help = "Make a user's API key and print it (shown this once: only its digest is stored)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("username", type=str)
        parser.add_argument("-r", "--reset", action="store_true", dest="reset",
                            help="Replace the user's API key; the old one stops working at once.")

    def handle(self, *args: Any, username: str, reset: bool, **options: Any) -> None:
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"Cannot create the Token: user {username} does not exist")
        try:
            key = api_key_create(user=user, replace=reset)
        except ApiKeyExistsError as exc:
            raise CommandError(f"{exc.message} Run it again with --reset to replace it.") from exc
        self.stdout.write(f"Generated token {key} for user {username}")
