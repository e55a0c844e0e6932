"""``manage.py sync_nodes_from_kubernetes POOL``: the pool's nodes from a Kubernetes cluster's Node objects."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError, CommandParser

from osmo import config as osmo_config
from scheduler.models import Backend, Pool
from scheduler.services import kubernetes_nodes_list, pool_sync_from_kubernetes
from scheduler.services.backends import backend_of_pool, pool_tolerated_taints


class Command(BaseCommand):
    help = (
        "Upsert a pool's nodes from the cluster's Node objects (official kubernetes client): all node labels "
        "(the pool's topology key labels give the domains), status.allocatable cpu / memory / "
        "ephemeral-storage / nvidia.com/gpu as capacity, cordoned or NoSchedule/NoExecute-tainted nodes "
        "unschedulable. Nodes of the pool the cluster no longer lists are cordoned (never deleted while "
        "tasks hold reservations on them; --prune deletes the others). External usage is kept."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("pool", metavar="POOL", help="Name of an existing pool.")
        parser.add_argument(
            "--kubeconfig", metavar="PATH", help="Kubeconfig file (default: $KUBECONFIG or ~/.kube/config)."
        )
        parser.add_argument("--context", metavar="C", help="Kubeconfig context (default: the current context).")
        parser.add_argument(
            "--in-cluster", action="store_true", help="Use the pod's service account instead of a kubeconfig."
        )
        parser.add_argument(
            "--selector",
            metavar="SEL",
            help="Label selector picking the pool's nodes, e.g. 'pool=nvl72' (default: the pool's k8s_node_selector).",
        )
        parser.add_argument(
            "--tolerate-taint",
            metavar="KEY",
            action="append",
            default=[],
            help="A NoSchedule/NoExecute taint key that does not make a node unschedulable (the backend's pods "
            "tolerate it), e.g. nvidia.com/gpu. Repeatable. Kept with the pool (unless --dry-run), so the "
            "periodic sync tolerates it too; the backend's and OSMO_K8S_TOLERATED_TAINTS always are.",
        )
        parser.add_argument("--prune", action="store_true", help="Delete gone nodes that hold no active reservation.")
        parser.add_argument("--page-size", type=int, default=500, help="Nodes per list request (default 500).")
        parser.add_argument("--dry-run", action="store_true", help="Report what would change; write nothing.")

    def handle(self, *args, **options) -> None:
        pool = Pool.objects.filter(name=options["pool"]).first()
        if pool is None:
            raise CommandError(f"pool {options['pool']!r} does not exist (create it with import_pool or the admin)")
        if options["page_size"] < 1:
            raise CommandError("--page-size must be at least 1")
        selector = options["selector"] if options["selector"] is not None else pool.k8s_node_selector
        core_v1 = self._client(options, pool)
        if options["tolerate_taint"] and not options["dry_run"]:
            kept = sorted(set(pool.k8s_tolerated_taints) | set(options["tolerate_taint"]))
            Pool.objects.filter(pk=pool.pk).update(k8s_tolerated_taints=kept)
            pool.k8s_tolerated_taints = kept
        backend = Backend.objects.filter(name=pool.backend_name).first()
        tolerated = pool_tolerated_taints(pool, backend, [*osmo_config.kubernetes().tolerated_taints,
                                                          *options["tolerate_taint"]])
        try:
            items, requests = kubernetes_nodes_list(
                core_v1, label_selector=selector or None, page_size=options["page_size"]
            )
        except Exception as exc:  # ApiException, urllib3 errors: report, never a traceback
            raise CommandError(f"listing nodes failed: {exc.__class__.__name__}: {exc}") from exc
        self.stdout.write(f"listed {len(items)} node(s) in {requests} request(s), selector {selector or '(none)'!r}")
        report = pool_sync_from_kubernetes(
            pool=pool,
            items=items,
            prune=options["prune"],
            dry_run=options["dry_run"],
            tolerated_taints=tolerated,
            node_conditions=backend.node_conditions if backend is not None else (),
            progress=self.stdout.write if len(items) >= 5000 else None,
        )
        for skipped in report.skipped:
            self.stderr.write(f"skipped {skipped['path']}: {skipped['message']}")
        self.stdout.write(report.summary())

    @staticmethod
    def _client(options, pool: Pool):
        from kubernetes import client, config

        try:
            if not (options["in_cluster"] or options["kubeconfig"] or options["context"]):
                named = backend_of_pool(pool)  # a pool on a backend with its own kubeconfig: that cluster
                if named is not None:
                    return named.core  # type: ignore[attr-defined]
            if options["in_cluster"]:
                configuration = client.Configuration()
                config.load_incluster_config(client_configuration=configuration)
                api_client = client.ApiClient(configuration)
            else:
                api_client = config.new_client_from_config(
                    config_file=options["kubeconfig"], context=options["context"]
                )
        except Exception as exc:  # ConfigException and file errors
            raise CommandError(f"cannot load the Kubernetes configuration: {exc}") from exc
        return client.CoreV1Api(api_client)
