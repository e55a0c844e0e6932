"""`make run`'s set-up step prints the address it serves on (OSMO_HOST / OSMO_PORT)."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

pytestmark = pytest.mark.django_db


def test_the_printed_login_address_and_osmo_url_follow_osmo_port(monkeypatch, tmp_path):
    # given make run started with another port
    monkeypatch.setenv("OSMO_PORT", "8011")
    monkeypatch.delenv("OSMO_HOST", raising=False)
    out = io.StringIO()
    # when the bootstrap step runs (no demo pools, to keep it quick)
    call_command("osmo_bootstrap", "--pools-dir", str(tmp_path), stdout=out)
    # then both the login line and the CLI's environment name that port
    text = out.getvalue()
    assert "Log in at http://127.0.0.1:8011/" in text
    assert "export OSMO_URL=http://127.0.0.1:8011 OSMO_TOKEN=" in text
