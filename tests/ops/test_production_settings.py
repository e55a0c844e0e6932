"""The production settings refuse a secret key anyone can know (docs/operations.md, "Security-relevant
settings"): sessions, password-reset links and the task runtime's tokens are signed with it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FERNET_KEY = "bmV3LWtleS1mb3ItdGhlLXJvdGF0aW9uLXRlc3QtMDE="


def _load(secret_key: str) -> subprocess.CompletedProcess[str]:
    env = {name: value for name, value in os.environ.items() if name not in ("SECRET_KEY", "DJANGO_SECRET_KEY")}
    env |= {"DJANGO_SETTINGS_MODULE": "osmo.settings.production", "DJANGO_SECRET_KEY": secret_key,
            "OSMO_CREDENTIALS_KEYS": FERNET_KEY}
    return subprocess.run([sys.executable, "-c", "import django; django.setup()"], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("secret_key", [
    pytest.param("change-me", id="_case_the_old_compose_example"),
    pytest.param("replace-with-50-random-characters", id="_case_the_secrets_env_example_left_as_it_is"),
    pytest.param("django-insecure-" + "k" * 40, id="_case_a_startproject_development_key"),
    pytest.param("a" * 31, id="_case_shorter_than_32_characters"),
])
def test_production_refuses_a_secret_key_anyone_can_know(secret_key):
    """Replays the audit's finding: ``DJANGO_SECRET_KEY=change-me docker compose up`` (the documented
    command) and an overlay whose ``secrets.env`` kept the example's placeholder started, signing every
    session and task token with a key printed in the repository."""
    # when
    result = _load(secret_key)

    # then
    assert result.returncode == 1
    assert "DJANGO_SECRET_KEY is a placeholder or shorter than 32 characters" in result.stderr


def test_production_starts_with_a_random_key():
    # when
    result = _load("Zk3v9QpX2mLr7TnB4wYc8HdJ6sFa1UeG0oKiVbNq5Rx")

    # then
    assert (result.returncode, result.stderr) == (0, "")
