"""Pools, their topology keys, machines (nodes) and the capacity reservations held on them."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, RegexValidator
from django.db import models
from django.db.models import F, Q

from osmo import config as osmo_config
from scheduler.choices import BUILTIN_BACKENDS, BackendStatus, DispatchBackend, PoolStatus
from scheduler.inventory.document import MAX_PREEMPTION_GRACE, MAX_RETRIES, MAX_STARVATION_WAIT
from scheduler.resources import RESOURCES

KEY_NAME_RE = r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$"
key_name_validator = RegexValidator(KEY_NAME_RE, "Use lowercase letters, digits and inner hyphens (e.g. gpu-clique).")
POOL_NAME_RE = r"^[a-zA-Z0-9]([a-zA-Z0-9_.-]*[a-zA-Z0-9])?$"
#: The longest minimum runtime a pool may set (a week; the inventory document keeps the same bound).
MAX_MIN_RUNTIME = 7 * 24 * 3600
#: The longest fair-share half-life a pool may set (30 days; the inventory document keeps the same bound).
MAX_FAIRSHARE_HALF_LIFE = 30 * 24 * 3600
pool_name_validator = RegexValidator(POOL_NAME_RE, "Use letters, digits, '.', '_' and inner hyphens.")
# A Kubernetes label key: optional DNS-subdomain prefix and "/", then a name of at most 63 characters.
LABEL_KEY_RE = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"  # optional prefix: a DNS subdomain + "/"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"  # name: at most 63 characters
)
label_key_validator = RegexValidator(
    LABEL_KEY_RE, "Use a Kubernetes label key, e.g. topology.kubernetes.io/zone or nvidia.com/gpu-clique."
)
# Node names as Kubernetes writes them (DNS subdomains), plus upper case and "_" for hand-written inventories.
NODE_NAME_RE = r"^[A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?$"
node_name_validator = RegexValidator(NODE_NAME_RE, "Use letters, digits, '.', '_' and inner hyphens.")


BACKEND_NAME_RE = r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$"
backend_name_validator = RegexValidator(BACKEND_NAME_RE, "Use lowercase letters, digits and inner hyphens.")


class Backend(models.Model):
    """A compute backend pools run on (OSMO's ``osmo backend list``): a Kubernetes cluster, this
    machine's sandboxes or the simulation. The built-in ``simulated``, ``local`` and ``kubernetes``
    always exist; ``kubernetes`` reads its connection from the worker processes' environment. Any other
    Kubernetes backend carries its own kubeconfig, sealed with the credential store's keys
    (``kubeconfig_sealed``; never shown, never returned, replaced whole: :mod:`scheduler.services.backends`)."""

    name = models.CharField(max_length=63, unique=True, validators=[backend_name_validator])
    kind = models.CharField(max_length=16, choices=DispatchBackend.choices, default=DispatchBackend.KUBERNETES)
    description = models.CharField(max_length=255, blank=True)
    in_cluster = models.BooleanField(
        default=False, help_text="Kubernetes: use the worker pod's service account instead of a kubeconfig."
    )
    kubeconfig_sealed = models.TextField(blank=True, editable=False,
                                         help_text="The kubeconfig, encrypted with OSMO_CREDENTIALS_KEYS.")
    kubeconfig_version = models.PositiveIntegerField(
        default=0, editable=False, help_text="Bumped whenever the connection changes: workers build a new client."
    )
    context = models.CharField(max_length=253, blank=True, help_text="Kubeconfig context (default: its current one).")
    namespace = models.CharField(max_length=63, blank=True,
                                 help_text="Namespace for pods of pools that name none (default: default).")
    scheduler_name = models.CharField(max_length=253, blank=True,
                                      help_text="schedulerName put on pods (default: the cluster's).")
    node_conditions = models.JSONField(
        default=list, blank=True,
        help_text="Node condition types (besides Ready) that make a node unschedulable while True, e.g. "
        "[\"DiskPressure\"].",
    )
    tolerated_taints = models.JSONField(
        default=list, blank=True,
        help_text="Taint keys that do not make this backend's nodes unschedulable (its pods tolerate them).",
    )
    dashboard_links = models.JSONField(default=dict, blank=True, help_text="Name: URL links for operators.")
    status = models.CharField(max_length=12, choices=BackendStatus.choices, default=BackendStatus.ONLINE)
    last_contact = models.DateTimeField(null=True, blank=True, editable=False,
                                        help_text="When a sync of this backend last succeeded.")
    last_error = models.TextField(blank=True, editable=False, help_text="Why the last sync failed.")
    permission_error = models.TextField(
        blank=True, editable=False,
        help_text="The last 401/403 of a dispatch or a node re-read (the verb and resource refused); cleared by "
        "the next pod created on this backend or a new connection.",
    )
    offline_since = models.DateTimeField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [models.CheckConstraint(condition=Q(name__regex=BACKEND_NAME_RE), name="backend_name_format")]

    def __str__(self) -> str:
        return self.name

    @property
    def builtin(self) -> bool:
        return self.name in BUILTIN_BACKENDS

    @property
    def from_environment(self) -> bool:
        """The built-in ``kubernetes`` backend: its connection is the worker processes' environment."""
        return self.name == DispatchBackend.KUBERNETES

    def clean(self) -> None:
        if self.builtin and self.kind != self.name:
            raise ValidationError({"kind": f"the built-in backend {self.name!r} is of kind {self.name!r}"})
        if self.builtin and (self.kubeconfig_sealed or self.in_cluster):
            raise ValidationError(f"the built-in backend {self.name!r} reads the worker processes' environment; "
                                  "make a backend of another name for this connection")
        for field, what in (("node_conditions", "condition types"), ("tolerated_taints", "taint keys")):
            value = getattr(self, field)
            if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
                raise ValidationError({field: f"must be a list of {what} (text)"})
        if not isinstance(self.dashboard_links, dict) or not all(
            isinstance(key, str) and isinstance(value, str) for key, value in self.dashboard_links.items()
        ):
            raise ValidationError({"dashboard_links": "must map names to URLs (text)"})


def builtin_backend(name: str) -> Backend:
    """The built-in backend ``name`` (made when missing: a flushed test database has none)."""
    backend, _ = Backend.objects.get_or_create(name=name, defaults={"kind": name})
    return backend


class Pool(models.Model):
    """A set of machines workflows are submitted to, with its ordered topology keys."""

    name = models.CharField(max_length=63, unique=True, validators=[pool_name_validator])
    description = models.CharField(max_length=255, blank=True)
    status = models.CharField(
        max_length=12, choices=PoolStatus.choices, default=PoolStatus.ONLINE,
        help_text="ONLINE places work; OFFLINE accepts submissions and places nothing; MAINTENANCE refuses "
        "submissions and places nothing. Running work is never touched.",
    )
    # The kind of its backend, kept equal to ``backend_ref.kind`` by save() (dispatch and the syncs filter on it).
    backend = models.CharField(max_length=16, choices=DispatchBackend.choices, default=DispatchBackend.SIMULATED)
    backend_ref = models.ForeignKey(
        Backend, on_delete=models.PROTECT, null=True, blank=True, related_name="pools", verbose_name="backend",
        to_field="name", db_column="backend_name",
        help_text="The backend the pool's nodes belong to (default: the built-in one named as its kind).",
    )
    sim_task_seconds = models.FloatField(
        default=10.0, help_text="Simulated backend: how long a task runs unless its spec says otherwise."
    )
    max_retries = models.PositiveIntegerField(
        default=3, validators=[MaxValueValidator(MAX_RETRIES)],
        help_text="How many times a gang may be rescheduled (its tasks' RESCHEDULE exit action, a pod "
        "lost to the infrastructure) before the task fails (preemption does not count)."
    )
    k8s_namespace = models.CharField(max_length=63, default="default", blank=True)
    min_runtime = models.PositiveIntegerField(
        default=0, validators=[MaxValueValidator(MAX_MIN_RUNTIME)],
        help_text="Seconds a running LOW gang runs before it may be preempted (0: at once; docs/design.md §9).",
    )
    fairshare_half_life = models.PositiveIntegerField(
        default=0, validators=[MaxValueValidator(MAX_FAIRSHARE_HALF_LIFE)],
        help_text="Fair share over time: within a priority, the gangs of teams that used fewer GPU-seconds of "
        "the pool recently go first, usage decaying by half every this many seconds (0: off, submission "
        "order; docs/design.md §9).",
    )
    starvation_wait = models.PositiveIntegerField(
        null=True, blank=True, validators=[MaxValueValidator(MAX_STARVATION_WAIT)],
        help_text="Seconds a gang that does not fit waits before machines are held for it: work of its priority "
        "and below behind it backfills only the rest of the pool (empty: OSMO_STARVATION_SECONDS; "
        "docs/design.md §6).",
    )
    preemption_grace = models.PositiveIntegerField(
        null=True, blank=True, validators=[MaxValueValidator(MAX_PREEMPTION_GRACE)],
        help_text="Seconds a preempted gang's pods get to stop after SIGTERM (empty: "
        "OSMO_PREEMPTION_GRACE_SECONDS).",
    )
    refuse_never_fits = models.BooleanField(
        null=True, blank=True,
        help_text="Refuse at submission a gang that cannot be placed even on the whole pool as if idle; off for "
        "pools that grow (empty: OSMO_REFUSE_NEVER_FITS).",
    )
    k8s_node_selector = models.CharField(
        max_length=255, blank=True, help_text="Kubernetes label selector picking this pool's nodes for sync."
    )
    browser_forwarding = models.BooleanField(
        default=True, help_text="The task page's \"Open port\" (the service proxies HTTP and websockets to a "
        "task's port for its owner's browser). Off: the page shows no such link and the proxy answers 403; the "
        "CLI's port-forward, exec and the page's terminal are not affected (docs/pages.md).",
    )
    k8s_tolerated_taints = models.JSONField(
        default=list, blank=True,
        help_text="Taint keys that do not make this pool's nodes unschedulable (besides its backend's and "
        "OSMO_K8S_TOLERATED_TAINTS); sync_nodes_from_kubernetes --tolerate-taint keeps them here.",
    )
    k8s_synced_at = models.DateTimeField(
        null=True, blank=True, editable=False,
        help_text="When the periodic Kubernetes sync last read this pool's nodes and other pods.",
    )
    k8s_sync = models.JSONField(
        null=True, blank=True, editable=False,
        help_text="What the last Kubernetes sync changed (nodes created/updated/cordoned, foreign pods counted).",
    )
    keys_version = models.PositiveIntegerField(
        default=1, help_text="Bumped whenever the topology keys change; queued groups built on another version wait."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(condition=Q(sim_task_seconds__gte=0), name="pool_sim_seconds_gte_0"),
            models.CheckConstraint(condition=Q(name__regex=POOL_NAME_RE), name="pool_name_format"),
            models.CheckConstraint(condition=Q(keys_version__gte=1), name="pool_keys_version_gte_1"),
            models.CheckConstraint(condition=Q(min_runtime__lte=MAX_MIN_RUNTIME), name="pool_min_runtime_bounded"),
            models.CheckConstraint(condition=Q(fairshare_half_life__lte=MAX_FAIRSHARE_HALF_LIFE),
                                   name="pool_fairshare_half_life_bounded"),
            models.CheckConstraint(condition=Q(starvation_wait__lte=MAX_STARVATION_WAIT),
                                   name="pool_starvation_wait_bounded"),
            models.CheckConstraint(condition=Q(preemption_grace__lte=MAX_PREEMPTION_GRACE),
                                   name="pool_preemption_grace_bounded"),
        ]

    def __str__(self) -> str:
        return self.name

    def save(self, *args, **kwargs) -> None:
        # A pool made with only a kind (``backend="kubernetes"``) belongs to the built-in backend of that name.
        if self.backend_ref_id is None and self.backend in BUILTIN_BACKENDS:
            self.backend_ref = builtin_backend(self.backend)
        elif self.backend_ref_id in BUILTIN_BACKENDS:
            self.backend = str(self.backend_ref_id)
        elif self.backend_ref is not None:
            self.backend = self.backend_ref.kind
        super().save(*args, **kwargs)

    # The pool policies a pool may leave unset: its own value, else the deployment's setting.
    def starvation_wait_seconds(self) -> int:
        """How long a gang that does not fit waits before machines are held for it (docs/design.md §6)."""
        if self.starvation_wait is not None:
            return self.starvation_wait
        return osmo_config.scheduler().starvation_seconds

    def preemption_grace_seconds(self) -> int:
        """The grace period of a preempted gang's pod deletion."""
        if self.preemption_grace is not None:
            return self.preemption_grace
        return osmo_config.scheduler().preemption_grace_seconds

    def refuses_never_fits(self) -> bool:
        """Whether a submission that cannot be placed even on the idle pool is refused (docs/design.md §11)."""
        if self.refuse_never_fits is not None:
            return self.refuse_never_fits
        return osmo_config.scheduler().refuse_never_fits

    @property
    def backend_name(self) -> str:
        """The name of the pool's backend (its kind's built-in one when none is set)."""
        return self.backend_ref_id if self.backend_ref_id is not None else self.backend

    @property
    def pod_namespace(self) -> str:
        """The Kubernetes namespace the pool's pods go to (``default`` when the field is blank)."""
        if self.k8s_namespace:
            return self.k8s_namespace
        return (self.backend_ref.namespace if self.backend_ref_id is not None and self.backend_ref else "") or "default"


class PoolGrant(models.Model):
    """Who may see and submit to a pool: a team (Django group) or one user. A pool without grants is
    open to everyone; staff always have access (docs/design.md §9). A granted team or user cannot be
    deleted while the grant stands (deleting the pool's last grant with it would open the pool to
    everyone): the grant is removed first, on purpose."""

    pool = models.ForeignKey(Pool, on_delete=models.CASCADE, related_name="grants")
    team = models.ForeignKey("auth.Group", null=True, blank=True, on_delete=models.PROTECT, related_name="pool_grants")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT,
                             related_name="pool_grants")

    class Meta:
        ordering = ["pool", "team__name", "user__username"]
        constraints = [
            models.CheckConstraint(
                condition=(Q(team__isnull=False) & Q(user__isnull=True))
                | (Q(team__isnull=True) & Q(user__isnull=False)),
                name="poolgrant_team_xor_user",
                violation_error_message="A grant names either a team or a user: one of them, not both.",
            ),
            models.UniqueConstraint(fields=["pool", "team"], name="poolgrant_unique_team"),
            models.UniqueConstraint(fields=["pool", "user"], name="poolgrant_unique_user"),
        ]

    def __str__(self) -> str:
        who = f"team {self.team}" if self.team_id else f"user {self.user}"
        return f"{self.pool}: {who}"


