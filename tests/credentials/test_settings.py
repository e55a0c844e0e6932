"""The production settings refuse to start without credential keys, or with a bad one
(docs/operations.md, "Credentials")."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _load(keys: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "OSMO_CREDENTIALS_KEYS"}
    env |= {"DJANGO_SETTINGS_MODULE": "osmo.settings.production", "DJANGO_SECRET_KEY": "x" * 50}
    if keys is not None:
        env["OSMO_CREDENTIALS_KEYS"] = keys
    return subprocess.run([sys.executable, "-c", "import django; django.setup()"], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=60)


def test_production_refuses_to_start_without_credential_keys():
    # when
    result = _load(None)

    # then
    assert result.returncode == 1
    assert "Set OSMO_CREDENTIALS_KEYS" in result.stderr


def test_production_refuses_a_key_that_is_not_a_fernet_key():
    # when
    result = _load("bmV3LWtleS1mb3ItdGhlLXJvdGF0aW9uLXRlc3QtMDE=,short")

    # then
    assert result.returncode == 1
    assert "OSMO_CREDENTIALS_KEYS item 2 is not a Fernet key" in result.stderr


def test_production_starts_with_a_key():
    # when
    result = _load("bmV3LWtleS1mb3ItdGhlLXJvdGF0aW9uLXRlc3QtMDE=")

    # then
    assert (result.returncode, result.stderr) == (0, "")
