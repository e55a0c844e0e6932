"""``osmo token set | list | delete`` (docs/cli.md "Access tokens"), OSMO's commands: the installed
console script against a live server; the key printed once, then working as ``OSMO_TOKEN``."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

db = pytest.mark.django_db(transaction=True)


@db
def test_make_use_list_and_delete_a_token(osmo_process, user):
    # given the last day it should work
    last = (datetime.now(tz=UTC) + timedelta(days=7)).date().isoformat()

    # when a token is made, used, listed and deleted
    made = osmo_process("token", "set", "ci", "--expires-at", last, "--description", "nightly job")
    key = made.stdout.removeprefix("Access token: ").strip()
    used = osmo_process("profile", "list", env={"OSMO_TOKEN": key})
    listed = osmo_process("token", "list")
    listed_json = osmo_process("token", "list", "--json")
    deleted = osmo_process("token", "delete", "ci")
    after = osmo_process("profile", "list", env={"OSMO_TOKEN": key})
    again = osmo_process("token", "delete", "ci")

    # then the key was printed once, on stdout alone, and worked as the user until deleted
    assert made.returncode == 0, made.stderr
    assert made.stdout.startswith("Access token: osmo_") and made.stdout.count("\n") == 1
    assert "will not be shown again" in made.stderr and f"works through {last} (UTC)" in made.stderr
    assert used.returncode == 0, used.stderr
    assert user.username in used.stdout
    assert listed.stdout.splitlines()[0].split() == ["NAME", "LAST", "DAY", "(UTC)", "STATUS", "DESCRIPTION"]
    assert listed.stdout.splitlines()[1].split() == ["ci", last, "active", "nightly", "job"]
    assert key not in listed.stdout + listed_json.stdout
    assert [item["name"] for item in json.loads(listed_json.stdout)] == ["ci"]
    assert (deleted.returncode, deleted.stdout) == (0, "Token ci deleted.\n")
    assert after.returncode != 0 and "token rejected" in after.stderr
    assert again.returncode == 1 and "access token ci not found" in again.stderr


@db
def test_a_date_in_the_past_is_refused_naming_the_option_s_field(osmo_process):
    refused = osmo_process("token", "set", "ci", "--expires-at", "2020-01-01")
    assert refused.returncode == 2, refused.stderr
    assert "expires_at: 2020-01-01 is in the past" in refused.stderr
    assert "Traceback" not in refused.stderr
