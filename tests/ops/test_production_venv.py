"""The service from a virtualenv made from requirements.txt alone, as the image installs it (docs/operations.md,
"Dependencies"): `manage.py migrate`, web (gunicorn, production settings), a Celery worker,
beat and the `osmo` CLI, each a real process of that virtualenv. Work submitted through the CLI runs
through the worker before and after a Redis restart. The rest of the suite runs in the development
virtualenv, whose test and lint tools bring packages the service needs too; here a runtime dependency
missing from requirements.txt stops a process and fails the test."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg
import pytest

from tests.conftest import wait_for
from tests.ops.conftest import ROOT, free_port

POOL = """\
pool: {name: prodvenv, description: 'one node'}
topology_keys:
- {key: rack, label: topology.kubernetes.io/rack}
nodes:
- name: n1
  labels: {kubernetes.io/hostname: n1, topology.kubernetes.io/rack: r1}
  capacity: {gpu: 8, cpu: 16, memory: 64Gi, storage: 1Ti}
  schedulable: true
"""
SPEC = """\
workflow:
  name: prodvenv
  groups:
  - name: g
    tasks:
    - {name: t0, lead: true, image: busybox, command: ['true'], environment: {OSMO_SIM_SECONDS: '1'}}
resources:
  default: {gpu: 1, topology: [{key: rack}]}
