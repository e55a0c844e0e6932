"""The typed settings groups (osmo.config): invalid values stop start-up naming the variable, values
parse as the environment spells them, and test overrides of the Django names reach the groups."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import environ
import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from osmo import config
from osmo.config.groups import read_environment

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("name", "value", "says"), [
    ("OSMO_STARVATION_MAX_HOLDS", "eight", "invalid literal"),
    ("OSMO_CYCLE_BUDGET_SECONDS", "-1", "0 or more"),
    ("OSMO_PREEMPTION_ENABLED", "maybe", "expected true or false"),
    ("OSMO_LOCAL_NETWORK", "none", "one of workflow, host"),
])
def test_an_invalid_value_is_refused_naming_its_variable(monkeypatch, tmp_path, name, value, says):
    monkeypatch.setenv(name, value)
    with pytest.raises(ImproperlyConfigured) as refused:
        read_environment(environ.Env(), tmp_path)
    assert str(refused.value).startswith(f"{name}={value!r} is not valid")
    assert says in str(refused.value)


def test_lists_and_mappings_parse_as_before(monkeypatch, tmp_path):
    monkeypatch.setenv("OSMO_K8S_TOLERATED_TAINTS", "a,b")
    monkeypatch.setenv("OSMO_ARTIFACT_STORES", "pool-a=s3://bucket/osmo,pool-b=file:///data")
    monkeypatch.setenv("OSMO_TICK_WITHOUT_BEAT", "0")
    read = read_environment(environ.Env(), tmp_path)
    assert read.kubernetes.tolerated_taints == ("a", "b")
    assert read.runtime.artifact_stores == {"pool-a": "s3://bucket/osmo", "pool-b": "file:///data"}
    assert read.scheduler.tick_without_beat is False
    assert read.runtime.artifact_store == (tmp_path / "artifacts").as_uri()
    assert read.settings()["OSMO_K8S_TOLERATED_TAINTS"] == ["a", "b"]


def test_the_service_does_not_start_with_an_invalid_value(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "OSMO_DATA_DIR": str(tmp_path),
           "DJANGO_SETTINGS_MODULE": "osmo.settings.local", "OSMO_SESSION_IDLE_SECONDS": "half an hour"}
    started = subprocess.run([sys.executable, "-c", "import django; django.setup()"], env=env, cwd=ROOT,
                             capture_output=True, text=True, timeout=60)
    assert started.returncode != 0
    assert "OSMO_SESSION_IDLE_SECONDS='half an hour' is not valid" in started.stderr


def test_overrides_of_the_django_names_reach_the_groups(settings):
    settings.OSMO_STARVATION_SECONDS = 5
    settings.OIDC_RP_CLIENT_ID = "browser"
    assert config.scheduler().starvation_seconds == 5
    assert config.sso().client_id == "browser"
    with override_settings(OSMO_K8S_TOLERATED_TAINTS=["x"]):
        assert config.kubernetes().tolerated_taints == ("x",)
