"""``manage.py backend_set NAME``: create or update a backend (for scripts; the admin does the same)."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from osmo.errors import OsmoError, ValidationFailedError
from scheduler.choices import BackendStatus, DispatchBackend
from scheduler.services.backends import backend_delete, backend_set


class Command(BaseCommand):
    help = (
        "Create or update a backend: a Kubernetes cluster (its kubeconfig is stored encrypted with "
        "OSMO_CREDENTIALS_KEYS and replaced whole; workers pick a new one up at their next call), this "
        "machine's sandboxes (local) or the simulation. Pools name it in their inventory (backend: NAME)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", metavar="NAME", help="The backend's name (lowercase letters, digits, hyphens).")
        parser.add_argument("--kind", choices=DispatchBackend.values, help="kubernetes (default), local or simulated.")
        parser.add_argument("--kubeconfig", metavar="FILE", help="Kubeconfig file to store (read once, encrypted).")
        parser.add_argument("--context", metavar="C", help="Kubeconfig context (default: its current context).")
        parser.add_argument("--in-cluster", action="store_true",
                            help="Use the worker pod's service account (drops a stored kubeconfig).")
        parser.add_argument("--namespace", metavar="NS", help="Namespace for pods of pools that name none.")
        parser.add_argument("--scheduler-name", metavar="S", help="schedulerName put on the backend's pods.")
        parser.add_argument("--description", metavar="TEXT")
        parser.add_argument("--tolerate-taint", metavar="KEY", action="append",
                            help="A taint key that does not make the backend's nodes unschedulable. Repeatable; "
                            "replaces the stored list.")
        parser.add_argument("--node-condition", metavar="TYPE", action="append",
                            help="A node condition type (besides Ready) that makes a node unschedulable while "
                            "True, e.g. DiskPressure. Repeatable; replaces the stored list.")
        parser.add_argument("--status", choices=[BackendStatus.ONLINE, BackendStatus.MAINTENANCE])
        parser.add_argument("--delete", action="store_true", help="Delete the backend (refused while it has pools).")

    def handle(self, *args, **options) -> None:
        name = options["name"]
        if options["delete"]:
            try:
                backend_delete(name=name)
            except OsmoError as exc:
                raise CommandError(str(exc)) from exc
            self.stdout.write(f"backend {name} deleted")
            return
        kubeconfig = None
        if options["kubeconfig"]:
            try:
                kubeconfig = Path(options["kubeconfig"]).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise CommandError(f"--kubeconfig: cannot read {options['kubeconfig']}: {exc}") from exc
        fields = {key: options[option] for key, option in (
            ("context", "context"), ("namespace", "namespace"), ("scheduler_name", "scheduler_name"),
            ("description", "description"), ("tolerated_taints", "tolerate_taint"),
            ("node_conditions", "node_condition"), ("status", "status")) if options[option] is not None}
        try:
            backend = backend_set(name=name, kind=options["kind"], kubeconfig=kubeconfig,
                                  in_cluster=True if options["in_cluster"] else None, **fields)
        except ValidationFailedError as exc:
            problems = "; ".join(f"{error['path']}: {error['message']}" for error in exc.details["errors"])
            raise CommandError(f"backend {name!r} not saved: {problems}") from exc
        except OsmoError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"backend {backend.name} ({backend.kind}) saved, connection version "
                          f"{backend.kubeconfig_version}")
