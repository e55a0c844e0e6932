"""Settings shared by every environment. Everything deployment-specific comes from the environment.

With no environment set, the service runs on its embedded default: SQLite (WAL, IMMEDIATE
transactions) and Celery's filesystem broker, both under ``OSMO_DATA_DIR``. With ``DATABASE_URL`` and
``REDIS_URL`` set it runs on PostgreSQL (psycopg 3) and Redis.
"""

from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import environ
from kombu import Exchange
from kombu import Queue as KombuQueue

from osmo import logs

BASE_DIR = Path(__file__).resolve().parent.parent.parent

env = environ.Env()

# ------------------------------------------------------------------------------------------------
# Core
# ------------------------------------------------------------------------------------------------
DATA_DIR = Path(env.str("OSMO_DATA_DIR", default=str(BASE_DIR / "var")))
DATA_DIR.mkdir(parents=True, exist_ok=True)

SECRET_KEY = env.str("DJANGO_SECRET_KEY", default=env.str("SECRET_KEY", default=""))
DEBUG = env.bool("DEBUG", default=False)
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "[::1]"])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    # Before staticfiles: runserver leaves static files to WhiteNoise too, so development serves them
    # the way production does.
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "scheduler.apps.SchedulerConfig",
    "workflows.apps.WorkflowsConfig",
    "credentials.apps.CredentialsConfig",
    "catalog.apps.CatalogConfig",
    "pages.apps.PagesConfig",
    "ops.apps.OpsConfig",
]

MIDDLEWARE = [
    # First: /healthz and /readyz answer before host validation and the request transaction.
    "ops.health.ProbeMiddleware",
    # Under /api/, Django's refusals (unknown URL, a Host not allowed) as the envelope with DEBUG on too.
    "osmo.api.middleware.ApiRefusalEnvelopeMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # Static files (pages, admin, /api/docs/) straight from the WSGI app, before sessions and auth.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "osmo.urls"
WSGI_APPLICATION = "osmo.wsgi.application"
# HTTP and the sessions' websockets (Django Channels; osmo/asgi.py): make run and the sessions Deployment.
ASGI_APPLICATION = "osmo.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# ------------------------------------------------------------------------------------------------
# Database
# ------------------------------------------------------------------------------------------------
SQLITE_PATH = DATA_DIR / "osmo.sqlite3"
DATABASES = {"default": env.db("DATABASE_URL", default=f"sqlite:///{SQLITE_PATH}")}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets the web process read while a worker writes; IMMEDIATE takes the write lock at BEGIN
    # so two writers queue on the timeout instead of failing with "database is locked" mid-way.
    DATABASES["default"]["OPTIONS"] = {
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA busy_timeout=20000;",
    }
else:
    DATABASES["default"].setdefault("CONN_MAX_AGE", env.int("CONN_MAX_AGE", default=60))
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
    # An unreachable server fails a request (503) and a readiness probe within seconds, not after the
    # operating system's TCP timeout.
    DATABASES["default"].setdefault("OPTIONS", {}).setdefault(
        "connect_timeout", env.int("DATABASE_CONNECT_TIMEOUT", default=5)
    )
    if env.bool("DATABASE_POOL", default=False):
        # A pool of connections (psycopg_pool) instead of persistent ones: under ASGI (osmo/asgi.py turns
        # it on) each request runs in a thread of its own, so a per-thread persistent connection is never
        # reused and every request would open one.
        DATABASES["default"]["CONN_MAX_AGE"] = 0
        DATABASES["default"]["OPTIONS"]["pool"] = {
            "min_size": 2, "max_size": env.int("DATABASE_POOL_MAX", default=20), "timeout": 10}
    # Parameters sent apart from the SQL, and a query run DATABASE_PREPARE_THRESHOLD times on a
    # connection prepared there (psycopg's automatic prepared statements): PostgreSQL stops parsing and
    # planning the queries every request and cycle repeats, and psycopg stops quoting values into the
    # SQL text. Off (DATABASE_PREPARED_STATEMENTS=false) behind a pooler that cannot keep prepared
    # statements (PgBouncer in transaction mode before 1.21, or without max_prepared_statements).
    if env.bool("DATABASE_PREPARED_STATEMENTS", default=True):
        DATABASES["default"]["OPTIONS"]["server_side_binding"] = True
        DATABASES["default"]["OPTIONS"]["prepare_threshold"] = env.int("DATABASE_PREPARE_THRESHOLD", default=5)
# One transaction per request on PostgreSQL. Not on SQLite: there every transaction is IMMEDIATE
# (takes the write lock), so wrapping GETs would make every page view queue behind a placement
# cycle; every write already runs in its service's own transaction.
DATABASES["default"]["ATOMIC_REQUESTS"] = DATABASES["default"]["ENGINE"] != "django.db.backends.sqlite3"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# ------------------------------------------------------------------------------------------------
# Auth, i18n, static
# ------------------------------------------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
# Where `collectstatic` gathers files and WhiteNoise serves them from. The image collects into a path
# of its own (STATIC_ROOT is set in the Dockerfile) so that a data volume mounted over OSMO_DATA_DIR
# does not hide them.
STATIC_ROOT = Path(env.str("STATIC_ROOT", default=str(DATA_DIR / "static")))
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
# Hashed, compressed copies need `collectstatic`: osmo.settings.production turns them on.
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}

