"""A spec's task ``credentials`` at submission (docs/spec.md, "credentials"): naming a credential the
user does not own is a 400 naming the field, nothing stored; owned ones pass."""

from __future__ import annotations

import pytest

from credentials.services import credential_set
from tests.factories import make_nvl72_pool
from workflows.models import Workflow

pytestmark = pytest.mark.django_db

SPEC = """workflow:
  name: creds
  tasks:
  - name: prep
    image: busybox
    command: [true]
  - name: train
    image: busybox
    command: [true]
    credentials:
      hf: {HF_TOKEN: token}
      s3-data: /etc/s3
"""

GROUPS_SPEC = """workflow:
  name: creds
  groups:
  - name: g
    tasks:
    - name: a
      lead: true
      image: busybox
      command: [true]
    - name: b
      image: busybox
      command: [true]
      credentials:
        ghost: {X: y}
"""


@pytest.fixture
def pool():
    return make_nvl72_pool("alpha", zones=1, spines=1, racks=1, nodes=2)


def test_credentials_the_user_does_not_own_are_refused_naming_each_and_nothing_is_stored(
        user_client, user, other_user, pool):
    # given: the user owns hf; only another user has s3-data
    credential_set(owner=user, name="hf", kind="generic", values={"token": "t"})
    credential_set(owner=other_user, name="s3-data", kind="generic", values={"k": "v"})

    # when
    response = user_client.post("/api/workflows/", {"pool": "alpha", "spec": SPEC}, format="json")

    # then
    assert response.status_code == 400, response.json()
    assert response.json()["code"] == "spec_invalid"
    errors = response.json()["details"]["errors"]
    assert [error["path"] for error in errors] == ["workflow.tasks[1].credentials.s3-data"]
    assert "no credential named 's3-data'" in errors[0]["message"]
    assert Workflow.objects.count() == 0


def test_a_task_in_a_group_is_named_by_its_group_path(user_client, pool):
    # when
    response = user_client.post("/api/workflows/?pool=alpha&dry_run=true", GROUPS_SPEC,
                                content_type="application/yaml")

    # then
    assert response.status_code == 400, response.json()
    assert [error["path"] for error in response.json()["details"]["errors"]] == [
        "workflow.groups[0].tasks[1].credentials.ghost"]
    assert Workflow.objects.count() == 0


def test_owned_credentials_are_accepted(user_client, user, pool):
    # given
    credential_set(owner=user, name="hf", kind="generic", values={"token": "t"})
    credential_set(owner=user, name="s3-data", kind="data",
                   values={"endpoint": "s3://bucket", "access_key_id": "id", "access_key": "key"})

    # when
    response = user_client.post("/api/workflows/", {"pool": "alpha", "spec": SPEC}, format="json")

    # then
    assert response.status_code == 201, response.json()
    assert Workflow.objects.count() == 1
