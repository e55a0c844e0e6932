"""Set up Django in this process the way production runs it (PostgreSQL and Redis from the environment,
production settings, a throwaway data directory): the in-process profiles `bench.submit_profile` and
`bench.dispatch_profile` measure the service's code paths this way."""

from __future__ import annotations

import os
import secrets
import tempfile


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