# ------------------------------------------------------------------------------------------------
# REST framework and OpenAPI
# ------------------------------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PAGINATION_CLASS": "osmo.api.pagination.OsmoLimitOffsetPagination",
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "osmo.api.exception_handler.osmo_exception_handler",
    "DEFAULT_PARSER_CLASSES": [
        "osmo.api.parsers.JSONParser",
        "osmo.api.parsers.YAMLTextParser",
        "osmo.api.parsers.XYAMLTextParser",
        "osmo.api.parsers.TextYAMLParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "PAGE_SIZE": 50,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "OSMO-style workflow service",
    "DESCRIPTION": "Submit GPU workflows with topology constraint trees; inspect pools and placements.",
    "VERSION": "0.1.0",
    "COMPONENT_SPLIT_REQUEST": True,
    "ENUM_NAME_OVERRIDES": {
        "WorkflowStatusEnum": "workflows.choices.WorkflowStatus",
        "TaskStatusEnum": "workflows.choices.TaskStatus",
        "PriorityEnum": "workflows.choices.Priority",
        "PoolStatusEnum": "scheduler.choices.PoolStatus",
        "BackendKindEnum": "scheduler.choices.DispatchBackend",
        "KindEnum": ["generic", "registry", "data"],  # the credentials' kinds (credentials.kinds.Kind)
        "PlacementStatusEnum": ["placed", "unschedulable", "undecided"],
    },
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
    # Served from this machine: the docs page must work without reaching a CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

# ------------------------------------------------------------------------------------------------
# Celery
# ------------------------------------------------------------------------------------------------
REDIS_URL = env.str("REDIS_URL", default="")
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_SOFT_TIME_LIMIT = 60
CELERY_TASK_TIME_LIMIT = 90
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Celery's Django fixup closes the worker's database connection before and after every task unless
# this is set, so each task opened a new PostgreSQL connection (a server process forked, its catalog
# caches warmed again): most of the database's CPU under load. Workers keep their connection like the
# web process does, closed after CONN_MAX_AGE or when unusable (osmo.celery), and at the latest after
# this many tasks.
CELERY_DB_REUSE_MAX = env.int("CELERY_DB_REUSE_MAX", default=1000)
CELERY_TASK_DEFAULT_QUEUE = "default"
# Every queue of the service (osmo.celery.Queue), declared as Celery would create them on demand, so
# that a worker started without -Q consumes all of them (not only the default one).
CELERY_TASK_QUEUES = [
    KombuQueue(name, Exchange(name, type="direct"), routing_key=name) for name in ("scheduler", "dispatch", "default")
]
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Workers reconnect to a broker that went away for as long as it takes (Celery's default gives up after
# 100 attempts), and survive a known crash of kombu's Redis transport on reconnection (osmo.worker_consumer).
CELERY_BROKER_CONNECTION_RETRY = True
CELERY_BROKER_CONNECTION_MAX_RETRIES = None
CELERY_WORKER_CONSUMER = "osmo.worker_consumer:Consumer"
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_BEAT_SCHEDULE_FILENAME = str(DATA_DIR / "celerybeat-schedule")
CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, Any]
if REDIS_URL:
    CELERY_BROKER_URL = REDIS_URL
    # Must exceed the longest task's hard time limit, or Redis redelivers a running acks_late task.
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 3600}
else:
    BROKER_DIR = DATA_DIR / "broker"
    for _sub in ("queue", "processed", "control"):
        (BROKER_DIR / _sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_URL = "osmofs://localhost//"  # kombu's filesystem transport, message files written whole: osmo.broker
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        # Producers write into data_folder_out, consumers read data_folder_in: one shared folder.
        "data_folder_in": str(BROKER_DIR / "queue"),
        "data_folder_out": str(BROKER_DIR / "queue"),
        "processed_folder": str(BROKER_DIR / "processed"),
        "store_processed": False,
        # kombu keeps exchange bindings here; its default is a folder in the working directory.
        "control_folder": str(BROKER_DIR / "control"),
    }
    # The filesystem transport has no broadcast exchange for remote control.
    CELERY_WORKER_ENABLE_REMOTE_CONTROL = False

