"""The service's own settings (``OSMO_*``), one frozen dataclass per concern: each knob's variable,
type, default and meaning in one place.

:func:`read_environment` reads every group once, when ``osmo.settings.base`` loads, with
django-environ (the parser the rest of the settings use, so lists are comma-separated and mappings
``key=value,key=value`` as before); a value of the wrong type, a negative number or a word outside a
knob's choices stops start-up with :class:`~django.core.exceptions.ImproperlyConfigured` naming the
variable. Each knob is then published flat under its Django setting name (``settings.OSMO_...``),
which is what tests override; :mod:`osmo.config` builds the groups from those names on each call.

Which knobs are deployment settings and which are pool policy (the inventory document) is said in
docs/operations.md, "Settings (environment)".
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import environ
from django.core.exceptions import ImproperlyConfigured

# What django-environ reads as true, and the words that say false: anything else is a typo.
_BOOL_WORDS = {"true", "on", "ok", "y", "yes", "1", "false", "off", "n", "no", "0", ""}


def knob(env: str, default: Any, doc: str, *, setting: str = "", choices: tuple[str, ...] = (),
         derive: Callable[[Path], Any] | None = None) -> Any:
    """A field read from ``env`` (published as Django setting ``setting``, by default the same name).
    ``derive`` computes the default from the data folder (``OSMO_DATA_DIR``)."""
    meta = {"env": env, "setting": setting or env, "doc": doc, "kind": type(default), "choices": choices,
            "derive": derive}
    if isinstance(default, dict):
        return field(default_factory=dict, metadata=meta)
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class Scheduler:
    """The placement cycle and its tick (docs/design.md §5-§9)."""

    placement_tick_seconds: float = knob("OSMO_PLACEMENT_TICK_SECONDS", 2.0, "beat interval of the safety-net tick")
    placement_coalesce_seconds: float = knob("OSMO_PLACEMENT_COALESCE_SECONDS", 0.2,
                                             "with Redis, a requested cycle starts this long after its first request")
    tick_without_beat: bool = knob("OSMO_TICK_WITHOUT_BEAT", True, "workers keep the tick going if beat dies")
    # refuse_never_fits, starvation_seconds and preemption_grace_seconds are the defaults of pools that set
    # no policy of their own (Pool.refuse_never_fits, starvation_wait, preemption_grace): read them through
    # the pool (Pool.refuses_never_fits() ...), never here.
    refuse_never_fits: bool = knob("OSMO_REFUSE_NEVER_FITS", True,
                                   "refuse at submission a gang that does not fit the whole inventory idle")
    starvation_seconds: int = knob("OSMO_STARVATION_SECONDS", 600,
                                   "a gang that does not fit and waited this long stops backfill behind it")
    starvation_max_holds: int = knob("OSMO_STARVATION_MAX_HOLDS", 8, "starving gangs holding machines at once")
    solve_max_seconds: float = knob("OSMO_SOLVE_MAX_SECONDS", 5.0, "wall-clock ceiling of one solve")
    cycle_budget_seconds: float = knob("OSMO_CYCLE_BUDGET_SECONDS", 20.0,
                                       "a cycle stops trying further groups after this, commits and continues")
    preemption_enabled: bool = knob("OSMO_PREEMPTION_ENABLED", True, "HIGH/NORMAL gangs within quota evict LOW gangs")
    preemption_grace_seconds: int = knob("OSMO_PREEMPTION_GRACE_SECONDS", 30,
                                         "grace period of a preempted pod (pools' default)")
    preemption_max_solves: int = knob("OSMO_PREEMPTION_MAX_SOLVES", 64, "feasibility questions of one victim search")
    preemption_max_seconds: float = knob("OSMO_PREEMPTION_MAX_SECONDS", 5.0, "wall-clock ceiling of one victim search")


@dataclass(frozen=True)
class Dispatch:
    """Handing placed gangs to their backend."""

    batch_gangs: int = knob("OSMO_DISPATCH_BATCH_GANGS", 16, "gangs per dispatch message")
    redispatch_after_seconds: int = knob("OSMO_REDISPATCH_AFTER_SECONDS", 20,
                                         "placed gangs with uncreated pods are dispatched again after this")
    deadline_seconds: int = knob("OSMO_DISPATCH_DEADLINE_SECONDS", 600,
                                 "placed gangs whose pods still do not exist after this fail")


@dataclass(frozen=True)
class Kubernetes:
    """The Kubernetes backend (docs/kubernetes.md)."""

    sync_seconds: float = knob("OSMO_K8S_SYNC_SECONDS", 30.0, "how often nodes and other pods are read; 0: off")
    sync_page_size: int = knob("OSMO_K8S_SYNC_PAGE_SIZE", 500, "items per list request of that sync")
    tolerated_taints: tuple[str, ...] = knob("OSMO_K8S_TOLERATED_TAINTS", (),
                                             "taint keys that do not make a node unschedulable")
    unschedulable_seconds: float = knob("OSMO_K8S_UNSCHEDULABLE_SECONDS", 60.0,
                                        "a pod refused this long sends its gang back to the queue")
    unschedulable_requeues: int = knob("OSMO_K8S_UNSCHEDULABLE_REQUEUES", 3, "requeues per gang before it fails")
    pod_retention_succeeded_seconds: int = knob("OSMO_POD_RETENTION_SUCCEEDED_SECONDS", 3600,
                                                "a succeeded pod is deleted this long after its task ended")
    pod_retention_failed_seconds: int = knob("OSMO_POD_RETENTION_FAILED_SECONDS", 86400,
                                             "a failed pod is kept this long")
    runtime_image: str = knob("OSMO_RUNTIME_IMAGE", "", "Kubernetes pools run tasks through the runtime of this image")


@dataclass(frozen=True)
class Runtime:
    """The task runtime and the local backend's sandbox (docs/runtime.md)."""

    service_url: str = knob("OSMO_RUNTIME_SERVICE_URL", "http://127.0.0.1:8000",
                            "the service's address as the tasks reach it")
    task_api_access: bool = knob("OSMO_TASK_API_ACCESS", True, "a task's `osmo` command acts as its submitter")
    task_start_timeout_seconds: float = knob("OSMO_TASK_START_TIMEOUT_SECONDS", 600.0,
                                             "a group's barrier not open this long after start fails the task")
    artifact_store: str = knob("OSMO_ARTIFACT_STORE", "", "the default artifact store URL",
                               derive=lambda data_dir: (data_dir / "artifacts").as_uri())
    artifact_stores: Mapping[str, str] = knob("OSMO_ARTIFACT_STORES", {}, "artifact store per pool")
    local_writable: tuple[str, ...] = knob("OSMO_LOCAL_WRITABLE", ("/tmp", "/var/tmp"),
                                           "folders a local task may write as file:// outputs")
    local_network: str = knob("OSMO_LOCAL_NETWORK", "workflow", "the local sandbox's network",
                              choices=("workflow", "host"))
    local_max_processes: int = knob("OSMO_LOCAL_MAX_PROCESSES", 1024, "most processes of one local task")


