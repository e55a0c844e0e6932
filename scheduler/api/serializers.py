"""Serializers of the pool and node API (docs/design.md §7). Module-level, unique names (they become
OpenAPI components).

Output amounts are integers in base units: ``gpu`` devices, ``cpu_millis`` millicores, ``memory_bytes``
and ``storage_bytes`` bytes. Inputs (node capacity, the inventory file) take Kubernetes quantities.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from osmo.api.serializers import StrictCharField, StrictFloatField
from scheduler.choices import PoolStatus
from scheduler.inventory.document import (
    KEY_NAME_RE,
    LABEL_KEY_RE,
    MAX_PREEMPTION_GRACE,
    MAX_RETRIES,
    MAX_STARVATION_WAIT,
)
from scheduler.models import MAX_FAIRSHARE_HALF_LIFE, MAX_MIN_RUNTIME, Backend, Node, Pool, TopologyKey
from scheduler.selectors import node_usage_dict
from scheduler.services import node_spec_parse


class StrictIntegerField(serializers.IntegerField):
    """A whole number, not a boolean or text: DRF's IntegerField takes ``"12"`` and ``12.0``, which the
    schema (``type: integer``) does not allow."""

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictBooleanField(serializers.BooleanField):
    """true or false, not DRF's ``"yes"``, ``"on"`` or ``1``, which the schema (``type: boolean``) does not allow."""

    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            self.fail("invalid")
        return data


# ------------------------------------------------------------------------------------------------
# Output
# ------------------------------------------------------------------------------------------------
class ResourceAmountsSerializer(serializers.Serializer):
    gpu = serializers.IntegerField(help_text="GPU devices.")
    cpu_millis = serializers.IntegerField(help_text="CPU in millicores (1 core = 1000).")
    memory_bytes = serializers.IntegerField(help_text="Memory in bytes.")
    storage_bytes = serializers.IntegerField(help_text="Storage in bytes.")


class UsageTotalsSerializer(serializers.Serializer):
    node_count = serializers.IntegerField()
    schedulable_node_count = serializers.IntegerField()
    capacity = ResourceAmountsSerializer(help_text="Sum over all nodes.")
    used = ResourceAmountsSerializer(help_text="External usage (outside this service), all nodes.")
    reserved = ResourceAmountsSerializer(help_text="Held by active tasks of this service, all nodes.")
    free = ResourceAmountsSerializer(
        help_text="Sum over schedulable nodes of max(capacity - used - reserved, 0): what placement can use."
    )


class DomainUsageSerializer(UsageTotalsSerializer):
    path = serializers.DictField(
        child=serializers.CharField(),
        help_text="Label values of this key and every coarser key: the domain's identity.",
    )
    value = serializers.CharField(help_text="This key's label value.")


class KeyDomainsSerializer(serializers.Serializer):
    key = serializers.CharField()
    label = serializers.CharField()  # type: ignore[assignment]  # the API field, not DRF's Field.label
    position = serializers.IntegerField()
    domain_count = serializers.IntegerField()
    domains = DomainUsageSerializer(many=True)
    unlabelled = UsageTotalsSerializer(help_text="Nodes missing this key's label or a coarser one: in no domain.")


class TopologyKeyOutputSerializer(serializers.ModelSerializer):
    class Meta:
        model = TopologyKey
        fields = ["key", "label", "position"]


class QuotaUseOutputSerializer(serializers.Serializer):
    team = serializers.CharField(allow_null=True, help_text="None: work submitted without a team.")
    quota_gpu = serializers.IntegerField(allow_null=True, help_text="None: no quota (the whole pool).")
    used_gpu = serializers.IntegerField(help_text="GPUs held by the team's HIGH and NORMAL work.")
    low_gpu = serializers.IntegerField(help_text="GPUs held by the team's LOW (preemptible) work.")