# ------------------------------------------------------------------------------------------------
# Service
# ------------------------------------------------------------------------------------------------
# The periodic tick re-drives placement, pod status sync and stranded dispatches.
OSMO_PLACEMENT_TICK_SECONDS = env.float("OSMO_PLACEMENT_TICK_SECONDS", default=2.0)
# A requested placement cycle starts this long after the first request (with Redis), so the requests of
# that window (a stream of submissions, a sync's releases) share one cycle (scheduler.jobs).
OSMO_PLACEMENT_COALESCE_SECONDS = env.float("OSMO_PLACEMENT_COALESCE_SECONDS", default=0.2)
# Workers keep the tick going themselves (one follow-up chain beside beat), so placement and pod sync
# continue if the beat process dies; a worker sends a first tick when it starts.
OSMO_TICK_WITHOUT_BEAT = env.bool("OSMO_TICK_WITHOUT_BEAT", default=True)
# Refuse at submission (400 never_fits) a gang that cannot be placed even on the whole inventory as if
# idle. Turn off for pools that grow (autoscaling), where such a gang may fit later.
OSMO_REFUSE_NEVER_FITS = env.bool("OSMO_REFUSE_NEVER_FITS", default=True)
# A gang that does not fit and has waited this long stops lower/equal-priority backfill behind it.
OSMO_STARVATION_SECONDS = env.int("OSMO_STARVATION_SECONDS", default=600)
# How many starving gangs hold machines at once (docs/design.md §6); 1: one at a time (EASY backfill).
OSMO_STARVATION_MAX_HOLDS = env.int("OSMO_STARVATION_MAX_HOLDS", default=8)
# Workflows one user may have that have not ended (0: no limit); a submission past it answers 429.
OSMO_MAX_ACTIVE_WORKFLOWS_PER_USER = env.int("OSMO_MAX_ACTIVE_WORKFLOWS_PER_USER", default=5000)
# Credentials one user may keep (0: no limit); creating one past it answers 409 credential_limit.
OSMO_MAX_CREDENTIALS_PER_USER = env.int("OSMO_MAX_CREDENTIALS_PER_USER", default=500)
# How far ahead a personal access token may expire (days; `osmo token set --expires-at`).
OSMO_ACCESS_TOKEN_MAX_DAYS = env.int("OSMO_ACCESS_TOKEN_MAX_DAYS", default=365)
# Wall-clock ceiling of one solve in the placement cycle (docs/design.md §5): "undecided", retried.
OSMO_SOLVE_MAX_SECONDS = env.float("OSMO_SOLVE_MAX_SECONDS", default=5.0)
# The gangs a placement cycle placed are dispatched in messages of up to this many gangs each
# (workflows.groups_dispatch); 1 sends one message per gang.
OSMO_DISPATCH_BATCH_GANGS = env.int("OSMO_DISPATCH_BATCH_GANGS", default=16)
# A placed gang whose pods were not created after this long is dispatched again...
OSMO_REDISPATCH_AFTER_SECONDS = env.int("OSMO_REDISPATCH_AFTER_SECONDS", default=20)
# ...and fails with FAILED_BACKEND_ERROR (capacity released) if its pods still do not exist after this.
OSMO_DISPATCH_DEADLINE_SECONDS = env.int("OSMO_DISPATCH_DEADLINE_SECONDS", default=600)
# Kubernetes: how long a finished pod is kept (for `kubectl logs` / `describe`) before the pod sync
# deletes it, separately for pods that succeeded and pods that failed (docs/kubernetes.md).
OSMO_POD_RETENTION_SUCCEEDED_SECONDS = env.int("OSMO_POD_RETENTION_SUCCEEDED_SECONDS", default=3600)
OSMO_POD_RETENTION_FAILED_SECONDS = env.int("OSMO_POD_RETENTION_FAILED_SECONDS", default=86400)
# Preemption (docs/design.md §9): HIGH/NORMAL gangs within quota evict whole LOW gangs to fit.
OSMO_PREEMPTION_ENABLED = env.bool("OSMO_PREEMPTION_ENABLED", default=True)
OSMO_PREEMPTION_GRACE_SECONDS = env.int("OSMO_PREEMPTION_GRACE_SECONDS", default=30)
OSMO_PREEMPTION_MAX_SOLVES = env.int("OSMO_PREEMPTION_MAX_SOLVES", default=64)
OSMO_PREEMPTION_MAX_SECONDS = env.float("OSMO_PREEMPTION_MAX_SECONDS", default=5.0)
# Spec templates render in a child process with these operating-system limits (docs/spec.md,
# "Templates"): address space, CPU seconds and wall-clock seconds; past one, the submission is refused
# with 400 naming it. Legitimate templates render in milliseconds: 2 s of CPU is what a hostile one
# may take from a rendering child before its refusal.
OSMO_TEMPLATE_MAX_MEMORY_MB = env.int("OSMO_TEMPLATE_MAX_MEMORY_MB", default=256)
OSMO_TEMPLATE_MAX_CPU_SECONDS = env.int("OSMO_TEMPLATE_MAX_CPU_SECONDS", default=2)
OSMO_TEMPLATE_MAX_WALL_SECONDS = env.float("OSMO_TEMPLATE_MAX_WALL_SECONDS", default=10.0)
# A placement cycle stops trying further groups after this long, commits, and requests another cycle.
OSMO_CYCLE_BUDGET_SECONDS = env.float("OSMO_CYCLE_BUDGET_SECONDS", default=20.0)

