"""The users' API keys are stored as SHA-256 digests, as access tokens are (docs/operations.md
"Secrets"): a key is printed once by the command that makes it (``drf_create_token``, ``make run``'s
``osmo_bootstrap``), works as ``Authorization: Token <key>``, and neither the database nor the admin
holds it. Keys stored in clear by DRF's ``authtoken`` before the upgrade keep working."""

from __future__ import annotations

import hashlib
import importlib
import io
import re

import pytest
from django.apps import apps
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import Client

from credentials.models import ApiKey

pytestmark = pytest.mark.django_db

drf_tokens_hash = importlib.import_module("credentials.migrations.0004_api_keys_from_drf_tokens").drf_tokens_hash
KEY_LINE = re.compile(r"Generated token ([0-9a-f]{40}) for user (\w+)\n")


def _create(username: str, *options: str) -> str:
    out = io.StringIO()
    call_command("drf_create_token", username, *options, stdout=out)
    [key, named] = KEY_LINE.fullmatch(out.getvalue()).groups()
    assert named == username
    return key


def _me(api_client, key: str) -> tuple[int, str]:
    api_client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    response = api_client.get("/api/me/")
    return response.status_code, response.json().get("username") or response.json()["code"]


def test_the_command_prints_a_key_that_works_and_stores_only_its_digest(api_client, user):
    """docs/operations.md "Secrets": DRF's authtoken kept every user's key in clear in the database."""
    # when
    key = _create("alice")

    # then the key authenticates, and the database holds its digest only
    assert _me(api_client, key) == (200, "alice")
    assert list(ApiKey.objects.values_list("user__username", "digest")) == [
        ("alice", hashlib.sha256(key.encode()).hexdigest())]
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT * FROM {ApiKey._meta.db_table}")
        assert not any(key in str(value) for row in cursor.fetchall() for value in row)


def test_a_second_key_needs_reset_which_retires_the_first(api_client, user):
    # given alice's key
    first = _create("alice")
    digest = ApiKey.objects.get().digest

    # when the command runs again without --reset
    with pytest.raises(CommandError, match="alice has an API key already.*--reset"):
        _create("alice")

    # then nothing changed: the first key is the one that works
    assert ApiKey.objects.get().digest == digest
    assert _me(api_client, first) == (200, "alice")
    # and --reset makes a new one, the first stops working at once
    second = _create("alice", "--reset")
    assert ApiKey.objects.count() == 1
    assert _me(api_client, second) == (200, "alice")
    assert _me(api_client, first) == (401, "authentication_failed")


def test_the_command_names_a_user_that_does_not_exist():
    with pytest.raises(CommandError, match="user nobody does not exist"):
        _create("nobody")
    assert ApiKey.objects.count() == 0


def test_keys_stored_in_clear_before_the_upgrade_keep_working_and_leave_the_database(api_client, user, other_user):
    """docs/operations.md "Secrets": an installation upgraded with DRF's authtoken_token rows must keep
    its users' keys working, and keep none of them in clear."""
    # given DRF's table as the previous version left it, with alice's and bob's keys in clear
    alice_key, bob_key = "a" * 40, "0123456789abcdef0123456789abcdef01234567"
    with connection.cursor() as cursor:
        cursor.execute('CREATE TABLE authtoken_token ("key" varchar(40) PRIMARY KEY, created timestamp with time zone '
                       "NOT NULL, user_id integer NOT NULL UNIQUE)")
        cursor.execute("INSERT INTO authtoken_token VALUES (%s, now() - interval '3 days', %s), (%s, now(), %s)",
                       [alice_key, user.pk, bob_key, other_user.pk])

    # when the data migration runs
    with connection.schema_editor() as editor:
        drf_tokens_hash(apps, editor)

    # then both keys work, stored as digests with their creation time; the clear keys are gone
    assert _me(api_client, alice_key) == (200, "alice")
    assert _me(api_client, bob_key) == (200, "bob")
    assert sorted(ApiKey.objects.values_list("user__username", "digest")) == [
        ("alice", hashlib.sha256(alice_key.encode()).hexdigest()),
        ("bob", hashlib.sha256(bob_key.encode()).hexdigest())]
    assert ApiKey.objects.get(user=user).created_at < ApiKey.objects.get(user=other_user).created_at
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM authtoken_token")
        assert cursor.fetchone() == (0,)


def test_the_migration_has_nothing_to_do_without_drfs_table():
    # given a database that never had authtoken (a new installation)
    assert "authtoken_token" not in connection.introspection.table_names()

    # when / then
    with connection.schema_editor() as editor:
        drf_tokens_hash(apps, editor)
    assert ApiKey.objects.count() == 0


def test_make_run_prints_the_admins_key_once_and_it_keeps_working(api_client, tmp_path):
    # when make run's set-up step runs twice (two starts)
    first, second = io.StringIO(), io.StringIO()
    call_command("osmo_bootstrap", "--pools-dir", str(tmp_path), stdout=first)
    call_command("osmo_bootstrap", "--pools-dir", str(tmp_path), stdout=second)

    # then the first start printed a key that works, the second says where a new one comes from
    [key] = re.findall(r"OSMO_TOKEN=([0-9a-f]{40})\n", first.getvalue())
    assert f"  API token: {key}   (shown this once: only its digest is stored)\n" in first.getvalue()
    assert _me(api_client, key) == (200, "admin")
    assert "OSMO_TOKEN" not in second.getvalue()
    assert ("  API token: made at an earlier start (shown then only); a new one: python manage.py drf_create_token "
            "--reset admin\n") in second.getvalue()
    assert ApiKey.objects.count() == 1


def test_the_admin_lists_api_keys_but_never_a_key_and_makes_none(staff_user, user):
    # given alice's key, and an admin signed in
    key = _create("alice")
    client = Client()
    client.force_login(staff_user)
    row = ApiKey.objects.get()

    # when the admin opens the list and the key's page
    listing = client.get("/admin/credentials/apikey/")
    page = client.get(f"/admin/credentials/apikey/{row.pk}/change/")
    add = client.get("/admin/credentials/apikey/add/")

    # then it shows whose key it is, never the key (nor its digest), and cannot make one
    assert (listing.status_code, page.status_code, add.status_code) == (200, 200, 403)
    for response in (listing, page):
        text = response.content.decode()
        assert "alice" in text
        assert key not in text and row.digest not in text
    # and DRF's token admin is gone
    assert client.get("/admin/authtoken/tokenproxy/").status_code == 404