@dataclass(frozen=True)
class Sessions:
    """Sessions into running tasks (`osmo workflow exec`, `port-forward`)."""

    idle_seconds: int = knob("OSMO_SESSION_IDLE_SECONDS", 1800, "a session idle this long is closed")
    max_seconds: int = knob("OSMO_SESSION_MAX_SECONDS", 43200, "the longest a session stays open")
    ticket_seconds: int = knob("OSMO_SESSION_TICKET_SECONDS", 30, "a ticket opens its websocket within this")
    staff: bool = knob("OSMO_SESSION_STAFF", False, "staff may open sessions into anyone's tasks")


@dataclass(frozen=True)
class Security:
    """Limits per user, keys and the hostile-input guards."""

    credentials_keys: tuple[str, ...] = knob("OSMO_CREDENTIALS_KEYS", (), "the credential store's Fernet keys")
    max_active_workflows_per_user: int = knob("OSMO_MAX_ACTIVE_WORKFLOWS_PER_USER", 5000,
                                              "workflows one user may have not ended; 0: no limit")
    max_credentials_per_user: int = knob("OSMO_MAX_CREDENTIALS_PER_USER", 500, "credentials one user may keep")
    access_token_max_days: int = knob("OSMO_ACCESS_TOKEN_MAX_DAYS", 365, "how far ahead an access token may expire")
    template_max_memory_mb: int = knob("OSMO_TEMPLATE_MAX_MEMORY_MB", 256, "address space of a template render")
    template_max_cpu_seconds: int = knob("OSMO_TEMPLATE_MAX_CPU_SECONDS", 2, "CPU seconds of a template render")
    template_max_wall_seconds: float = knob("OSMO_TEMPLATE_MAX_WALL_SECONDS", 10.0, "wall seconds of a template render")