# File parts of a multipart request count against DATA_UPLOAD_MAX_MEMORY_SIZE too (osmo/uploads.py).
FILE_UPLOAD_HANDLERS = [
    "osmo.uploads.BoundedUploadHandler",
    "django.core.files.uploadhandler.MemoryFileUploadHandler",
    "django.core.files.uploadhandler.TemporaryFileUploadHandler",
]
# The task runtime (docs/runtime.md). The artifact store carries `task` inputs between tasks: a URL per
# pool (OSMO_ARTIFACT_STORES="pool-a=s3://bucket/osmo,pool-b=file:///data/artifacts"), else the default.
OSMO_ARTIFACT_STORE = env.str("OSMO_ARTIFACT_STORE", default=(DATA_DIR / "artifacts").as_uri())
OSMO_ARTIFACT_STORES = env.dict("OSMO_ARTIFACT_STORES", default={})
# The folders (and everything below them) a task of the local backend may name as a file:// output,
# checkpoint or artifact store: bound writable into its sandbox (docs/runtime.md). The file:// artifact
# stores above are added to them.
OSMO_LOCAL_WRITABLE = env.list("OSMO_LOCAL_WRITABLE", default=["/tmp", "/var/tmp"])
# The local backend's sandbox (docs/runtime.md, "What a task can and cannot do"): "workflow" gives each
# workflow a network namespace of its own (pasta, Debian package passt: the outside and the service's
# port, not the host's loopback); "host" shares the host's network with every task (no isolation).
OSMO_LOCAL_NETWORK = env.str("OSMO_LOCAL_NETWORK", default="workflow")
# The most processes (and threads) one local task may run at once; past it the task is ended.
OSMO_LOCAL_MAX_PROCESSES = env.int("OSMO_LOCAL_MAX_PROCESSES", default=1024)
# Where a task's runtime reaches the service (the barrier): the address the tasks can connect to.
OSMO_RUNTIME_SERVICE_URL = env.str("OSMO_RUNTIME_SERVICE_URL", default="http://127.0.0.1:8000")
# Tasks call the service at that address (the barrier, their `osmo` command), with its host name in
# `Host`: on Kubernetes the web Service's in-cluster name, which is not the ingress's ALLOWED_HOSTS.
_runtime_host = urlsplit(OSMO_RUNTIME_SERVICE_URL).hostname or ""
_runtime_host = f"[{_runtime_host}]" if ":" in _runtime_host else _runtime_host
if _runtime_host and _runtime_host not in ALLOWED_HOSTS and "*" not in ALLOWED_HOSTS:
    ALLOWED_HOSTS.append(_runtime_host)
