"""``manage.py generate_pool NAME``: a synthetic pool (zones x spines x racks x cliques x nodes)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from osmo.errors import ConflictError, ValidationFailedError
from parsing import QuantityError, parse_quantity
from scheduler.inventory import PoolShape, inventory_document, inventory_dump, pool_generate_inventory
from scheduler.models import Pool
from scheduler.services import inventory_import, pool_delete

PRESETS = {
    # GB200 NVL72: one rack is one NVLink domain of 18 compute trays x 4 GPUs.
    "nvl72": {"nodes_per_clique": 18, "gpus_per_node": 4, "cpu": "144", "memory": "960Gi", "storage": "4Ti"},
    # HGX H100: 8 GPUs per node, one clique (NVSwitch) per node, 4 nodes per rack.
    "hgx": {
        "nodes_per_clique": 1,
        "cliques_per_rack": 4,
        "gpus_per_node": 8,
        "cpu": "224",
        "memory": "2Ti",
        "storage": "30Ti",
    },
}


def _positive(value: str) -> int:
    number = int(value)
    if number < 1:
        raise ValueError(value)
    return number


class Command(BaseCommand):
    help = (
        "Generate a synthetic pool with keys zone > spine > rack > gpu-clique: ZONES x SPINES x RACKS x "
        "CLIQUES x NODES machines of identical shape, optionally partly occupied by external workloads "
        "(seeded). Example, 20,160 GB200 NVL72 nodes (1,120 racks of 18 x 4 GPUs): "
        "generate_pool big --preset nvl72 --zones 4 --spines 10 --racks 28."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", metavar="NAME", help="Pool name.")
        parser.add_argument("--preset", choices=sorted(PRESETS), help="Machine and rack shape preset (default nvl72).")
        parser.add_argument("--zones", type=_positive, default=2, help="Zones (default 2).")
        parser.add_argument("--spines", type=_positive, default=2, help="Spines per zone (default 2).")
        parser.add_argument("--racks", type=_positive, default=2, help="Racks per spine (default 2).")
        parser.add_argument("--cliques", type=_positive, help="GPU cliques (NVLink domains) per rack (preset).")
        parser.add_argument("--nodes", type=_positive, help="Nodes per GPU clique (preset; 18 for NVL72).")
        parser.add_argument("--gpus", type=int, help="GPUs per node (preset; 4 for NVL72).")
        parser.add_argument("--cpu", help="CPU per node as a Kubernetes quantity (preset; e.g. 144).")
        parser.add_argument("--memory", help="Memory per node as a Kubernetes quantity (preset; e.g. 960Gi).")
        parser.add_argument("--storage", help="Storage per node as a Kubernetes quantity (preset; e.g. 4Ti).")
        parser.add_argument(
            "--occupancy",
            type=float,
            default=0.0,
            help="Probability that each GPU is in use by external workloads, 0..1 (default 0).",
        )
        parser.add_argument("--seed", type=int, default=0, help="Random seed for --occupancy (default 0).")
        parser.add_argument("--description", default="", help="Pool description.")
        parser.add_argument(
            "--replace",
            action="store_true",
            help="Delete the pool first if it exists (refused if it has workflows or reservations).",
        )
        parser.add_argument(
            "-o", "--output", metavar="FILE", help="Write an inventory file instead of storing the pool."
        )

    def handle(self, *args, **options) -> None:
        preset: dict[str, Any] = dict(PRESETS[options["preset"] or "nvl72"])
        try:
            shape = PoolShape(
                zones=options["zones"],
                spines_per_zone=options["spines"],
                racks_per_spine=options["racks"],
                cliques_per_rack=options["cliques"] or preset.get("cliques_per_rack", 1),
                nodes_per_clique=options["nodes"] or preset["nodes_per_clique"],
                gpus_per_node=options["gpus"] if options["gpus"] is not None else preset["gpus_per_node"],
                cpu_millis=parse_quantity(options["cpu"] or preset["cpu"], kind="cpu"),
                memory_bytes=parse_quantity(options["memory"] or preset["memory"], kind="memory"),
                storage_bytes=parse_quantity(options["storage"] or preset["storage"], kind="storage"),
                occupancy=options["occupancy"],
                seed=options["seed"],
            )
        except QuantityError as exc:
            raise CommandError(str(exc)) from exc
        if not 0.0 <= shape.occupancy <= 1.0:
            raise CommandError("--occupancy must be between 0 and 1")
        if shape.gpus_per_node < 0:
            raise CommandError("--gpus must not be negative")
        name = options["name"]
        started = time.monotonic()
        self.stdout.write(f"generating {shape.node_count} nodes for pool {name!r}")
        inventory = pool_generate_inventory(name=name, shape=shape, description=options["description"])
        if options["output"]:
            output_format = "json" if options["output"].endswith(".json") else "yaml"
            document = inventory_document(inventory)
            Path(options["output"]).write_text(inventory_dump(document, output_format=output_format), encoding="utf-8")
            self.stdout.write(f"wrote {options['output']} in {time.monotonic() - started:.1f}s")
            return
        existing = Pool.objects.filter(name=name).first()
        if existing is not None:
            if not options["replace"]:
                raise CommandError(f"pool {name!r} exists; use --replace to delete and regenerate it")
            try:
                pool_delete(pool=existing)
            except ConflictError as exc:
                raise CommandError(exc.message) from exc
            self.stdout.write(f"deleted existing pool {name!r}")
        try:
            report = inventory_import(inventory, progress=self.stdout.write)
        except ValidationFailedError as exc:
            problems = "; ".join(f"{e['path']}: {e['message']}" for e in exc.details["errors"])
            raise CommandError(problems) from exc
        self.stdout.write(f"{report.summary()} in {time.monotonic() - started:.1f}s")
