"""`make run`'s set-up step: the demo pools and an admin user with an API key, printed at the end when
it is made (only its digest is stored, so a later start cannot show it again: docs/operations.md "Secrets")."""

from __future__ import annotations

import os
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand

from credentials.models import ApiKey
from credentials.tokens import api_key_create
from scheduler.models import Pool


class Command(BaseCommand):
    help = "Load the demo pools from examples/pools/ (those not loaded yet) and create the admin user and its token."

    def add_arguments(self, parser):
        parser.add_argument("--username", default=os.environ.get("OSMO_ADMIN_USER", "admin"))
        parser.add_argument(
            "--password",
            default=os.environ.get("OSMO_ADMIN_PASSWORD", "admin"),
            help="Password for a newly created admin user (default: admin, or $OSMO_ADMIN_PASSWORD).",
        )
        parser.add_argument("--pools-dir", default=str(Path(settings.BASE_DIR) / "examples" / "pools"))

    def handle(self, *args, username: str, password: str, pools_dir: str, **options):
        import yaml

        for path in sorted(Path(pools_dir).glob("*.yaml")):
            name = (yaml.safe_load(path.read_text()) or {}).get("pool", {}).get("name")
            if name and Pool.objects.filter(name=name).exists():
                self.stdout.write(f"pool {name}: already loaded")
                continue
            call_command("import_pool", str(path), stdout=self.stdout)
        user_model = get_user_model()
        user, created = user_model.objects.get_or_create(
            username=username, defaults={"is_staff": True, "is_superuser": True}
        )
        if created:
            user.set_password(password)
            user.save(update_fields=["password"])
        key = None if ApiKey.objects.filter(user=user).exists() else api_key_create(user=user)
        self.stdout.write("")
        # make run passes OSMO_HOST / OSMO_PORT on (scripts/run.sh): print the address it serves on
        url = f"http://{os.environ.get('OSMO_HOST') or '127.0.0.1'}:{os.environ.get('OSMO_PORT') or '8000'}"
        self.stdout.write(self.style.SUCCESS(f"Log in at {url}/ (admin: /admin/)"))
        if created:
            self.stdout.write(f"  user: {username}   password: {password}")
        else:
            self.stdout.write(f"  user: {username}   (existing user; password unchanged)")
        if key is not None:
            self.stdout.write(f"  API token: {key}   (shown this once: only its digest is stored)")
            self.stdout.write(f"  export OSMO_URL={url} OSMO_TOKEN={key}")
        else:
            self.stdout.write(f"  API token: made at an earlier start (shown then only); a new one: python manage.py "
                              f"drf_create_token --reset {username}")