# Whether a task run by the runtime gets the `osmo` command logged in as its submitter (OSMO_URL and
# OSMO_TOKEN in its environment; the token works while the task runs, for workflows and pools only).
OSMO_TASK_API_ACCESS = env.bool("OSMO_TASK_API_ACCESS", default=True)
# Sessions into running tasks (osmo workflow exec / port-forward; docs/operations.md, "Sessions"): a session
# with no byte either way for OSMO_SESSION_IDLE_SECONDS, or open for OSMO_SESSION_MAX_SECONDS, is closed;
# a ticket (POST .../sessions/) opens its websocket within OSMO_SESSION_TICKET_SECONDS, once. Only the
# workflow's owner opens sessions; OSMO_SESSION_STAFF=1 lets staff into any workflow's tasks too.
OSMO_SESSION_IDLE_SECONDS = env.int("OSMO_SESSION_IDLE_SECONDS", default=1800)
OSMO_SESSION_MAX_SECONDS = env.int("OSMO_SESSION_MAX_SECONDS", default=43200)
OSMO_SESSION_TICKET_SECONDS = env.int("OSMO_SESSION_TICKET_SECONDS", default=30)
OSMO_SESSION_STAFF = env.bool("OSMO_SESSION_STAFF", default=False)
# Kubernetes pools run tasks through the runtime when this image (the Dockerfile's `runtime` target) is set.
OSMO_RUNTIME_IMAGE = env.str("OSMO_RUNTIME_IMAGE", default="")
# A task whose group's barrier has not opened this long after its runtime started fails (OSMO code 3005).
OSMO_TASK_START_TIMEOUT_SECONDS = env.float("OSMO_TASK_START_TIMEOUT_SECONDS", default=600.0)

# The credential store's Fernet keys (docs/operations.md "Credentials"): comma-separated, the first
# encrypts, every one decrypts (rotation: put the new key first, run `manage.py credentials_rotate`,
# then drop the old one). Production requires it; the local and test settings derive one from SECRET_KEY.
OSMO_CREDENTIALS_KEYS = env.list("OSMO_CREDENTIALS_KEYS", default=[])