class TeamQuota(models.Model):
    """A team's GPU quota in a pool for HIGH and NORMAL work (docs/design.md §9). LOW work may borrow
    idle GPUs beyond it and is preemptible. A team without a quota row may use the whole pool."""

    pool = models.ForeignKey(Pool, on_delete=models.CASCADE, related_name="quotas")
    team = models.ForeignKey("auth.Group", on_delete=models.CASCADE, related_name="pool_quotas")
    gpu = models.PositiveIntegerField(help_text="GPUs this team's HIGH and NORMAL work may hold in the pool.")

    class Meta:
        ordering = ["pool", "team__name"]
        constraints = [models.UniqueConstraint(fields=["pool", "team"], name="teamquota_unique_team")]

    def __str__(self) -> str:
        return f"{self.pool}: {self.team} {self.gpu} GPUs"


class PoolEpoch(models.Model):
    """Counters of what can change a placement verdict in a pool (docs/design.md §8).

    ``capacity_epoch`` goes up whenever capacity may have grown (reservations released, inventory
    changed); a gang proven unschedulable at one epoch is not solved again until it changes.
    ``inventory_epoch`` goes up on inventory changes only (the idle pool changed). A row of its own,
    not fields of :class:`Pool`: the placement cycle holds the pool row locked, and releasing capacity
    must not wait for it."""

    pool = models.OneToOneField(Pool, on_delete=models.CASCADE, primary_key=True, related_name="epoch")
    capacity_epoch = models.BigIntegerField(default=0)
    inventory_epoch = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.pool_id}: capacity {self.capacity_epoch}, inventory {self.inventory_epoch}"