class PoolOutputSerializer(serializers.ModelSerializer):
    backend = serializers.CharField(source="backend_name", read_only=True,
                                    help_text="The name of the pool's backend (GET /api/backends/).")
    backend_kind = serializers.CharField(source="backend", read_only=True,
                                         help_text="The backend's kind: simulated, kubernetes or local.")
    backend_status = serializers.SerializerMethodField(
        help_text="The backend's status: ONLINE, OFFLINE (its syncs fail: nothing is placed) or MAINTENANCE.")
    topology_keys = serializers.SerializerMethodField(help_text="Coarsest first.")
    totals = serializers.SerializerMethodField()
    quotas = serializers.SerializerMethodField(help_text="Per team: quota and GPUs held (docs/design.md §9).")

    class Meta:
        model = Pool
        fields = [
            "name",
            "description",
            "status",
            "backend",
            "backend_kind",
            "backend_status",
            "sim_task_seconds",
            "max_retries",
            "k8s_namespace",
            "k8s_node_selector",
            "min_runtime",
            "fairshare_half_life",
            "browser_forwarding",
            "starvation_wait",
            "preemption_grace",
            "refuse_never_fits",
            "keys_version",
            "topology_keys",
            "totals",
            "quotas",
            "created_at",
            "updated_at",
        ]

    def get_backend_status(self, pool: Pool) -> str:
        return pool.backend_ref.status if pool.backend_ref is not None else "ONLINE"

    @extend_schema_field(TopologyKeyOutputSerializer(many=True))
    def get_topology_keys(self, pool: Pool) -> list[dict[str, Any]]:
        keys = sorted(pool.topology_keys.all(), key=lambda key: key.position)
        return [{"key": key.key, "label": key.label, "position": key.position} for key in keys]

    @extend_schema_field(UsageTotalsSerializer)
    def get_totals(self, pool: Pool) -> dict[str, Any]:
        return self.context["totals"][pool.pk]

    @extend_schema_field(QuotaUseOutputSerializer(many=True))
    def get_quotas(self, pool: Pool) -> list[dict[str, Any]]:
        return self.context["quotas"][pool.pk]


class TeamUsageOutputSerializer(serializers.Serializer):
    team = serializers.CharField(allow_null=True, help_text="None: work submitted without a team.")
    gpu_hours = serializers.FloatField(help_text="GPU-hours held in the pool, each weighing half as much every "
                                       "fairshare_half_life seconds.")


class PoolDetailOutputSerializer(PoolOutputSerializer):
    domains = serializers.SerializerMethodField(help_text="Per key (coarsest first): totals per domain.")
    fairshare_usage = serializers.SerializerMethodField(
        help_text="Fair share over time: each team's recent usage, least first (the order it gives within a "
        "priority; docs/design.md §9). Empty when fairshare_half_life is 0.")

    class Meta(PoolOutputSerializer.Meta):
        fields = [*PoolOutputSerializer.Meta.fields, "domains", "fairshare_usage"]

    @extend_schema_field(TeamUsageOutputSerializer(many=True))
    def get_fairshare_usage(self, pool: Pool) -> list[dict[str, Any]]:
        return [{"team": u.team, "gpu_hours": round(u.gpu_hours, 4)} for u in self.context.get("usage", [])]

    @extend_schema_field(KeyDomainsSerializer(many=True))
    def get_domains(self, pool: Pool) -> list[dict[str, Any]]:
        return self.context["summary"]["keys"]


class NodeOutputSerializer(serializers.ModelSerializer):
    pool = serializers.CharField(source="pool.name", read_only=True)
    domains = serializers.SerializerMethodField(help_text="This node's label value for each of the pool's keys.")
    capacity = serializers.SerializerMethodField()
    used = serializers.SerializerMethodField()
    reserved = serializers.SerializerMethodField()
    free = serializers.SerializerMethodField()

    class Meta:
        model = Node
        fields = [
            "name",
            "pool",
            "labels",
            "schedulable",
            "domains",
            "capacity",
            "used",
            "reserved",
            "free",
            "created_at",
            "updated_at",
        ]

    def _usage(self, node: Node) -> dict[str, dict[str, int]]:
        cache = self.context.setdefault("_usage", {})
        if node.pk not in cache:
            cache[node.pk] = node_usage_dict(node)
        return cache[node.pk]

    @extend_schema_field({"type": "object", "additionalProperties": {"type": "string", "nullable": True}})
    def get_domains(self, node: Node) -> dict[str, str | None]:
        return {key.key: node.labels.get(key.label) for key in self.context["keys"]}

    @extend_schema_field(ResourceAmountsSerializer)
    def get_capacity(self, node: Node) -> dict[str, int]:
        return self._usage(node)["capacity"]

    @extend_schema_field(ResourceAmountsSerializer)
    def get_used(self, node: Node) -> dict[str, int]:
        return self._usage(node)["used"]

    @extend_schema_field(ResourceAmountsSerializer)
    def get_reserved(self, node: Node) -> dict[str, int]:
        return self._usage(node)["reserved"]

    @extend_schema_field(ResourceAmountsSerializer)
    def get_free(self, node: Node) -> dict[str, int]:
        return self._usage(node)["free"]


