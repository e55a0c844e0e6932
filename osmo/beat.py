"""One beat at a time, whatever the number of beat processes (docs/design.md §12).

``celery beat`` has no leader election: two beats (a rollout that overlaps, a node that seems lost
and is replaced, someone running one by hand) would both send every periodic task. On PostgreSQL the
beat's scheduler (``CELERY_BEAT_SCHEDULER``) first takes a session-level advisory lock on a
connection of its own, and sends nothing until it holds it: a second beat waits as a standby,
polling, and takes over when the first one's connection ends (its process exits or dies). A beat
whose lock connection breaks (the database restarted) exits rather than go on unlocked; its
supervisor (Kubernetes, compose) starts it again as a standby. The embedded default (SQLite, one
host, ``make run``) runs one beat and takes no lock.

The schedule file (``-s``, on the data volume) only remembers when each periodic task last ran. When
it cannot be written (the volume is full or read-only), at start or later, beat keeps the schedule in
memory and goes on sending (``beat.schedule_in_memory``, once): losing the last-run times costs at
most one early tick, while exiting would stop beat for as long as the volume stays full.
"""

from __future__ import annotations

import logging
import shelve
import time
from typing import Any

from celery.beat import PersistentScheduler
from django.conf import settings

logger = logging.getLogger(__name__)

# The advisory lock's key: "osmobeat" as a 64-bit integer.
BEAT_LOCK_KEY = int.from_bytes(b"osmobeat", "big")
STANDBY_POLL_SECONDS = 2.0
LOCK_CHECK_SECONDS = 10.0
_LIBPQ_OPTIONS = ("sslmode", "sslrootcert", "sslcert", "sslkey", "connect_timeout", "options", "target_session_attrs")


def _lock_connection() -> Any:
    import psycopg

    db = settings.DATABASES["default"]
    params = {key: value for key, value in db.get("OPTIONS", {}).items() if key in _LIBPQ_OPTIONS}
    params.setdefault("connect_timeout", 5)
    return psycopg.connect(
        host=db.get("HOST") or None, port=str(db["PORT"]) if db.get("PORT") else None, dbname=db["NAME"],
        user=db.get("USER") or None, password=db.get("PASSWORD") or None, autocommit=True,
        application_name="osmo-beat", keepalives=1, keepalives_idle=10, keepalives_interval=5, keepalives_count=3,
        **params)


def beat_lock_acquire(*, poll: float = STANDBY_POLL_SECONDS) -> Any:
    """The connection holding the beat lock; waits (polling) while another beat holds it."""
    import psycopg

    announced = False
    while True:
        try:
            connection = _lock_connection()
            held = connection.execute("SELECT pg_try_advisory_lock(%s)", [BEAT_LOCK_KEY]).fetchone()[0]
        except psycopg.Error as error:
            logger.warning("beat.lock_unavailable", extra={"reason": str(error)})
            time.sleep(poll)
            continue
        if held:
            logger.info("beat.lock_acquired")
            return connection
        connection.close()
        if not announced:
            logger.info("beat.standby")
            announced = True
        time.sleep(poll)


class MemoryPersistence:
    """``shelve``'s ``open`` for :attr:`PersistentScheduler.persistence`, keeping the schedule in memory."""

    @staticmethod
    def open(filename: str, writeback: bool = True) -> shelve.Shelf[Any]:
        return shelve.Shelf({}, writeback=writeback)


class LockedPersistentScheduler(PersistentScheduler):
    """Celery's default scheduler, started only once the beat lock is held (on PostgreSQL), with its
    schedule in memory when the schedule file cannot be written (see the module docstring)."""

    _lock: Any = None
    _lock_checked_at = 0.0

    def setup_schedule(self) -> None:
        if self._lock is None and settings.DATABASES["default"]["ENGINE"].endswith("postgresql"):
            self._lock = beat_lock_acquire()
            self._lock_checked_at = time.monotonic()
        try:
            super().setup_schedule()
        except OSError as error:
            self._schedule_in_memory(error)

    def sync(self) -> None:
        try:
            super().sync()
        except OSError as error:
            self._schedule_in_memory(error)

    def _schedule_in_memory(self, error: OSError) -> None:
        if self.persistence is MemoryPersistence:
            raise error
        logger.error("beat.schedule_in_memory",
                     extra={"path": getattr(self, "schedule_filename", ""), "reason": str(error)})
        self.persistence = MemoryPersistence  # type: ignore[assignment]  # shelve's open, in memory
        super().setup_schedule()

    def tick(self, *args: Any, **kwargs: Any) -> Any:
        if self._lock is not None and time.monotonic() - self._lock_checked_at > LOCK_CHECK_SECONDS:
            import psycopg

            try:
                self._lock.execute("SELECT 1")
            except psycopg.Error as error:
                logger.error("beat.lock_lost", extra={"reason": str(error)})
                raise SystemExit(1) from error
            self._lock_checked_at = time.monotonic()
        return super().tick(*args, **kwargs)

    def close(self) -> None:
        super().close()
        if self._lock is not None:
            self._lock.close()
            self._lock = None
