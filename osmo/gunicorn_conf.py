"""gunicorn settings of the web process: ``gunicorn -c python:osmo.gunicorn_conf osmo.wsgi``.

Used by the image, docker-compose.yml and the pipeline benchmark. Every value comes from the
environment (documented in docs/operations.md); gunicorn's own ``GUNICORN_CMD_ARGS`` and command-line
flags still override them.

Worker model: ``gthread`` (:class:`osmo.gunicorn_worker.EnvelopeThreadWorker`): each worker process
runs a few threads. A request spends much of its time
waiting on PostgreSQL and Redis, so threads keep the CPU busy without one process per concurrent
request; processes give parallelism across cores despite the GIL.
"""

from __future__ import annotations

import os

from osmo.logs import formatter_config

bind = os.environ.get("GUNICORN_BIND", f"0.0.0.0:{os.environ.get('PORT', '8000')}")
workers = int(os.environ.get("WEB_CONCURRENCY", "2"))
# gunicorn's gthread worker, answering its own refusals with the API's JSON envelope (osmo.gunicorn_worker).
worker_class = "osmo.gunicorn_worker.EnvelopeThreadWorker"
threads = int(os.environ.get("GUNICORN_THREADS", "4"))
# A request slower than this is killed and logged (the API's slowest, a dry run on a big pool, is
# well under it); a restarted worker finishes its requests within graceful_timeout.
timeout = int(os.environ.get("GUNICORN_TIMEOUT", "60"))
graceful_timeout = 30
keepalive = 5
# The longest request line gunicorn accepts (its maximum; its default is 4,094): a template value of
# 4,096 characters (docs/spec.md) fits in a query string (?set_string=name=...) with room to spare.
limit_request_line = 8190
# Recycle workers now and then so slow leaks cannot grow without bound; the jitter keeps them from
# all restarting at once.
max_requests = int(os.environ.get("GUNICORN_MAX_REQUESTS", "5000"))
max_requests_jitter = max_requests // 10
# The heartbeat file lives in memory, not on a possibly slow container filesystem.
worker_tmp_dir = "/dev/shm" if os.path.isdir("/dev/shm") else None
accesslog = os.environ.get("GUNICORN_ACCESS_LOG", "-") or None
errorlog = "-"
# No runtime control socket (gunicornc): its default path is per user ($HOME/.gunicorn), so servers
# sharing a host or a home directory would fight over it, and the image's user cannot write there.
control_socket_disable = True
# Trust X-Forwarded-* only from the proxy in front (a comma-separated list of addresses, or "*").
forwarded_allow_ips = os.environ.get("FORWARDED_ALLOW_IPS", "127.0.0.1")

# With LOG_FORMAT=json, gunicorn's own lines (errors, access) are JSON objects too (osmo.logs).
if os.environ.get("LOG_FORMAT", "plain") == "json":
    logconfig_dict = {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": formatter_config("json")},
        "handlers": {
            "error_console": {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stderr"},
            "console": {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stdout"},
        },
        "loggers": {
            "gunicorn.error": {"level": "INFO", "handlers": ["error_console"], "propagate": False},
            "gunicorn.access": {"level": "INFO", "handlers": ["console"], "propagate": False},
        },
        "root": {"level": "INFO", "handlers": []},
    }