class ImportReportOutputSerializer(serializers.Serializer):
    pool = serializers.CharField()
    pool_created = serializers.BooleanField()
    pool_updated = serializers.BooleanField()
    keys_changed = serializers.BooleanField()
    keys_version = serializers.IntegerField()
    nodes_created = serializers.IntegerField()
    nodes_updated = serializers.IntegerField()
    nodes_unchanged = serializers.IntegerField()
    nodes_marked_unschedulable = serializers.IntegerField()
    nodes_deleted = serializers.IntegerField()
    nodes_kept_with_reservations = serializers.ListField(child=serializers.CharField())
    nodes_skipped = serializers.ListField(child=serializers.DictField(child=serializers.CharField()))
    dry_run = serializers.BooleanField()


# ------------------------------------------------------------------------------------------------
# Input
# ------------------------------------------------------------------------------------------------
@extend_schema_field({"type": "string", "maxLength": 63, "pattern": KEY_NAME_RE})
class KeyNameField(StrictCharField):
    """A topology key's name; the schema says what the inventory validator accepts."""


@extend_schema_field({"type": "string", "maxLength": 253, "pattern": LABEL_KEY_RE})
class LabelKeyField(StrictCharField):
    """A Kubernetes label key; the schema says what the inventory validator accepts."""


class TopologyKeyInputSerializer(serializers.Serializer):
    key = KeyNameField(max_length=63, help_text="Key name, e.g. gpu-clique.")
    label = LabelKeyField(  # type: ignore[assignment]  # the API field, not DRF's Field.label
        max_length=253, help_text="Node label holding the value, e.g. nvidia.com/gpu-clique."
    )


class PoolInputSerializer(serializers.Serializer):
    """Create (POST), replace (PUT) or change (PATCH) a pool. ``topology_keys`` replaces the whole
    ordered list; any change to it bumps ``keys_version``."""

    name = StrictCharField(max_length=63)
    description = StrictCharField(max_length=255, required=False, allow_blank=True)
    status = serializers.ChoiceField(choices=PoolStatus.choices, required=False)
    backend = serializers.CharField(max_length=63, required=False,
                                    help_text="A backend's name (GET /api/backends/): simulated, kubernetes, local "
                                    "or one an admin made.")
    sim_task_seconds = StrictFloatField(min_value=0, required=False)
    max_retries = StrictIntegerField(min_value=0, max_value=MAX_RETRIES, required=False,
                                           help_text="How many times a gang may be rescheduled by an exit action.")
    k8s_namespace = StrictCharField(max_length=63, required=False, allow_blank=True)
    k8s_node_selector = StrictCharField(max_length=255, required=False, allow_blank=True)
    min_runtime = StrictIntegerField(
        min_value=0, max_value=MAX_MIN_RUNTIME, required=False,
        help_text="Seconds a running LOW gang runs before it may be preempted (0: at once).")
    fairshare_half_life = StrictIntegerField(
        min_value=0, max_value=MAX_FAIRSHARE_HALF_LIFE, required=False,
        help_text="Fair share over time: within a priority, teams that used fewer GPU-seconds of the pool "
        "recently go first, usage halving every this many seconds (0: off, submission order).")
    browser_forwarding = StrictBooleanField(
        required=False, help_text="The task page's \"Open port\": the service proxies HTTP and websockets to the "
        "pool's tasks' ports for their owners' browsers (default true).")
    starvation_wait = StrictIntegerField(
        min_value=0, max_value=MAX_STARVATION_WAIT, required=False, allow_null=True,
        help_text="Seconds a gang that does not fit waits before machines are held for it (null: the "
        "deployment's OSMO_STARVATION_SECONDS).")
    preemption_grace = StrictIntegerField(
        min_value=0, max_value=MAX_PREEMPTION_GRACE, required=False, allow_null=True,
        help_text="Seconds a preempted gang's pods get to stop (null: the deployment's "
        "OSMO_PREEMPTION_GRACE_SECONDS).")
    refuse_never_fits = StrictBooleanField(
        required=False, allow_null=True,
        help_text="Refuse at submission a gang that cannot be placed even on the whole pool as if idle (null: the "
        "deployment's OSMO_REFUSE_NEVER_FITS).")
    topology_keys = TopologyKeyInputSerializer(many=True, required=False, help_text="Coarsest first.")

    def validate_topology_keys(self, items: list[dict[str, str]]) -> list[dict[str, str]]:
        # A PATCH validates the whole serializer as partial, and DRF passes that on to the nested
        # items, so their required key and label were skipped (then a KeyError, a 500): the list
        # replaces the pool's keys, so every item must be complete whatever the method.
        errors = [{name: ["This field is required."] for name in ("key", "label") if name not in item}
                  for item in items]
        if any(errors):
            raise serializers.ValidationError(errors)
        return items


