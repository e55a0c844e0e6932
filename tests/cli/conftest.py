"""Fixtures of the CLI tests: a live test server with a user, a token and a pool, and two ways to run
``osmo`` against it: in-process (``typer.testing.CliRunner``) and as the installed console script."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from cli.main import app

ROOT = Path(__file__).resolve().parents[2]
OSMO_SCRIPT = Path(sys.executable).parent / "osmo"


@pytest.fixture
def token(user) -> str:
    from tests.factories import make_api_key

    return make_api_key(user)


@pytest.fixture
def nvl72():
    from tests.factories import make_nvl72_pool

    return make_nvl72_pool("nvl72", zones=2, spines=1, racks=2, nodes=4)


@pytest.fixture
def config_file(tmp_path) -> Path:
    return tmp_path / "osmo" / "config.json"


@pytest.fixture
def cli_env(live_server, token, config_file) -> dict[str, str]:
    return {"OSMO_URL": live_server.url, "OSMO_TOKEN": token, "OSMO_CONFIG": str(config_file)}


@pytest.fixture
def osmo(cli_env) -> Callable[..., Result]:
    """Run ``osmo ARGS`` in-process against the live server; ``env`` entries override (None unsets)."""
    runner = CliRunner()

    def run(*args: str, input: str | None = None, env: dict[str, str | None] | None = None) -> Result:
        return runner.invoke(app, list(args), input=input, env={**cli_env, **(env or {})}, catch_exceptions=False)

    return run


@pytest.fixture
def osmo_process(cli_env) -> Callable[..., subprocess.CompletedProcess]:
    """Run the installed console script (``.venv/bin/osmo``) as a real process."""

    def run(*args: str, env: dict[str, str] | None = None, input: str | None = None) -> subprocess.CompletedProcess:
        # this checkout's packages first: the shared virtualenv's editable install may point at another one
        path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
        environment = {**os.environ, "PYTHONPATH": path, **cli_env, **(env or {})}
        return subprocess.run([str(OSMO_SCRIPT), *args], env=environment, input=input, capture_output=True,
                              text=True, timeout=60, cwd=ROOT)

    return run


class Driver:
    """Moves a workflow through its statuses from a background thread, through ``workflows.services``,
    the way the scheduler and dispatcher would (no Celery worker runs in these tests)."""

    def __init__(self, target: Callable[[], None]) -> None:
        self.errors: list[BaseException] = []
        self._target = target
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        from django.db import connection

        try:
            self._target()
        except BaseException as exc:  # reported by join()
            self.errors.append(exc)
        finally:
            connection.close()

    def start(self) -> Driver:
        self.thread.start()
        return self

    def join(self, timeout: float = 30) -> None:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "driver thread did not finish"
        if self.errors:
            raise self.errors[0]
