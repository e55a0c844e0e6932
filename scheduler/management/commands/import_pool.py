"""``manage.py import_pool FILE [FILE ...]``: upsert pools from inventory files (docs/design.md §7)."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from osmo.errors import ValidationFailedError
from scheduler.services import inventory_import, inventory_load_text, inventory_parse


class Command(BaseCommand):
    help = (
        "Create or update pools from inventory files (YAML or JSON, docs/design.md §7). Validates the whole file "
        "first and reports every problem with its place in the file; writes nothing unless the file is "
        "valid. Idempotent: importing the same file again changes nothing."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("files", nargs="+", metavar="FILE", help="Inventory file(s), YAML or JSON; '-' is stdin.")
        parser.add_argument(
            "--prune",
            action="store_true",
            help="Delete the pool's nodes the file does not list (nodes with active reservations are cordoned).",
        )
        parser.add_argument(
            "--dry-run", action="store_true", help="Validate and report what would change; write nothing."
        )

    def handle(self, *args, files: list[str], prune: bool, dry_run: bool, **options) -> None:
        verbose = options["verbosity"] >= 2
        for name in files:
            text = self._read(name)
            try:
                inventory = inventory_parse(inventory_load_text(text))
            except ValidationFailedError as exc:
                errors = exc.details["errors"]
                lines = [f"{name}: {len(errors)} problem(s), nothing imported:"]
                lines += [f"  {error['path'] or '(document)'}: {error['message']}" for error in errors]
                raise CommandError("\n".join(lines)) from exc
            progress = self.stdout.write if verbose or len(inventory.nodes) >= 5000 else None
            report = inventory_import(inventory, prune=prune, dry_run=dry_run, progress=progress)
            if options["verbosity"] >= 1:
                self.stdout.write(f"{name}: {report.summary()}")

    @staticmethod
    def _read(name: str) -> str:
        if name == "-":
            import sys

            return sys.stdin.read()
        path = Path(name)
        if not path.is_file():
            raise CommandError(f"{name}: no such file")
        try:
            return path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise CommandError(f"{name}: cannot read: {exc}") from exc