class PoolPlatform(models.Model):
    """A platform of a pool, as OSMO's administrators define them: a named kind of its nodes and
    what tasks on it may use beyond a plain container (docs/spec.md, "Resource"). A spec's
    ``resources.<name>.platform`` must name one when the pool has any. ``node_selector`` and
    ``tolerations`` are for the pod builder; placement uses only the nodes carrying every label of
    ``node_selector`` for the platform's tasks (:mod:`workflows.scheduling.pod.platform_nodes`)."""

    pool = models.ForeignKey(Pool, on_delete=models.CASCADE, related_name="platforms")
    name = models.CharField(max_length=63, validators=[pool_name_validator])
    node_selector = models.JSONField(default=dict, blank=True,
                                     help_text="Node labels (key: value) that select the platform's nodes.")
    tolerations = models.JSONField(default=list, blank=True, help_text="Kubernetes tolerations for its pods.")
    allow_privileged = models.BooleanField(default=False, help_text="Tasks may ask for privileged: true.")
    allow_host_network = models.BooleanField(default=False, help_text="Tasks may ask for hostNetwork: true.")
    host_mounts = models.JSONField(default=list, blank=True,
                                   help_text="Host path prefixes that volumeMounts may use (a list of text).")

    class Meta:
        ordering = ["pool", "name"]
        constraints = [
            models.UniqueConstraint(fields=["pool", "name"], name="poolplatform_unique_name"),
            models.CheckConstraint(condition=Q(name__regex=POOL_NAME_RE), name="poolplatform_name_format"),
        ]

    def __str__(self) -> str:
        return f"{self.pool.name}:{self.name}"