# Which queue each task name goes to: the one routing table (scheduler.jobs sends tasks by name).
CELERY_TASK_ROUTES = {
    "workflows.placement_cycle_run": {"queue": "scheduler"},
    "workflows.pods_sync": {"queue": "scheduler"},
    "workflows.tick": {"queue": "scheduler"},
    "workflows.tick_watch": {"queue": "scheduler"},
    "workflows.group_dispatch": {"queue": "dispatch"},
    "workflows.groups_dispatch": {"queue": "dispatch"},
    "workflows.pod_delete": {"queue": "dispatch"},
    "workflows.pods_evict": {"queue": "dispatch"},
    "scheduler.worker_heartbeat": {"queue": "default"},
    "workflows.kubernetes_sync": {"queue": "default"},
    "workflows.kubernetes_backend_sync": {"queue": "default"},
}
# Every Kubernetes pool's nodes and other pods are read this often (docs/kubernetes.md); 0 turns it off.
OSMO_K8S_SYNC_SECONDS = env.float("OSMO_K8S_SYNC_SECONDS", default=30.0)
# Items per list request of that sync (nodes, pods): requests per sync = ceil(nodes/n) + ceil(pods/n).
OSMO_K8S_SYNC_PAGE_SIZE = env.int("OSMO_K8S_SYNC_PAGE_SIZE", default=500)
# NoSchedule/NoExecute taint keys that do not make a node unschedulable for that sync (the pods tolerate them).
OSMO_K8S_TOLERATED_TAINTS = env.list("OSMO_K8S_TOLERATED_TAINTS", default=[])
# A placed pod the cluster keeps refusing to schedule (PodScheduled=False, Unschedulable) this long sends its
# gang back to the queue (docs/kubernetes.md §10), at most OSMO_K8S_UNSCHEDULABLE_REQUEUES times per gang;
# the next refusal fails it (FAILED_BACKEND_ERROR, quoting the cluster).
OSMO_K8S_UNSCHEDULABLE_SECONDS = env.float("OSMO_K8S_UNSCHEDULABLE_SECONDS", default=60.0)
OSMO_K8S_UNSCHEDULABLE_REQUEUES = env.int("OSMO_K8S_UNSCHEDULABLE_REQUEUES", default=3)
CELERY_BEAT_SCHEDULE = {
    "workflows-tick": {
        "task": "workflows.tick",
        "schedule": OSMO_PLACEMENT_TICK_SECONDS,
        "options": {"queue": "scheduler", "expires": OSMO_PLACEMENT_TICK_SECONDS * 1.5},
    },
}
if OSMO_K8S_SYNC_SECONDS > 0:
    CELERY_BEAT_SCHEDULE["workflows-kubernetes-sync"] = {
        "task": "workflows.kubernetes_sync",
        "schedule": OSMO_K8S_SYNC_SECONDS,
        "options": {"queue": "default", "expires": OSMO_K8S_SYNC_SECONDS},
    }

# ------------------------------------------------------------------------------------------------
# Operations: probes, metrics, throttling and login lockout (docs/operations.md)
# ------------------------------------------------------------------------------------------------
# /readyz reports "not ready" when the last scheduler tick is older than this (beat, the broker or
# every worker is gone), or when gangs have been queued longer than the cycle age and no placement
# cycle completed on their pool within it.
OSMO_READY_TICK_MAX_AGE_SECONDS = env.float("OSMO_READY_TICK_MAX_AGE_SECONDS", default=30.0)
OSMO_READY_CYCLE_MAX_AGE_SECONDS = env.float("OSMO_READY_CYCLE_MAX_AGE_SECONDS", default=60.0)
# Counters and histograms of worker processes (prometheus_client multiprocess mode): every process of
# the service (web and workers) must see the same directory.
OSMO_METRICS_DIR = Path(env.str("PROMETHEUS_MULTIPROC_DIR", default=str(DATA_DIR / "metrics")))
# When set, /metrics requires "Authorization: Bearer <token>".
OSMO_METRICS_TOKEN = env.str("OSMO_METRICS_TOKEN", default="")
# Workers import these at start: osmo.metrics connects the signal handlers that observe dispatches.
CELERY_IMPORTS = ["osmo.metrics"]

# Throttle counters and other shared state: Redis when there is one (every web process sees the same
# counts), else this process's memory (the embedded default runs one web process).
# Short socket timeouts: with Redis down or hung, a throttle's cache call fails within a second and
# the throttles fail open (osmo.api.throttling) instead of holding the request.
if REDIS_URL:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL,
                          "KEY_PREFIX": "osmo-cache",
                          "OPTIONS": {"socket_connect_timeout": env.float("OSMO_CACHE_TIMEOUT_SECONDS", default=1.0),
                                      "socket_timeout": env.float("OSMO_CACHE_TIMEOUT_SECONDS", default=1.0)}}}
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
# Proxies in front of web whose X-Forwarded-For is trusted for the client address (0: use the peer
# address; a client's own X-Forwarded-For must not let it dodge throttles and the lockout).
OSMO_TRUSTED_PROXIES = env.int("OSMO_TRUSTED_PROXIES", default=0)
REST_FRAMEWORK["DEFAULT_AUTHENTICATION_CLASSES"] = [
    "workflows.api.task_auth.TaskApiTokenAuthentication",  # a task's `osmo` command (docs/runtime.md)
    "osmo.api.authentication.ThrottledTokenAuthentication",
    "rest_framework.authentication.SessionAuthentication",
]
REST_FRAMEWORK["DEFAULT_THROTTLE_CLASSES"] = [
    "osmo.api.throttling.AnonRateThrottle",
    "osmo.api.throttling.UserRateThrottle",
]
REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"] = {
    "anon": env.str("OSMO_THROTTLE_ANON", default="120/min"),
    "user": env.str("OSMO_THROTTLE_USER", default="12000/min"),
    "auth_failure": env.str("OSMO_THROTTLE_AUTH_FAILURE", default="20/min"),
}
REST_FRAMEWORK["NUM_PROXIES"] = OSMO_TRUSTED_PROXIES

