"""Every spec of examples/osmo/ (our versions of the examples of OSMO's specification pages and
tutorials) is accepted by a dry run on the demo pool that `make run` loads, sent as the CLI sends
it (``localpath`` files inlined) through the real API."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli.localpath import inline_localpaths
from credentials.services import credential_set
from tests.factories import import_example_pool
from workflows.models import Workflow
from workflows.services import pool_context
from workflows.spec import TokenContext, parse_workflow, resolve_tokens
from workflows.spec.template import render_spec

pytestmark = pytest.mark.django_db

OSMO_EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "osmo"
EXAMPLES = sorted(path.name for path in OSMO_EXAMPLES.glob("*.yaml"))


@pytest.fixture
def demo():
    return import_example_pool("demo.yaml")


def sent(name: str) -> str:
    path = OSMO_EXAMPLES / name
    return inline_localpaths(path.read_text(encoding="utf-8"), path.parent, name)


def test_the_examples_cover_osmos_pages():
    # then: one file per example of the specification pages and tutorials (README lists them)
    assert len(EXAMPLES) == 23


# The credentials the examples name, as their user would create them first (`osmo credential set`):
# a spec naming a credential its submitter does not own is refused (docs/spec.md, "credentials").
EXAMPLE_CREDENTIALS = {
    "huggingface": ("generic", {"token": "hf_example"}),
    "s3-writer": ("data", {"endpoint": "s3://example-bucket", "access_key_id": "AKIAEXAMPLE", "access_key": "sk"}),
}


@pytest.mark.parametrize("name", EXAMPLES)
def test_each_example_passes_a_dry_run_on_the_demo_pool(user_client, user, demo, name):
    # given
    for credential, (kind, values) in EXAMPLE_CREDENTIALS.items():
        credential_set(owner=user, name=credential, kind=kind, values=values)

    # when
    response = user_client.post("/api/workflows/", {"pool": "demo", "spec": sent(name), "dry_run": True},
                                format="json")

    # then
    assert response.status_code == 200, response.json()
    body = response.json()
    assert (body["valid"], body["pool"], body["warnings"]) == (True, "demo", [])
    assert [group["placement"]["status"] for group in body["groups"]] == ["placed"] * len(body["groups"])
    assert Workflow.objects.count() == 0


def test_the_torchrun_example_keeps_host_tokens_that_resolve_to_the_master(demo):
    # given
    pool = pool_context(demo, tuple(demo.topology_keys.order_by("position")))
    spec = parse_workflow(render_spec(sent("torchrun-two-nodes.yaml")).text, pool=pool)
    worker = spec.groups[0].tasks[1]
    launch = next(file for file in worker.files if file.path == "/opt/train/launch.sh")
    context = TokenContext(workflow_id="torchrun-two-nodes-1", output="/osmo/output",
                           hosts={"master": "master.torchrun-two-nodes-1-training"})

    # when
    text = resolve_tokens(launch.contents, context)

    # then
    assert worker.name == "worker-1"
    assert "--master_addr master.torchrun-two-nodes-1-training --master_port 29400" in text
    assert "--node_rank 1" in text
    assert "{{" not in text
    assert next(file for file in worker.files if file.path == "/opt/train/train.py").contents == (
        OSMO_EXAMPLES / "scripts" / "train.py").read_text(encoding="utf-8")
