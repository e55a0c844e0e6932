"""/api/credentials/ (docs/api.md "Credentials"): the signed-in user's credentials, values encrypted at
rest and never answered, bad input a 400 naming the field with nothing stored, other users' a 404."""

from __future__ import annotations

import json
import logging

import pytest

from credentials.kinds import VALUE_MAX_BYTES
from credentials.models import Credential
from credentials.services import keyring

pytestmark = pytest.mark.django_db

REGISTRY = {"name": "ngc", "kind": "registry",
            "values": {"registry": "nvcr.io", "username": "$oauthtoken", "auth": "nvapi-very-secret"}}


def test_a_created_credential_is_listed_without_values_and_stored_encrypted(user_client, user):
    # when
    created = user_client.post("/api/credentials/", REGISTRY, format="json")
    listed = user_client.get("/api/credentials/")

    # then
    assert created.status_code == 201, created.json()
    assert set(created.json()) == {"name", "kind", "keys", "created_at", "updated_at"}
    assert (created.json()["name"], created.json()["kind"], created.json()["keys"]) == (
        "ngc", "registry", ["auth", "registry", "username"])
    assert listed.status_code == 200
    assert [item["name"] for item in listed.json()["results"]] == ["ngc"]
    assert "nvapi-very-secret" not in json.dumps(listed.json()) + json.dumps(created.json())
    row = Credential.objects.get(owner=user)
    assert "nvapi-very-secret" not in row.sealed
    assert keyring().open(row.sealed, owner_id=user.pk, name="ngc")["auth"] == "nvapi-very-secret"


def test_put_creates_then_replaces_and_post_of_a_taken_name_is_a_conflict(user_client, user):
    # when
    first = user_client.put("/api/credentials/wandb/", {"kind": "generic", "values": {"api_key": "one"}},
                            format="json")
    second = user_client.put("/api/credentials/wandb/", {"kind": "generic", "values": {"key2": "two"}},
                             format="json")
    taken = user_client.post("/api/credentials/", {"name": "wandb", "kind": "generic", "values": {"a": "b"}},
                             format="json")

    # then
    assert (first.status_code, second.status_code, taken.status_code) == (201, 200, 409)
    assert second.json()["keys"] == ["key2"]
    assert taken.json()["details"]["errors"][0]["path"] == "name"
    row = Credential.objects.get(owner=user, name="wandb")
    assert keyring().open(row.sealed, owner_id=user.pk, name="wandb") == {"key2": "two"}


@pytest.mark.parametrize(("body", "path", "fragment"), [
    ({"name": "x", "kind": "vault", "values": {"a": "b"}}, "kind", "unknown kind 'vault'"),
    ({"name": "x", "values": {"a": "b"}}, "kind", "required"),
    ({"name": "-bad name", "kind": "generic", "values": {"a": "b"}}, "name", "invalid credential name"),
    ({"name": "x" * 64, "kind": "generic", "values": {"a": "b"}}, "name", "invalid credential name"),
    ({"name": "x", "kind": "generic", "values": {}}, "values", "at least one key"),
    ({"name": "x", "kind": "generic", "values": "a=b"}, "values", "must be a mapping"),
    ({"name": "x", "kind": "generic", "values": {"a": 3}}, "values.a", "must be text"),
    ({"name": "x", "kind": "generic", "values": {"a": "v" * (VALUE_MAX_BYTES + 1)}}, "values.a",
     f"at most {VALUE_MAX_BYTES}"),
    ({"name": "x", "kind": "registry", "values": {"registry": "r", "username": "u"}}, "values.auth",
     "required for a registry credential"),
    ({"name": "x", "kind": "data", "values": {"endpoint": "s3://b", "access_key_id": "i", "access_key": "k",
                                              "colour": "red"}}, "values.colour", "not a key of a data credential"),
    ({"name": "x", "kind": "data", "values": {"endpoint": "bucket", "access_key_id": "i", "access_key": "k"}},
     "values.endpoint", "must be a storage URL"),
])
def test_bad_input_is_a_400_naming_the_field_and_nothing_is_stored(user_client, body, path, fragment):
    # when
    response = user_client.post("/api/credentials/", body, format="json")

    # then
    assert response.status_code == 400, response.json()
    assert response.json()["code"] == "validation_error"
    errors = response.json()["details"]["errors"]
    assert any(error["path"] == path and fragment in error["message"] for error in errors), errors
    assert Credential.objects.count() == 0


def test_a_body_naming_another_credential_than_the_url_is_refused(user_client):
    # when
    response = user_client.put("/api/credentials/a/", {"name": "b", "kind": "generic", "values": {"k": "v"}},
                               format="json")

    # then
    assert response.status_code == 400
    assert response.json()["details"]["errors"][0]["path"] == "name"
    assert Credential.objects.count() == 0


