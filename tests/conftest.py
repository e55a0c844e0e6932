"""Shared fixtures. Pure tests (tests/spec, tests/scheduler/placement) need none of these and no database."""

from __future__ import annotations

import os

import pytest


def pytest_report_header(config):
    """Say which database and broker the suite runs on, so a green run on SQLite is never mistaken."""
    try:
        from django.conf import settings

        engine = settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1]
        broker = settings.CELERY_BROKER_URL.split("://", 1)[0]
    except Exception as exc:  # settings not importable: pure-only run with -p no:django
        return f"osmo: django settings unavailable ({exc.__class__.__name__})"
    lines = [f"osmo: database={engine} broker={broker}"]
    redis_url = os.environ.get("REDIS_URL")
    if redis_url:
        try:
            import redis

            info = redis.Redis.from_url(redis_url).info("server")
            lines.append(f"osmo: Redis server {info['redis_version']} at {redis_url}")
        except Exception as exc:
            lines.append(f"osmo: Redis not reachable at {redis_url}: {exc}")
    if engine == "postgresql":
        try:
            import psycopg

            db = settings.DATABASES["default"]
            with psycopg.connect(
                host=db["HOST"], port=db["PORT"], user=db["USER"], dbname="postgres", connect_timeout=5
            ) as conn:
                version = conn.execute("SHOW server_version").fetchone()[0]
            lines.append(f"osmo: PostgreSQL server {version} at {db['HOST']}:{db['PORT']}")
        except Exception as exc:
            lines.append(f"osmo: PostgreSQL not reachable: {exc}")
    return lines


@pytest.fixture
def user(django_user_model):
    return django_user_model.objects.create_user(username="alice", password="alice-password")


@pytest.fixture
def other_user(django_user_model):
    return django_user_model.objects.create_user(username="bob", password="bob-password")


@pytest.fixture
def staff_user(django_user_model):
    return django_user_model.objects.create_user(username="root", password="root-password", is_staff=True,
                                                 is_superuser=True)


@pytest.fixture
def api_client():
    from rest_framework.test import APIClient

    return APIClient()


@pytest.fixture
def user_client(api_client, user):
    api_client.force_authenticate(user)
    return api_client


@pytest.fixture
def staff_client(staff_user):
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(staff_user)
    return client


# ------------------------------------------------------------------------------------------------
# Real Celery worker processes
# ------------------------------------------------------------------------------------------------
def database_url_for_tests() -> str:
    """The URL of the database the current test runs on (pytest-django's test database)."""
    from django.db import connection

    db = connection.settings_dict
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    return f"postgres://{db['USER']}{password}@{db['HOST']}:{db['PORT']}/{db['NAME']}"


class WorkerProcess:
    """A `celery worker` subprocess; its output goes to a log file shown when a test fails."""

    def __init__(self, env: dict[str, str], log_path, *, name: str, concurrency: int = 1,
                 queues: str = "scheduler,dispatch,default") -> None:
        import subprocess
        import sys

        self.log_path = log_path
        self._log = open(log_path, "w")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "osmo", "worker", "-Q", queues, "-c", str(concurrency),
             "--without-mingle", "--without-gossip", "-n", f"{name}@%h", "-l", "INFO"],
            env=env, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True,
        )

    def log(self) -> str:
        self._log.flush()
        return self.log_path.read_text()

    def kill(self) -> None:
        """SIGKILL the whole process group: the parent and its prefork children, mid-task if busy."""
        import signal

        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait(timeout=10)

    def stop(self) -> None:
        import signal
        import subprocess

        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGTERM)
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()
            except ProcessLookupError:
                pass
        self._log.close()


@pytest.fixture
def worker_env():
    """Environment for subprocesses that must see the same test database and broker as the test."""
    env = dict(os.environ)
    env["DJANGO_SETTINGS_MODULE"] = "osmo.settings.test"
    env["DATABASE_URL"] = database_url_for_tests()
    return env


@pytest.fixture
def celery_worker_factory(worker_env, tmp_path, request):
    """Start real worker processes against the test database; all are stopped at teardown."""
    workers: list[WorkerProcess] = []

    def start(name: str = "w1", concurrency: int = 1, env: dict[str, str] | None = None) -> WorkerProcess:
        worker = WorkerProcess(env or worker_env, tmp_path / f"{name}.log", name=name, concurrency=concurrency)
        workers.append(worker)
        return worker

    _broker_flush()

    yield start
    failed = getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed
    for worker in workers:
        worker.stop()
        if failed:
            print(f"----- {worker.log_path.name} -----\n{worker.log_path.read_text()[-6000:]}")


def _broker_flush() -> None:
    """Drop messages left in Redis by earlier tests, so a worker only sees this test's work."""
    redis_url = os.environ.get("REDIS_URL")
    if redis_url:
        import redis

        redis.Redis.from_url(redis_url).flushdb()


@pytest.fixture
def celery_beat(worker_env, tmp_path):
    """A real `celery beat` process sending the periodic tick (every second in test settings)."""
    import subprocess
    import sys

    log = open(tmp_path / "beat.log", "w")  # noqa: SIM115
    process = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "osmo", "beat", "-l", "INFO", "-s", str(tmp_path / "beat-schedule"),
         "--pidfile", str(tmp_path / "beat.pid")],
        env=worker_env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    yield process
    import signal

    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=10)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        pass
    log.close()


@pytest.hookimpl(tryfirst=True, hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)


def wait_for(predicate, *, timeout: float = 30.0, interval: float = 0.2, message: str = "condition"):
    """Poll until ``predicate()`` is truthy; returns its value or fails the test after ``timeout`` seconds."""
    import time

    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {message}")
        time.sleep(interval)


@pytest.fixture
def screenshots(tmp_path):
    """Where browser tests save screenshots: docs/screenshots/ with OSMO_UPDATE_SCREENSHOTS=1
    (`make screenshots`), else a temporary folder, so a plain test run leaves the tree clean."""
    from pathlib import Path

    if os.environ.get("OSMO_UPDATE_SCREENSHOTS") == "1":
        folder = Path(__file__).resolve().parents[1] / "docs" / "screenshots"
    else:
        folder = tmp_path / "screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


# ------------------------------------------------------------------------------------------------
# Real Chromium (Debian's package; `playwright install` is never run)
# ------------------------------------------------------------------------------------------------
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def browser():
    """Chromium driven by Playwright's sync API. No skip when it is missing: `make test` installs it,
    and a browser test that cannot run must fail, not pass silently."""
    # Playwright's sync API runs an event loop in this thread; the test's ORM calls are fine.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    from playwright.sync_api import sync_playwright

    playwright = sync_playwright().start()
    browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    try:
        yield browser
    finally:
        browser.close()
        playwright.stop()


def wait_healthy(url: str, process, log, *, name: str, timeout: float, interval: float, request_timeout: float) -> None:
    """Poll ``url``/healthz until it answers 200; fail the test with the end of ``log()`` when the server
    ``process`` exits first or ``timeout`` seconds pass (the web and session servers the tests start)."""
    import time

    import httpx

    deadline = time.monotonic() + timeout
    while True:
        try:
            if httpx.get(f"{url}/healthz", timeout=request_timeout).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"{name} did not come up:\n{log()[-4000:]}")
        time.sleep(interval)