# Login lockout (django-axes) for the login page and the admin: after AXES_FAILURE_LIMIT wrong
# passwords for one username from one address, that pair is refused (429) for AXES_COOLOFF_TIME;
# a correct login resets the count. Keyed on the pair, so nobody can lock a user out from elsewhere.
INSTALLED_APPS += ["axes"]
MIDDLEWARE += ["axes.middleware.AxesMiddleware"]
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
AXES_FAILURE_LIMIT = env.int("AXES_FAILURE_LIMIT", default=10)
AXES_COOLOFF_TIME = timedelta(minutes=env.float("AXES_COOLOFF_MINUTES", default=15))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_CLIENT_IP_CALLABLE = "osmo.api.throttling.client_ip"

# Logs: one line per record on stderr, as text (`plain`) or JSON objects (`json`); both carry the
# records' extra fields (workflow, pool, group ids of the scheduler's lines).
# How often the web pages fetch their live region (pages/views.py, docs/pages.md).
OSMO_PAGE_REFRESH_MS = env.int("OSMO_PAGE_REFRESH_MS", default=4000)
LOG_FORMAT = env.str("LOG_FORMAT", default="plain")
LOG_LEVEL = env.str("LOG_LEVEL", default="INFO")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"configured": logs.formatter_config(LOG_FORMAT)},
    "filters": {"celery_routine": {"()": "osmo.logs.CeleryRoutineFilter"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "configured"}},
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {
        # Django's default config gives "django" a console handler of its own (when DEBUG): lines would
        # be written twice, once unformatted. Everything goes through the root handler instead.
        "django": {"handlers": [], "level": LOG_LEVEL, "propagate": True},
        "django.db.backends": {"level": "WARNING"},
        # Ticks and idle cycles at DEBUG; a placement, a dispatch, a failure stay at INFO or above.
        "celery.worker.strategy": {"filters": ["celery_routine"]},
        "celery.app.trace": {"filters": ["celery_routine"]},
        "celery.beat": {"filters": ["celery_routine"]},
        "axes": {"level": "WARNING" if LOG_LEVEL.upper() != "DEBUG" else "DEBUG"},  # its version, once per process
        # The MCP SDK logs every request and transport at INFO; its warnings and errors stay.
        "mcp": {"level": "WARNING" if LOG_LEVEL.upper() != "DEBUG" else "DEBUG"},
    },
}