@dataclass(frozen=True)
class Web:
    """The web process: pages, throttles and the client address."""

    page_refresh_ms: int = knob("OSMO_PAGE_REFRESH_MS", 4000, "how often pages fetch their live region")
    trusted_proxies: int = knob("OSMO_TRUSTED_PROXIES", 0, "proxies whose X-Forwarded-For is trusted")
    throttle_anon: str = knob("OSMO_THROTTLE_ANON", "120/min", "anonymous API rate (REST_FRAMEWORK)")
    throttle_user: str = knob("OSMO_THROTTLE_USER", "12000/min", "per-user API rate (REST_FRAMEWORK)")
    throttle_auth_failure: str = knob("OSMO_THROTTLE_AUTH_FAILURE", "20/min", "failed authentications per address")
    cache_timeout_seconds: float = knob("OSMO_CACHE_TIMEOUT_SECONDS", 1.0, "Redis cache connect and read timeout")


@dataclass(frozen=True)
class Observability:
    """Probes and metrics (docs/operations.md)."""

    ready_tick_max_age_seconds: float = knob("OSMO_READY_TICK_MAX_AGE_SECONDS", 30.0, "/readyz: oldest last tick")
    ready_cycle_max_age_seconds: float = knob("OSMO_READY_CYCLE_MAX_AGE_SECONDS", 60.0,
                                              "/readyz: longest queue wait without a cycle")
    metrics_dir: Path = knob("PROMETHEUS_MULTIPROC_DIR", Path(), "metrics directory shared by every process",
                             setting="OSMO_METRICS_DIR", derive=lambda data_dir: data_dir / "metrics")
    metrics_token: str = knob("OSMO_METRICS_TOKEN", "", "bearer token that reads /metrics")


@dataclass(frozen=True)
class Sso:
    """Single sign-on (OpenID Connect); off while ``issuer`` is empty. Several are published under
    mozilla-django-oidc's own setting names (``OIDC_*``)."""

    issuer: str = knob("OSMO_OIDC_ISSUER", "", "the provider; empty: no single sign-on")
    provider_name: str = knob("OSMO_OIDC_PROVIDER_NAME", "single sign-on", "the login page's button")
    client_id: str = knob("OSMO_OIDC_CLIENT_ID", "", "browser client", setting="OIDC_RP_CLIENT_ID")
    client_secret: str = knob("OSMO_OIDC_CLIENT_SECRET", "", "browser client's secret", setting="OIDC_RP_CLIENT_SECRET")
    authorization_endpoint: str = knob("OSMO_OIDC_AUTHORIZATION_ENDPOINT", "", "",
                                       setting="OIDC_OP_AUTHORIZATION_ENDPOINT")
    token_endpoint: str = knob("OSMO_OIDC_TOKEN_ENDPOINT", "", "", setting="OIDC_OP_TOKEN_ENDPOINT")
    userinfo_endpoint: str = knob("OSMO_OIDC_USERINFO_ENDPOINT", "", "", setting="OIDC_OP_USER_ENDPOINT")
    jwks_endpoint: str = knob("OSMO_OIDC_JWKS_ENDPOINT", "", "", setting="OIDC_OP_JWKS_ENDPOINT")
    sign_algo: str = knob("OSMO_OIDC_SIGN_ALGO", "RS256", "", setting="OIDC_RP_SIGN_ALGO")
    scopes: str = knob("OSMO_OIDC_SCOPES", "openid profile email groups", "", setting="OIDC_RP_SCOPES")
    timeout_seconds: int = knob("OSMO_OIDC_TIMEOUT_SECONDS", 5, "requests to the provider", setting="OIDC_TIMEOUT")
    renew_seconds: int = knob("OSMO_OIDC_RENEW_SECONDS", 900, "browser sessions renewed this often",
                              setting="OIDC_RENEW_ID_TOKEN_EXPIRY_SECONDS")
    end_session_endpoint: str = knob("OSMO_OIDC_END_SESSION_ENDPOINT", "", "logout at the provider too")
    device_authorization_endpoint: str = knob("OSMO_OIDC_DEVICE_AUTHORIZATION_ENDPOINT", "", "osmo login --device")
    cli_client_id: str = knob("OSMO_OIDC_CLI_CLIENT_ID", "", "the CLI's public client")
    audience: tuple[str, ...] = knob("OSMO_OIDC_AUDIENCE", (), "accepted `aud`; empty: the client ids")
    username_claim: str = knob("OSMO_OIDC_USERNAME_CLAIM", "preferred_username", "")
    groups_claim: str = knob("OSMO_OIDC_GROUPS_CLAIM", "groups", "")
    group_teams: Mapping[str, str] = knob("OSMO_OIDC_GROUP_TEAMS", {}, "provider group = team")
    staff_group: str = knob("OSMO_OIDC_STAFF_GROUP", "", "members are staff")
    jwks_refresh_seconds: int = knob("OSMO_OIDC_JWKS_REFRESH_SECONDS", 300, "the JWKS is fetched again after this")
    jwks_stale_seconds: int = knob("OSMO_OIDC_JWKS_STALE_SECONDS", 86400, "the last JWKS serves this long")


