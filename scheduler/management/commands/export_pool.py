"""``manage.py export_pool POOL``: write a pool as an inventory file that ``import_pool`` reads back."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from scheduler.inventory import inventory_dump
from scheduler.models import Pool
from scheduler.services import pool_export


class Command(BaseCommand):
    help = "Export a pool (keys in order, nodes, capacity, external usage) in the inventory format (docs/design.md §7)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("pool", metavar="POOL", help="Name of the pool to export.")
        parser.add_argument("-o", "--output", metavar="FILE", help="Write to FILE instead of standard output.")
        parser.add_argument(
            "--format",
            choices=["yaml", "json"],
            default=None,
            help="Output format (default: from the output file's extension, else yaml).",
        )

    def handle(self, *args, pool: str, output: str | None, format: str | None, **options) -> None:
        instance = Pool.objects.filter(name=pool).first()
        if instance is None:
            raise CommandError(f"pool {pool!r} does not exist")
        output_format = format or ("json" if output and output.endswith(".json") else "yaml")
        text = inventory_dump(pool_export(instance), output_format=output_format)
        if output:
            Path(output).write_text(text, encoding="utf-8")
            if options["verbosity"] >= 1:
                self.stderr.write(f"wrote pool {pool!r} to {output}")
        else:
            self.stdout.write(text, ending="")
