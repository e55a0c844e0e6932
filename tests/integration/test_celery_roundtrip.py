"""A real worker process runs a task that writes to the database, through the real broker."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from django.conf import settings

from scheduler.models import WorkerHeartbeat
from scheduler.tasks import worker_heartbeat
from tests.conftest import WorkerProcess, wait_for

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.django_db(transaction=True)
def test_worker_writes_to_postgres_through_redis(celery_worker_factory):
    # given the suite runs on PostgreSQL and Redis (make test starts both)
    assert settings.DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql"
    assert settings.CELERY_BROKER_URL.startswith("redis://")
    worker = celery_worker_factory("roundtrip")
    token = uuid.uuid4().hex
    # when a task is sent through Redis
    worker_heartbeat.delay(token)
    # then the worker process wrote the row to PostgreSQL
    wait_for(lambda: WorkerHeartbeat.objects.filter(token=token).exists(), timeout=60, message="heartbeat row")
    assert worker.process.poll() is None


def _manage(env: dict[str, str], *args: str) -> str:
    result = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_worker_roundtrip_on_embedded_default(tmp_path):
    # given the embedded default: no DATABASE_URL, no REDIS_URL -> SQLite + filesystem broker
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update({"DJANGO_SETTINGS_MODULE": "osmo.settings.local", "OSMO_DATA_DIR": str(tmp_path / "data")})
    show = "from django.conf import settings as s; print(s.DATABASES['default']['ENGINE'], s.CELERY_BROKER_URL)"
    backend = _manage(env, "shell", "-v0", "-c", show)
    assert backend.split() == ["django.db.backends.sqlite3", "osmofs://localhost//"]
    _manage(env, "migrate", "--no-input", "-v0")
    worker = WorkerProcess(env, tmp_path / "worker.log", name="embedded")
    token = uuid.uuid4().hex
    try:
        # when a task is sent through the filesystem broker
        send = f"from scheduler.tasks import worker_heartbeat; worker_heartbeat.delay('{token}')"
        _manage(env, "shell", "-v0", "-c", send)
        # then the worker wrote the row to the SQLite file
        check = f"from scheduler.models import WorkerHeartbeat as H; print(H.objects.filter(token='{token}').count())"
        wait_for(lambda: _manage(env, "shell", "-v0", "-c", check).strip() == "1", timeout=60, interval=1,
                 message="heartbeat row")
        assert (tmp_path / "data" / "osmo.sqlite3").exists()
        assert (tmp_path / "data" / "broker" / "queue").is_dir()
    finally:
        worker.stop()


@pytest.mark.django_db(transaction=True)
def test_worker_keeps_its_database_connection_between_tasks(celery_worker_factory):
    # given a worker (one process) that has run one task: the heartbeat row is its write
    from django.db import connection

    celery_worker_factory("reuse")

    def beat() -> None:
        token = uuid.uuid4().hex
        worker_heartbeat.delay(token)
        wait_for(lambda: WorkerHeartbeat.objects.filter(token=token).exists(), timeout=60, message="heartbeat row")

    def sql(query: str) -> list[tuple]:
        with connection.cursor() as cursor:
            cursor.execute(query)
            return cursor.fetchall()

    beat()
    [(after_first,)] = sql("SELECT now()")
    # when it runs three more
    for _ in range(3):
        beat()
    # then a connection it opened by its first task is still there: the tasks after it reused it
    # (Celery's Django fixup closed it before and after every task unless CELERY_DB_REUSE_MAX is set,
    # so every task opened a new one)
    kept = sql("SELECT pid, backend_start FROM pg_stat_activity WHERE datname = current_database() "
               "AND pid <> pg_backend_pid() AND backend_type = 'client backend'")
    assert [pid for pid, started in kept if started < after_first]
