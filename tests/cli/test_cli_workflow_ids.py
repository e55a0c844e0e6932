"""The CLI names another owner's workflow as ``OWNER/ID`` (docs/design.md §7, "Workflow ids")."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from tests.factories import make_nvl72_pool

pytestmark = pytest.mark.django_db(transaction=True)

SPEC = """
workflow:
  name: alicewf
  tasks:
  - name: train
    image: busybox
    command: ["sh", "-c", "echo hi"]
resources:
  default:
    gpu: 1
"""


def _submit(user) -> None:
    client = APIClient()
    client.force_authenticate(user)
    assert client.post("/api/workflows/", {"pool": "nvl72", "spec": SPEC}, format="json").status_code == 201



def test_the_cli_names_another_owners_workflow_as_owner_slash_id(osmo, user, other_user, staff_user):
    # given: alice's and bob's alicewf-1, and a staff token
    from tests.factories import make_api_key

    make_nvl72_pool("nvl72", zones=1, spines=1, racks=1, nodes=2)
    _submit(user)
    _submit(other_user)
    staff = {"OSMO_TOKEN": make_api_key(staff_user)}
    # when
    ambiguous = osmo("workflow", "query", "alicewf-1", "--json", env=staff)
    bobs = osmo("workflow", "query", "bob/alicewf-1", "--json", env=staff)
    spec = osmo("workflow", "spec", "alice/alicewf-1", env=staff)
    # then
    assert ambiguous.exit_code != 0
    assert "owners: alice, bob" in ambiguous.output
    assert bobs.exit_code == 0, bobs.output
    assert '"submitted_by": "bob"' in bobs.stdout
    assert spec.exit_code == 0, spec.output
    assert "name: alicewf" in spec.stdout


def test_an_id_that_is_no_workflow_id_is_a_usage_error_before_any_request(osmo, user):
    # given: '.' and '..' are path steps (the URL of '.' is the workflow list), a '/' past the owner's
    # makes another URL, and an empty id or owner names nothing
    make_nvl72_pool("nvl72", zones=1, spines=1, racks=1, nodes=2)
    _submit(user)
    # when
    results = {given: osmo("workflow", command, given)
               for command, given in (("query", "."), ("cancel", ".."), ("logs", "a/b/c"), ("wait", "alice/"),
                                      ("spec", ""), ("events", "/alicewf-1/x"))}
    # then
    assert {given: (result.exit_code, result.stderr.strip()) for given, result in results.items()} == {
        given: (2, f"error: {given!r} is not a workflow id: write ID or OWNER/ID (osmo workflow list shows them)")
        for given in results}
    assert osmo("workflow", "query", "alicewf-1", "--json").stdout.count('"status": "PENDING"') == 1
