"""The dispatch hook (docs/kubernetes.md, "Credentials"): a task's credential references and its owner
give the decrypted environment variables and files of the task's Secret."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.test import override_settings

from credentials.crypto import DecryptError
from credentials.models import Credential
from credentials.services import (
    CredentialKeyMissingError,
    CredentialNotFoundError,
    CredentialRef,
    credential_set,
    keyring,
    task_secret_payload,
)
from workflows.credential_refs import task_credential_refs
from workflows.spec import PoolContext, parse_workflow

pytestmark = pytest.mark.django_db

NEW_KEY = "bmV3LWtleS1mb3ItdGhlLXJvdGF0aW9uLXRlc3QtMDE="


def test_environment_pairs_and_mount_paths_become_env_and_files(user):
    # given
    credential_set(owner=user, name="hf", kind="generic", values={"token": "hf_123", "unused": "u"})
    credential_set(owner=user, name="s3", kind="data",
                   values={"endpoint": "s3://b", "access_key_id": "AKIA", "access_key": "sk"})
    refs = [CredentialRef(name="hf", environment=(("HF_TOKEN", "token"),)), CredentialRef(name="s3", path="/etc/s3/")]

    # when
    payload = task_secret_payload(owner=user, refs=refs)

    # then
    assert payload.env == {"HF_TOKEN": "hf_123"}
    assert payload.files == {"/etc/s3/access_key": "sk", "/etc/s3/access_key_id": "AKIA", "/etc/s3/endpoint": "s3://b"}
    assert "hf_123" not in repr(payload) and "sk'" not in repr(payload)


def test_the_spec_references_reach_the_hook_unchanged(user):
    # given
    credential_set(owner=user, name="hf", kind="generic", values={"token": "hf_123"})
    spec = parse_workflow({"workflow": {"name": "w", "tasks": [{
        "name": "t", "image": "busybox", "command": ["true"], "credentials": {"hf": {"HF_TOKEN": "token"}}}]}},
        pool=PoolContext(name="p", keys=()))

    # when
    payload = task_secret_payload(owner=user, refs=task_credential_refs(next(spec.tasks())))

    # then
    assert payload.env == {"HF_TOKEN": "hf_123"}


def test_a_credential_deleted_since_submission_or_missing_a_key_is_refused(user, other_user):
    # given
    credential_set(owner=user, name="hf", kind="generic", values={"token": "t"})
    credential_set(owner=other_user, name="theirs", kind="generic", values={"token": "t"})

    # when / then
    with pytest.raises(CredentialNotFoundError):
        task_secret_payload(owner=user, refs=[CredentialRef(name="theirs", path="/x")])
    with pytest.raises(CredentialKeyMissingError) as missing:
        task_secret_payload(owner=user, refs=[CredentialRef(name="hf", environment=(("X", "password"),))])
    assert missing.value.details["errors"][0]["path"] == "credentials.hf.X"


def test_rotation_rewrites_every_row_for_the_new_first_key(user, settings):
    # given
    credential_set(owner=user, name="hf", kind="generic", values={"token": "t"})
    old_keys = list(settings.OSMO_CREDENTIALS_KEYS)

    # when
    with override_settings(OSMO_CREDENTIALS_KEYS=[NEW_KEY, *old_keys]):
        call_command("credentials_rotate")

    # then: the new key alone reads it, the old alone does not
    with override_settings(OSMO_CREDENTIALS_KEYS=[NEW_KEY]):
        payload = task_secret_payload(owner=user, refs=[CredentialRef(name="hf", environment=(("T", "token"),))])
    assert payload.env == {"T": "t"}
    row = Credential.objects.get()
    with pytest.raises(DecryptError, match="cannot be decrypted"):
        keyring().open(row.sealed, owner_id=user.pk, name="hf")
