"""The operations package's SQL that the ORM cannot say (``tests/test_architecture.py`` fails on raw
SQL outside the apps' ``sql`` modules, ``osmo/bulk.py`` and ``osmo/beat.py``)."""

from __future__ import annotations

from django.db import connection


def database_ping() -> None:
    """Run ``SELECT 1`` on the default database: the readiness probe's round trip, which reads no
    table (so it answers while migrations or locks hold any of them). Raw: every ORM query reads a
    model's table."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()