# ------------------------------------------------------------------------------------------------
# Single sign-on (OpenID Connect) and replicas: osmo/sso, osmo/beat.py, docs/deploy.md, docs/design.md §12.
# Off while OSMO_OIDC_ISSUER is empty; local accounts and API tokens work either way.
# ------------------------------------------------------------------------------------------------
OSMO_OIDC_ISSUER = env.str("OSMO_OIDC_ISSUER", default="")
OSMO_OIDC_PROVIDER_NAME = env.str("OSMO_OIDC_PROVIDER_NAME", default="single sign-on")
# The confidential client of the browser flow (mozilla-django-oidc's OIDC_* settings).
OIDC_RP_CLIENT_ID = env.str("OSMO_OIDC_CLIENT_ID", default="")
OIDC_RP_CLIENT_SECRET = env.str("OSMO_OIDC_CLIENT_SECRET", default="")
OIDC_OP_AUTHORIZATION_ENDPOINT = env.str("OSMO_OIDC_AUTHORIZATION_ENDPOINT", default="")
OIDC_OP_TOKEN_ENDPOINT = env.str("OSMO_OIDC_TOKEN_ENDPOINT", default="")
OIDC_OP_USER_ENDPOINT = env.str("OSMO_OIDC_USERINFO_ENDPOINT", default="")
OIDC_OP_JWKS_ENDPOINT = env.str("OSMO_OIDC_JWKS_ENDPOINT", default="")
OIDC_RP_SIGN_ALGO = env.str("OSMO_OIDC_SIGN_ALGO", default="RS256")
OIDC_RP_SCOPES = env.str("OSMO_OIDC_SCOPES", default="openid profile email groups")
OIDC_USE_PKCE = True
OIDC_STORE_ID_TOKEN = True  # the id_token_hint of the logout at the provider
OIDC_TIMEOUT = env.int("OSMO_OIDC_TIMEOUT_SECONDS", default=5)
# A browser session signed in through the provider is renewed (silently, prompt=none) this often.
OIDC_RENEW_ID_TOKEN_EXPIRY_SECONDS = env.int("OSMO_OIDC_RENEW_SECONDS", default=900)
OIDC_OP_LOGOUT_URL_METHOD = "osmo.sso.views.provider_logout_url"
LOGIN_REDIRECT_URL_FAILURE = "/accounts/login/?sso=failed"
# Optional: the provider's end-session endpoint (logout there too) and device authorization endpoint
# with the public client of `osmo login --device`.
OSMO_OIDC_END_SESSION_ENDPOINT = env.str("OSMO_OIDC_END_SESSION_ENDPOINT", default="")
OSMO_OIDC_DEVICE_AUTHORIZATION_ENDPOINT = env.str("OSMO_OIDC_DEVICE_AUTHORIZATION_ENDPOINT", default="")
OSMO_OIDC_CLI_CLIENT_ID = env.str("OSMO_OIDC_CLI_CLIENT_ID", default="")
# The `aud` an API access token must carry (one of); empty: the browser and CLI client ids.
OSMO_OIDC_AUDIENCE = env.list("OSMO_OIDC_AUDIENCE", default=[])
OSMO_OIDC_USERNAME_CLAIM = env.str("OSMO_OIDC_USERNAME_CLAIM", default="preferred_username")
# The claim listing the user's groups; groups map to existing teams by name, or through
# OSMO_OIDC_GROUP_TEAMS ("provider-group=team,other-group=team2"). Members of OSMO_OIDC_STAFF_GROUP are staff.
OSMO_OIDC_GROUPS_CLAIM = env.str("OSMO_OIDC_GROUPS_CLAIM", default="groups")
OSMO_OIDC_GROUP_TEAMS: dict[str, str] = env.dict("OSMO_OIDC_GROUP_TEAMS", default={})
OSMO_OIDC_STAFF_GROUP = env.str("OSMO_OIDC_STAFF_GROUP", default="")
# The provider's JWKS is fetched again after this long; while the provider is down the last one
# stays in use for up to OSMO_OIDC_JWKS_STALE_SECONDS, so already issued tokens keep working.
OSMO_OIDC_JWKS_REFRESH_SECONDS = env.int("OSMO_OIDC_JWKS_REFRESH_SECONDS", default=300)
OSMO_OIDC_JWKS_STALE_SECONDS = env.int("OSMO_OIDC_JWKS_STALE_SECONDS", default=86400)
AUTHENTICATION_BACKENDS += ["osmo.sso.backend.OIDCBackend"]
MIDDLEWARE.insert(MIDDLEWARE.index("django.contrib.auth.middleware.AuthenticationMiddleware") + 1,
                  "osmo.sso.backend.OIDCSessionRefresh")
MIDDLEWARE += ["osmo.sso.notice.NoticeMiddleware"]
_template_options: dict[str, list[str]] = TEMPLATES[0]["OPTIONS"]  # type: ignore[assignment]
_template_options["context_processors"].append("osmo.sso.views.sso_context")
# First: a bearer JWT is the provider's; every other credential goes on to the local classes.
_authentication: list[str] = REST_FRAMEWORK["DEFAULT_AUTHENTICATION_CLASSES"]  # type: ignore[assignment]
REST_FRAMEWORK["DEFAULT_AUTHENTICATION_CLASSES"] = ["osmo.sso.authentication.OIDCAccessTokenAuthentication",
                                                    *_authentication]
# One beat at a time (osmo.beat): a second beat stands by until the first one's lock is released.
CELERY_BEAT_SCHEDULER = "osmo.beat.LockedPersistentScheduler"
# ------------------------------------------------------------------------------------------------
# End of single sign-on and replicas
# ------------------------------------------------------------------------------------------------