def test_another_users_credential_is_a_404_and_stays(user_client, other_user, api_client):
    # given
    user_client.post("/api/credentials/", REGISTRY, format="json")
    api_client.force_authenticate(other_user)

    # when
    listed = api_client.get("/api/credentials/")
    shown = api_client.get("/api/credentials/ngc/")
    deleted = api_client.delete("/api/credentials/ngc/")

    # then
    assert listed.json()["results"] == []
    assert (shown.status_code, deleted.status_code) == (404, 404)
    assert deleted.json()["code"] == "credential_not_found"
    assert Credential.objects.filter(name="ngc").count() == 1


def test_staff_see_neither_the_values_nor_other_users_credentials(user_client, staff_client):
    # given
    user_client.post("/api/credentials/", REGISTRY, format="json")

    # when
    listed = staff_client.get("/api/credentials/")
    shown = staff_client.get("/api/credentials/ngc/")

    # then
    assert listed.json()["results"] == []
    assert shown.status_code == 404


def test_delete_removes_only_the_named_credential(user_client, user):
    # given
    user_client.post("/api/credentials/", REGISTRY, format="json")
    user_client.put("/api/credentials/keep/", {"kind": "generic", "values": {"k": "v"}}, format="json")

    # when
    response = user_client.delete("/api/credentials/ngc/")

    # then
    assert response.status_code == 204
    assert list(Credential.objects.filter(owner=user).values_list("name", flat=True)) == ["keep"]


def test_anonymous_requests_are_refused(api_client):
    # when
    response = api_client.get("/api/credentials/")

    # then
    assert response.status_code == 401
    assert response.json()["code"] == "not_authenticated"


def test_the_log_lines_of_a_set_name_the_credential_and_never_a_value(user_client, caplog):
    # when
    with caplog.at_level(logging.DEBUG):
        user_client.post("/api/credentials/", REGISTRY, format="json")

    # then
    lines = [(record.getMessage(), record.__dict__) for record in caplog.records
             if record.name.startswith("credentials")]
    assert [message for message, _ in lines] == ["credential.set"]
    assert lines[0][1]["credential"] == "ngc"
    assert "nvapi-very-secret" not in repr([record.__dict__ for record in caplog.records])


def test_a_new_credential_past_the_per_user_limit_is_a_409_and_replacing_one_still_works(user_client, user,
                                                                                         other_user, settings):
    # given a limit of two, reached by this user; another user has none
    settings.OSMO_MAX_CREDENTIALS_PER_USER = 2
    for name in ("one", "two"):
        assert user_client.put(f"/api/credentials/{name}/", {"kind": "generic", "values": {"k": name}},
                               format="json").status_code == 201

    # when the user creates a third, by PUT and by POST, and replaces one of the two
    put = user_client.put("/api/credentials/three/", {"kind": "generic", "values": {"k": "3"}}, format="json")
    post = user_client.post("/api/credentials/", {"name": "three", "kind": "generic", "values": {"k": "3"}},
                            format="json")
    replaced = user_client.put("/api/credentials/two/", {"kind": "generic", "values": {"k": "2b"}}, format="json")

    # then the new ones are refused in the envelope, saying what to do, and nothing was stored
    for refused in (put, post):
        assert refused.status_code == 409, refused.json()
        assert refused.json()["code"] == "credential_limit"
        assert refused.json()["details"] == {"limit": 2}
        assert "osmo credential delete" in refused.json()["message"]
    assert replaced.status_code == 200, replaced.json()
    assert sorted(Credential.objects.filter(owner=user).values_list("name", flat=True)) == ["one", "two"]

    # and once one is deleted, or with the limit off, a new one is created
    assert user_client.delete("/api/credentials/one/").status_code == 204
    assert user_client.put("/api/credentials/three/", {"kind": "generic", "values": {"k": "3"}},
                           format="json").status_code == 201
    settings.OSMO_MAX_CREDENTIALS_PER_USER = 0
    assert user_client.put("/api/credentials/four/", {"kind": "generic", "values": {"k": "4"}},
                           format="json").status_code == 201


def test_a_bad_key_s_path_is_written_as_every_error_path_is(user_client):
    # when keys of every form are refused
    response = user_client.put("/api/credentials/x/", {"kind": "data", "values": {
        "1a": "v", "a.b": "v", "endpoint": "s3://b"}}, format="json")

    # then a key with a dot is quoted (the form the CLI and the pages locate), a plain one is not
    assert response.status_code == 400, response.json()
    paths = [error["path"] for error in response.json()["details"]["errors"]]
    assert paths == ["values.1a", "values.access_key_id", "values.access_key", "values.1a", 'values["a.b"]']