"""
METRICS_TOKEN = "prod-venv-metrics-token"


@pytest.fixture(scope="session")
def production_python() -> Path:
    """The python of scripts/prod-venv.sh's virtualenv (cached by requirements.txt's hash; built when missing)."""
    built = subprocess.run(["bash", "scripts/prod-venv.sh"], cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert built.returncode == 0, built.stderr[-4000:]
    return Path(built.stdout.strip().splitlines()[-1]) / "bin" / "python"


@pytest.fixture
def production_database() -> Iterator[str]:
    """A database of its own on the run's PostgreSQL, empty: the virtualenv's `migrate` creates every table."""
    server_url = os.environ.get("DATABASE_URL", "")
    assert server_url.startswith("postgres://"), "run through scripts/test.sh: it starts PostgreSQL"
    name = f"osmo_prod_venv_{os.getpid()}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    yield server_url.rsplit("/", 1)[0] + "/" + name
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


class Processes:
    """The service's processes, each in its own process group with its log in a file; stopped at teardown."""

    def __init__(self, python: Path, env: dict[str, str], folder: Path) -> None:
        self.python, self.env, self.folder = python, env, folder
        self.started: dict[str, subprocess.Popen] = {}

    def run(self, *args: str, timeout: float = 120) -> str:
        done = subprocess.run([str(self.python), *args], cwd=ROOT, env=self.env, capture_output=True, text=True,
                              timeout=timeout)
        assert done.returncode == 0, f"{' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr[-4000:]}"
        return done.stdout

    def start(self, name: str, *args: str) -> subprocess.Popen:
        log = open(self.folder / f"{name}.log", "w")  # noqa: SIM115 - the child holds it; closed at exit
        process = subprocess.Popen([str(self.python), *args], cwd=ROOT, env=self.env, stdout=log,
                                   stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        self.started[name] = process
        return process

    def log(self, name: str) -> str:
        return (self.folder / f"{name}.log").read_text()

    def logs(self) -> str:
        return "\n".join(f"----- {name} -----\n{self.log(name)[-3000:]}" for name in self.started)

    def alive(self) -> bool:
        return all(process.poll() is None for process in self.started.values())

    def stop(self) -> None:
        for process in self.started.values():
            try:
                os.killpg(process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for process in self.started.values():
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)


@pytest.fixture
def processes(production_python, production_database, redis_process, tmp_path) -> Iterator[Processes]:
    """What the image's processes get (docker-compose.yml): production settings, and nothing of the
    development virtualenv: no PYTHONPATH, a PATH with only the production virtualenv's scripts."""
    data = tmp_path / "data"
    env = {
        "PATH": f"{production_python.parent}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(tmp_path / "home"),
        "LANG": "C.UTF-8",
        "DJANGO_SETTINGS_MODULE": "osmo.settings.production",
        "DJANGO_SECRET_KEY": "prod-venv-tests-secret-key-0123456789abcdefghij",
        "OSMO_CREDENTIALS_KEYS": "b3BzLXRlc3RzLWNyZWRlbnRpYWxzLWtleS0wMTIzNDU=",
        "DATABASE_URL": production_database,
        "REDIS_URL": redis_process.url,
        "OSMO_DATA_DIR": str(data),
        "STATIC_ROOT": str(data / "static"),
        "SESSION_COOKIE_SECURE": "false",
        "CSRF_COOKIE_SECURE": "false",
        "WEB_CONCURRENCY": "1",
        "GUNICORN_THREADS": "2",
        "OSMO_METRICS_TOKEN": METRICS_TOKEN,
        # Ticks come from beat alone (a worker does not keep its own going), so a fresh tick proves beat
        # sends and the worker consumes; no Kubernetes pool to sync.
        "OSMO_TICK_WITHOUT_BEAT": "false",
        "OSMO_PLACEMENT_TICK_SECONDS": "1",
        "OSMO_K8S_SYNC_SECONDS": "0",
        "PYTHONWARNINGS": "ignore:You're running the worker with superuser privileges",
    }
    (tmp_path / "home").mkdir()
    group = Processes(production_python, env, tmp_path)
    yield group
    group.stop()


def _tick_age(base_url: str) -> float | None:
    try:
        response = httpx.get(f"{base_url}/readyz?checks=scheduler", timeout=5,
                             headers={"Authorization": f"Bearer {METRICS_TOKEN}"})
    except httpx.HTTPError:
        return None
    body = response.json()
    # 200 {"status": "ready", "checks"}; 503 (no tick yet, or stale) {"code": "not_ready", "details": {"checks"}}
    checks = body["checks"] if response.status_code == 200 else body["details"]["checks"]
    age = checks["scheduler"]["tick"]["age_seconds"]
    return None if age is None else float(age)


def test_the_service_runs_from_requirements_txt_alone(processes, redis_process, tmp_path):
    """Replays the finding: kombu's Redis transport imports `packaging`, which only requirements-dev.txt
    installed; the image's worker and beat exited with ModuleNotFoundError while every test passed."""
    # given the virtualenv's requirements consistent, its migrations applied to an empty database, a pool and an admin
    assert "No broken requirements found." in processes.run("-m", "pip", "check")
    # (and the ASGI application of the sessions Deployment, with the MCP SDK, loads from it too)
    assert processes.run("-c", "import osmo.asgi; print(sorted(osmo.asgi.application.application_mapping))") \
        == "['http', 'lifespan', 'websocket']\n"
    processes.run("manage.py", "migrate", "--no-input", "-v0")
    pools = tmp_path / "pools"
    pools.mkdir()
    (pools / "prodvenv.yaml").write_text(POOL)
    bootstrap = processes.run("manage.py", "osmo_bootstrap", "--pools-dir", str(pools), "--password", "x" * 12)
    token = re.search(r"API token: (\w+)", bootstrap).group(1)
    # and web, a worker and beat started as the image starts them
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    processes.start("web", "-m", "gunicorn", "-c", "python:osmo.gunicorn_conf", "--bind", f"127.0.0.1:{port}",
                    "osmo.wsgi")
    processes.start("worker", "-m", "celery", "-A", "osmo", "worker", "-Q", "scheduler,dispatch,default", "-c", "1",
                    "--without-mingle", "--without-gossip", "-n", "prodvenv@%h", "-l", "INFO")
    processes.start("beat", "-m", "celery", "-A", "osmo", "beat", "-l", "INFO", "-s", str(tmp_path / "beat-schedule"))
    (tmp_path / "spec.yaml").write_text(SPEC)
    processes.env.update({"OSMO_URL": base_url, "OSMO_TOKEN": token})

    def submit_and_wait() -> str:
        return processes.run("-m", "cli", "workflow", "submit", str(tmp_path / "spec.yaml"), "--pool", "prodvenv",
                             "--wait", "--timeout", "45", timeout=60)

    def ticking_since(moment: float) -> bool:
        age = _tick_age(base_url)
        return age is not None and age < time.monotonic() - moment and processes.alive()

    # when the web process answers its probe and beat's ticks run through the worker
    started = time.monotonic()
    wait_for(lambda: ticking_since(started) or not processes.alive(), timeout=60,
             message="web up and a tick through beat and the worker")
    assert processes.alive(), processes.logs()
    assert httpx.get(f"{base_url}/healthz", timeout=5).json() == {"status": "ok"}
    # then a workflow submitted through the CLI is placed, dispatched and followed to COMPLETED by the worker
    assert "Workflow prodvenv-1 COMPLETED" in submit_and_wait(), processes.logs()

    # when Redis is killed, stays away a while, and comes back empty
    redis_process.kill()
    time.sleep(2)
    redis_process.start()
    back = time.monotonic()
    # then beat and the worker tick again, and a second workflow runs through the worker
    wait_for(lambda: ticking_since(back) or not processes.alive(), timeout=60, message="a tick after the restart")
    assert processes.alive(), processes.logs()
    assert "Workflow prodvenv-2 COMPLETED" in submit_and_wait(), processes.logs()
    assert processes.alive(), processes.logs()