@extend_schema_field(
    {
        # integer is a subset of number: listing both made every integer match two oneOf branches.
        "oneOf": [{"type": "string"}, {"type": "number"}],
        "description": "A Kubernetes quantity: 8, 144, 500m, 960Gi, 4Ti.",
    }
)
class QuantityInputField(serializers.Field):
    """Documentation only: quantities are parsed by the inventory validator."""

    def to_internal_value(self, data: Any) -> Any:
        return data

    def to_representation(self, value: Any) -> Any:
        return value


class ResourceQuantitiesInputSerializer(serializers.Serializer):
    gpu = QuantityInputField(required=False)
    cpu = QuantityInputField(required=False)
    memory = QuantityInputField(required=False)
    storage = QuantityInputField(required=False)


class NodeInputSerializer(serializers.Serializer):
    """A node as in the inventory file. Validation (and the error paths) is the inventory's:
    ``capacity.gpu``, ``labels["topology.kubernetes.io/zone"]``."""

    name = serializers.CharField(max_length=253)
    labels = serializers.DictField(child=serializers.CharField(allow_blank=True), required=False, allow_null=True,
                                   help_text="null: no labels.")
    capacity = ResourceQuantitiesInputSerializer()
    allocated = ResourceQuantitiesInputSerializer(required=False, allow_null=True,
                                                  help_text="In use outside this service (null: none).")
    schedulable = serializers.BooleanField(required=False, default=True)

    def to_internal_value(self, data: Any) -> Any:
        # Raises ValidationFailedError (400 with every path) for any problem.
        return node_spec_parse(data, "")


class PoolSectionInputSerializer(serializers.Serializer):
    name = StrictCharField()
    description = StrictCharField(required=False, allow_blank=True, allow_null=True)
    backend = serializers.CharField(max_length=63, required=False,
                                    help_text="A backend's name (GET /api/backends/): simulated, kubernetes, local "
                                    "or one an admin made.")
    sim_task_seconds = StrictFloatField(required=False)
    max_retries = StrictIntegerField(required=False)
    k8s_namespace = StrictCharField(required=False, allow_blank=True, allow_null=True)
    k8s_node_selector = StrictCharField(required=False, allow_blank=True, allow_null=True,
                                        help_text="null: none (as for description and k8s_namespace).")
    min_runtime = StrictIntegerField(required=False)
    fairshare_half_life = StrictIntegerField(required=False)
    browser_forwarding = serializers.BooleanField(required=False)
    starvation_wait = StrictIntegerField(required=False, allow_null=True,
                                         help_text="null: the deployment's OSMO_STARVATION_SECONDS.")
    preemption_grace = StrictIntegerField(required=False, allow_null=True,
                                          help_text="null: the deployment's OSMO_PREEMPTION_GRACE_SECONDS.")
    refuse_never_fits = serializers.BooleanField(required=False, allow_null=True,
                                                 help_text="null: the deployment's OSMO_REFUSE_NEVER_FITS.")


class PoolImportInputSerializer(serializers.Serializer):
    """The inventory document (docs/design.md §7) as JSON (or send the YAML text with
    ``Content-Type: application/yaml``)."""

    pool = PoolSectionInputSerializer()
    topology_keys = TopologyKeyInputSerializer(many=True, required=False, allow_null=True)
    nodes = NodeInputSerializer(many=True, required=False, allow_null=True, help_text="null: no nodes.")


class InventoryOutputSerializer(PoolImportInputSerializer):
    """The pool as an inventory document (what ``export_pool`` writes)."""


class BackendOutputSerializer(serializers.ModelSerializer):
    """A backend as users see it: never its kubeconfig (docs/api.md, "Backends")."""

    pools = serializers.SerializerMethodField(help_text="Names of the pools on this backend.")
    nodes = serializers.SerializerMethodField(help_text="Nodes of its pools.")
    connection = serializers.SerializerMethodField(
        help_text="environment (the worker processes' KUBECONFIG), kubeconfig, in-cluster or none.")

    class Meta:
        model = Backend
        fields = ["name", "kind", "description", "status", "last_contact", "last_error", "offline_since",
                  "permission_error",
                  "connection", "context", "namespace", "scheduler_name", "node_conditions", "tolerated_taints",
                  "dashboard_links", "pools", "nodes", "created_at", "updated_at"]

    def get_pools(self, backend: Backend) -> list[str]:
        return sorted(pool.name for pool in backend.pools.all())

    def get_nodes(self, backend: Backend) -> int:
        return int(getattr(backend, "node_count", 0) or 0)

    def get_connection(self, backend: Backend) -> str:
        if backend.kind != "kubernetes":
            return "none"
        if backend.in_cluster:
            return "in-cluster"
        return "kubeconfig" if backend.kubeconfig_sealed else "environment"
