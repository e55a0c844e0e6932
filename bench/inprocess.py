"""Set up Django in this process the way production runs it (PostgreSQL and Redis from the environment,
production settings, a throwaway data directory): the in-process profiles `bench.submit_profile`,
`bench.dispatch_profile` and `bench.worker_profile` measure the service's code paths this way."""

from __future__ import annotations

import os
import secrets
import tempfile
from typing import Any


def django_production_setup(name: str, **environ: str) -> None:
    """Refuse to run without PostgreSQL and Redis; then production settings, ``environ`` on top, and
    ``django.setup()``."""
    if not (os.environ.get("DATABASE_URL", "").startswith("postgres") and os.environ.get("REDIS_URL")):
        raise SystemExit("Set DATABASE_URL (PostgreSQL) and REDIS_URL (source scripts/services.sh; services_start).")
    os.environ["DJANGO_SETTINGS_MODULE"] = "osmo.settings.production"
    os.environ.setdefault("DJANGO_SECRET_KEY", secrets.token_urlsafe(32))
    os.environ.setdefault("OSMO_DATA_DIR", tempfile.mkdtemp(prefix=f"osmo-{name}-"))
    os.environ["LOG_LEVEL"] = "WARNING"
    os.environ.update(environ)
    import django

    django.setup()


def worker_in_process(name: str) -> tuple[Any, set[str], list[tuple[str, dict[str, Any]]]]:
    """:func:`django_production_setup`, migrated, for running worker code here: returns the ``bench``
    user, the names of the tasks routed to the dispatch queue, and the list the messages the code sends
    are recorded in instead of going to the broker (run them with Celery's eager ``apply``). Imports
    what a worker imports (the metrics' signal handlers run around each task; the tasks register)."""
    django_production_setup(name)
    from django.conf import settings
    from django.contrib.auth.models import User
    from django.core.management import call_command

    import osmo.metrics  # noqa: F401
    import workflows.tasks  # noqa: F401
    from workflows import jobs

    call_command("migrate", "--no-input", verbosity=0)
    user, _ = User.objects.get_or_create(username="bench")
    dispatch_names = {task for task, route in settings.CELERY_TASK_ROUTES.items() if route["queue"] == "dispatch"}
    sent: list[tuple[str, dict[str, Any]]] = []
    jobs._send = lambda task, countdown=None, **kwargs: sent.append((task, kwargs))  # type: ignore[assignment]
    return user, dispatch_names, sent


def gangs_submit_and_place(user: Any, pool: Any, prefix: str, count: int) -> tuple[float, Any]:
    """Submit ``count`` workflows of the pipeline's shape (the service, not HTTP; not timed), then run
    one placement cycle of ``pool``: (its CPU seconds, its result)."""
    gangs_submit(user, pool, prefix, count)
    return cycle_run(pool)


def gangs_submit(user: Any, pool: Any, prefix: str, count: int, *, seconds: float = 3.0) -> None:
    """Submit ``count`` workflows of the pipeline's shape (the service, not HTTP) to ``pool``, their
    simulated tasks running ``seconds``."""
    from bench.pipeline import spec_text
    from workflows.services import workflow_submit

    for index in range(count):
        workflow_submit(user=user, pool_name=pool.name, spec=spec_text(f"{prefix}x{index}", 4, seconds))


def cycle_run(pool: Any) -> tuple[float, Any]:
    """One placement cycle of ``pool``: (its CPU seconds, its result)."""
    import time

    from workflows.scheduling.cycle import placement_cycle_run

    started = time.process_time()
    result = placement_cycle_run(pool_id=pool.pk)
    return time.process_time() - started, result
