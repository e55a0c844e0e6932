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
from osmo.config.groups import read_environment

BASE_DIR = Path(__file__).resolve().parent.parent.parent

env = environ.Env()

# ------------------------------------------------------------------------------------------------
# Core
# ------------------------------------------------------------------------------------------------
DATA_DIR = Path(env.str("OSMO_DATA_DIR", default=str(BASE_DIR / "var")))
DATA_DIR.mkdir(parents=True, exist_ok=True)

# The service's own knobs (OSMO_*), read once, typed and checked by concern (osmo/config/groups.py, where each
# one's type, default and meaning are; docs/operations.md): an invalid value stops start-up naming its
# variable. Each is published flat under its Django name (settings.OSMO_..., mozilla-django-oidc's OIDC_...)
# for tests to override; code reads them through osmo.config (osmo.config.scheduler().starvation_seconds).
CONFIG = read_environment(env, DATA_DIR)
globals().update(CONFIG.settings())

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

# File parts of a multipart request count against DATA_UPLOAD_MAX_MEMORY_SIZE too (osmo/uploads.py).
FILE_UPLOAD_HANDLERS = [
    "osmo.uploads.BoundedUploadHandler",
    "django.core.files.uploadhandler.MemoryFileUploadHandler",
    "django.core.files.uploadhandler.TemporaryFileUploadHandler",
]
# Tasks call the service at OSMO_RUNTIME_SERVICE_URL (the barrier, their `osmo` command), with its host name in
# `Host`: on Kubernetes the web Service's in-cluster name, which is not the ingress's ALLOWED_HOSTS.
_runtime_host = urlsplit(CONFIG.runtime.service_url).hostname or ""
_runtime_host = f"[{_runtime_host}]" if ":" in _runtime_host else _runtime_host
if _runtime_host and _runtime_host not in ALLOWED_HOSTS and "*" not in ALLOWED_HOSTS:
    ALLOWED_HOSTS.append(_runtime_host)


# Which queue each task name goes to: the one routing table (workflows.jobs sends tasks by name).
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
CELERY_BEAT_SCHEDULE = {
    "workflows-tick": {
        "task": "workflows.tick",
        "schedule": CONFIG.scheduler.placement_tick_seconds,
        "options": {"queue": "scheduler", "expires": CONFIG.scheduler.placement_tick_seconds * 1.5},
    },
}
if CONFIG.kubernetes.sync_seconds > 0:
    CELERY_BEAT_SCHEDULE["workflows-kubernetes-sync"] = {
        "task": "workflows.kubernetes_sync",
        "schedule": CONFIG.kubernetes.sync_seconds,
        "options": {"queue": "default", "expires": CONFIG.kubernetes.sync_seconds},
    }

# ------------------------------------------------------------------------------------------------
# Operations: probes, metrics, throttling and login lockout (docs/operations.md)
# ------------------------------------------------------------------------------------------------
# Workers import these at start: osmo.metrics connects the signal handlers that observe dispatches.
CELERY_IMPORTS = ["osmo.metrics"]

# Throttle counters and other shared state: Redis when there is one (every web process sees the same
# counts), else this process's memory (the embedded default runs one web process).
# Short socket timeouts: with Redis down or hung, a throttle's cache call fails within a second and
# the throttles fail open (osmo.api.throttling) instead of holding the request.
if REDIS_URL:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL,
                          "KEY_PREFIX": "osmo-cache",
                          "OPTIONS": {"socket_connect_timeout": CONFIG.web.cache_timeout_seconds,
                                      "socket_timeout": CONFIG.web.cache_timeout_seconds}}}
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
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
    "anon": CONFIG.web.throttle_anon,
    "user": CONFIG.web.throttle_user,
    "auth_failure": CONFIG.web.throttle_auth_failure,
}
REST_FRAMEWORK["NUM_PROXIES"] = CONFIG.web.trusted_proxies

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
OIDC_USE_PKCE = True
OIDC_STORE_ID_TOKEN = True  # the id_token_hint of the logout at the provider
OIDC_OP_LOGOUT_URL_METHOD = "osmo.sso.views.provider_logout_url"
LOGIN_REDIRECT_URL_FAILURE = "/accounts/login/?sso=failed"
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
