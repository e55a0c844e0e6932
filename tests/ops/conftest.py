"""A real production web server (gunicorn on ``osmo.wsgi``) in a subprocess, for the operations tests."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import wait_healthy

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Server:
    base_url: str
    process: subprocess.Popen
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text()


def production_env(worker_env: dict[str, str], data_dir: Path) -> dict[str, str]:
    """What docker-compose.yml gives the web process: production settings, DEBUG off."""
    env = dict(worker_env)
    env.pop("DEBUG", None)
    env.update({
        "DJANGO_SETTINGS_MODULE": "osmo.settings.production",
        "DJANGO_SECRET_KEY": "ops-tests-secret-key-0123456789abcdefghij",
        "OSMO_CREDENTIALS_KEYS": "b3BzLXRlc3RzLWNyZWRlbnRpYWxzLWtleS0wMTIzNDU=",
        "OSMO_DATA_DIR": str(data_dir),
        "STATIC_ROOT": str(data_dir / "static"),
        "SESSION_COOKIE_SECURE": "false",
        "CSRF_COOKIE_SECURE": "false",
        "WEB_CONCURRENCY": "1",
        "GUNICORN_THREADS": "2",
        "GUNICORN_ACCESS_LOG": "",
        "LOG_LEVEL": "WARNING",
    })
    return env


def manage(env: dict[str, str], *args: str) -> str:
    result = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-4000:]
    return result.stdout


@pytest.fixture
def gunicorn_server(tmp_path) -> Iterator[Callable[[dict[str, str]], Server]]:
    """Start ``gunicorn -c python:osmo.gunicorn_conf osmo.wsgi`` with the given environment; stopped at teardown."""
    servers: list[Server] = []

    def start(env: dict[str, str]) -> Server:
        port = free_port()
        log_path = tmp_path / f"gunicorn-{port}.log"
        log = open(log_path, "w")  # noqa: SIM115 - closed with the process below
        process = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "-c", "python:osmo.gunicorn_conf", "--bind", f"127.0.0.1:{port}",
             "osmo.wsgi"],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
        server = Server(f"http://127.0.0.1:{port}", process, log_path)
        servers.append(server)
        wait_healthy(server.base_url, process, server.log, name="gunicorn", timeout=60, interval=0.2,
                     request_timeout=2)
        return server

    yield start
    for server in servers:
        try:
            os.killpg(server.process.pid, signal.SIGTERM)
            server.process.wait(timeout=20)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            os.killpg(server.process.pid, signal.SIGKILL)
            server.process.wait(timeout=10)


METRICS_TOKEN = "ops-tests-metrics-token"
METRICS_AUTH = f"Bearer {METRICS_TOKEN}"


@pytest.fixture
def metrics_token(settings) -> str:
    """``OSMO_METRICS_TOKEN`` set: requests with ``METRICS_AUTH`` see the probes' detail and the metrics."""
    settings.OSMO_METRICS_TOKEN = METRICS_TOKEN
    return METRICS_TOKEN


class RedisProcess:
    """A ``redis-server`` of its own on a free loopback port, stopped and started again by the test."""

    def __init__(self, directory: Path) -> None:
        self.port = free_port()
        self.directory = directory
        self.process: subprocess.Popen | None = None
        self.url = f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        import redis

        self.process = subprocess.Popen(
            ["redis-server", "--bind", "127.0.0.1", "--port", str(self.port), "--save", "", "--appendonly", "no",
             "--dir", str(self.directory)], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
            start_new_session=True)
        client = redis.Redis.from_url(self.url, socket_connect_timeout=1)
        deadline = time.monotonic() + 20
        while True:
            try:
                client.ping()
                return
            except redis.RedisError:
                if time.monotonic() > deadline:
                    pytest.fail("redis-server did not come up")
                time.sleep(0.05)

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)


@pytest.fixture
def redis_process(tmp_path) -> Iterator[RedisProcess]:
    server = RedisProcess(tmp_path)
    server.start()
    yield server
    server.kill()
