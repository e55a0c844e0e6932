"""``osmo credential set | list | delete`` (docs/cli.md "Credentials"): the installed console script
against a live server; secrets from stdin, never printed back."""

from __future__ import annotations

import json

import pytest

from credentials.models import Credential
from credentials.services import keyring

db = pytest.mark.django_db(transaction=True)


@db
def test_set_list_delete_through_the_console_script(osmo_process, user):
    # when
    registry = osmo_process("credential", "set", "ngc", "--type", "REGISTRY", "--registry", "nvcr.io",
                            "--username", "$oauthtoken", "--password-stdin", input="nvapi-secret\n")
    data = osmo_process("credential", "set", "s3", "--type", "data", "--endpoint", "s3://bucket",
                        "--access-key-id", "AKIA1", "--secret-access-key-stdin", input="sk-secret")
    generic = osmo_process("credential", "set", "wandb", "--type", "generic", "--payload", "api_key=w1", "team=x")
    replaced = osmo_process("credential", "set", "wandb", "--type", "generic", "--value", "api_key=w2")
    listed = osmo_process("credential", "list")
    listed_json = osmo_process("credential", "list", "--json")
    deleted = osmo_process("credential", "delete", "s3")

    # then
    assert registry.returncode == 0, registry.stderr
    assert registry.stdout == "Credential ngc created (registry: auth, registry, username).\n"
    assert data.stdout == "Credential s3 created (data: access_key, access_key_id, endpoint).\n"
    assert generic.stdout == "Credential wandb created (generic: api_key, team).\n"
    assert replaced.stdout == "Credential wandb updated (generic: api_key).\n"
    lines = listed.stdout.splitlines()
    assert lines[0].split() == ["NAME", "TYPE", "KEYS", "UPDATED"]
    assert [line.split()[:3] for line in lines[1:]] == [["ngc", "registry", "auth,registry,username"],
                                                         ["s3", "data", "access_key,access_key_id,endpoint"],
                                                         ["wandb", "generic", "api_key"]]
    assert [item["name"] for item in json.loads(listed_json.stdout)] == ["ngc", "s3", "wandb"]
    outputs = "".join(run.stdout + run.stderr for run in (registry, data, generic, replaced, listed, listed_json))
    assert "nvapi-secret" not in outputs and "sk-secret" not in outputs
    assert deleted.stdout == "Credential s3 deleted.\n"
    assert sorted(Credential.objects.filter(owner=user).values_list("name", flat=True)) == ["ngc", "wandb"]
    row = Credential.objects.get(owner=user, name="ngc")
    assert keyring().open(row.sealed, owner_id=user.pk, name="ngc") == {
        "registry": "nvcr.io", "username": "$oauthtoken", "auth": "nvapi-secret"}


@db
def test_bad_input_is_a_usage_error_naming_the_field_and_nothing_is_stored(osmo_process, osmo):
    # when
    unknown = osmo_process("credential", "set", "x", "--type", "vault", "--value", "a=b")
    missing = osmo_process("credential", "set", "r", "--type", "registry", "--registry", "nvcr.io")
    bad_pair = osmo("credential", "set", "g", "--type", "generic", "--value", "novalue")
    wrong_option = osmo("credential", "set", "g", "--type", "generic", "--endpoint", "s3://b", "--value", "a=b")
    gone = osmo_process("credential", "delete", "nothing")

    # then
    assert unknown.returncode == 2
    assert "vault" in unknown.stderr
    assert missing.returncode == 2
    assert "values.username: required for a registry credential" in missing.stderr
    assert "values.auth: required for a registry credential" in missing.stderr
    assert (bad_pair.exit_code, bad_pair.stderr) == (2, "error: --value 'novalue': expected KEY=VALUE\n")
    assert wrong_option.exit_code == 2
    assert "--endpoint does not apply to a generic credential" in wrong_option.stderr
    assert gone.returncode == 1
    assert gone.stderr == "error: credential nothing not found\n"
    assert Credential.objects.count() == 0