class TopologyKey(models.Model):
    """One level of a pool's hierarchy (e.g. zone > spine > rack > gpu-clique), coarsest first."""

    pool = models.ForeignKey(Pool, on_delete=models.CASCADE, related_name="topology_keys")
    key = models.CharField(max_length=63, validators=[key_name_validator])
    label = models.CharField(
        max_length=253, validators=[label_key_validator], help_text="The node label holding this level's value."
    )
    position = models.PositiveIntegerField(default=0, help_text="0 is the coarsest level.")

    class Meta:
        ordering = ["pool", "position"]
        constraints = [
            models.UniqueConstraint(fields=["pool", "key"], name="topologykey_unique_key"),
            models.UniqueConstraint(fields=["pool", "label"], name="topologykey_unique_label"),
            models.UniqueConstraint(fields=["pool", "position"], name="topologykey_unique_position"),
            models.CheckConstraint(condition=Q(key__regex=KEY_NAME_RE), name="topologykey_key_format"),
            models.CheckConstraint(condition=Q(label__regex=LABEL_KEY_RE), name="topologykey_label_format"),
        ]

    def __str__(self) -> str:
        return f"{self.pool.name}:{self.key}"


class Node(models.Model):
    """A machine. Capacity units: gpu devices, cpu millicores, memory and storage bytes.
    ``used_*`` is external usage (things outside this service); reservations come on top."""

    pool = models.ForeignKey(Pool, on_delete=models.CASCADE, related_name="nodes")
    name = models.CharField(max_length=253, validators=[node_name_validator])
    labels = models.JSONField(default=dict, blank=True, help_text="Kubernetes-style labels: string keys and values.")
    gpu = models.PositiveIntegerField(default=0)
    cpu_millis = models.PositiveBigIntegerField(default=0)
    memory_bytes = models.PositiveBigIntegerField(default=0)
    storage_bytes = models.PositiveBigIntegerField(default=0)
    used_gpu = models.PositiveIntegerField(default=0)
    used_cpu_millis = models.PositiveBigIntegerField(default=0)
    used_memory_bytes = models.PositiveBigIntegerField(default=0)
    used_storage_bytes = models.PositiveBigIntegerField(default=0)
    schedulable = models.BooleanField(default=True, help_text="False when cordoned or tainted NoSchedule.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["pool", "name"]
        constraints = [
            models.UniqueConstraint(fields=["pool", "name"], name="node_unique_name"),
            models.CheckConstraint(condition=Q(name__regex=NODE_NAME_RE), name="node_name_format"),
            *(models.CheckConstraint(condition=Q(**{f"{r.used_field}__lte": F(r.capacity_field)}),
                                     name=f"node_used_{r.name}_lte_capacity") for r in RESOURCES),
        ]
        indexes = [models.Index(fields=["pool", "schedulable"], name="node_pool_schedulable")]

    def clean(self) -> None:
        if not isinstance(self.labels, dict) or not all(
            isinstance(key, str) and isinstance(value, str) for key, value in self.labels.items()
        ):
            raise ValidationError({"labels": "Labels must map strings to strings."})

    def __str__(self) -> str:
        return self.name


class Reservation(models.Model):
    """A task's requests held on its node from placement until the task ends (``released_at``).
    Rows are kept after release so that over-commitment can be checked at every recorded point, and
    outlive their node: deleting a machine (refused while it holds active reservations) leaves its
    history with ``node`` empty and the machine's name in ``node_name``.

    The facts of the holder that the cluster side needs are copied here when the row is written
    (:func:`scheduler.services.reservation_rows.reservations_insert`): its task's id, its team and
    whether it is preemptible. The scheduler app never reads the workflows app's tables; the
    workflows app joins its tasks to these rows by ``task_id`` (docs/architecture.md)."""

    task_id = models.BigIntegerField(unique=True, help_text="The holding task (workflows' Task id).")
    team = models.ForeignKey(
        "auth.Group", null=True, blank=True, on_delete=models.SET_NULL, related_name="reservations",
        help_text="The team whose quota this holds against, unless preemptible.",
    )
    preemptible = models.BooleanField(
        default=False, help_text="LOW work: may be preempted, and counts against no quota (docs/design.md §9).",
    )
    node = models.ForeignKey(Node, on_delete=models.SET_NULL, null=True, blank=True, related_name="reservations")
    node_name = models.CharField(max_length=253, blank=True, default="",
                                 help_text="The node's name, kept when the node is deleted.")
    pool = models.ForeignKey(Pool, on_delete=models.CASCADE, related_name="reservations")
    gpu = models.PositiveIntegerField(default=0)
    cpu_millis = models.PositiveBigIntegerField(default=0)
    memory_bytes = models.PositiveBigIntegerField(default=0)
    storage_bytes = models.PositiveBigIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    released_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["pk"]
        indexes = [
            models.Index(fields=["node"], condition=Q(released_at__isnull=True), name="reservation_active_node"),
            models.Index(fields=["pool"], condition=Q(released_at__isnull=True), name="reservation_active_pool"),
            # Fair share reads a pool's rows released within its last half-lives (docs/design.md §9).
            models.Index(fields=["pool", "released_at"], condition=Q(released_at__isnull=False),
                         name="reservation_released_pool"),
        ]

    def __str__(self) -> str:
        return f"{self.task_id}@{self.node_id}"




class WorkerHeartbeat(models.Model):
    """Written by the ``scheduler.worker_heartbeat`` task: proof that a worker reaches the database."""

    token = models.CharField(max_length=64, unique=True)
    hostname = models.CharField(max_length=255, blank=True)
    at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-at"]

    def __str__(self) -> str:
        return f"{self.hostname or 'worker'} @ {self.at:%Y-%m-%d %H:%M:%S}"