GROUPS: dict[str, type] = {"scheduler": Scheduler, "dispatch": Dispatch, "kubernetes": Kubernetes,
                           "runtime": Runtime, "sessions": Sessions, "security": Security, "web": Web,
                           "observability": Observability, "sso": Sso}


@dataclass(frozen=True)
class Config:
    scheduler: Scheduler
    dispatch: Dispatch
    kubernetes: Kubernetes
    runtime: Runtime
    sessions: Sessions
    security: Security
    web: Web
    observability: Observability
    sso: Sso

    def settings(self) -> dict[str, Any]:
        """Every knob under its Django setting name, lists and mappings as Django settings hold them."""
        out: dict[str, Any] = {}
        for name in GROUPS:
            group = getattr(self, name)
            for f in fields(group):
                value = getattr(group, f.name)
                out[f.metadata["setting"]] = list(value) if isinstance(value, tuple) else value
        return out


def _read(env: environ.Env, f: Any, data_dir: Path) -> Any:
    meta = f.metadata
    name, kind = meta["env"], meta["kind"]
    default = meta["derive"](data_dir) if meta["derive"] else (f.default if kind is not dict else {})
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        if kind is bool:
            if raw.strip().lower() not in _BOOL_WORDS:
                raise ValueError("expected true or false (1/0, yes/no, on/off)")
            value: Any = env.bool(name)
        elif kind is int:
            value = env.int(name)
        elif kind is float:
            value = env.float(name)
        elif kind is tuple:
            value = tuple(env.list(name))
        elif kind is dict:
            value = env.dict(name)
        elif issubclass(kind, Path):
            value = Path(env.str(name))
        else:
            value = env.str(name)
    except ValueError as error:
        raise ImproperlyConfigured(f"{name}={raw!r} is not valid ({meta['doc'] or name}): {error}") from error
    if kind in (int, float) and value < 0:
        raise ImproperlyConfigured(f"{name}={raw!r} is not valid: it must be 0 or more")
    if meta["choices"] and value not in meta["choices"]:
        raise ImproperlyConfigured(f"{name}={raw!r} is not valid: one of {', '.join(meta['choices'])}")
    return value


def read_environment(env: environ.Env, data_dir: Path) -> Config:
    """Every group from the environment, checked: start-up stops on the first invalid value."""
    return Config(**{name: cls(**{f.name: _read(env, f, data_dir) for f in fields(cls)})
                     for name, cls in GROUPS.items()})


def variables() -> dict[str, tuple[str, str]]:
    """Every variable the groups read: its group and field."""
    return {f.metadata["env"]: (name, f.name) for name, cls in GROUPS.items() for f in fields(cls)}
