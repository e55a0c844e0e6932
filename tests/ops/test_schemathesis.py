"""schemathesis against the production server, as a user and as staff: a bounded number of generated
cases per operation (docs/operations.md, "Checking the API against hostile input"). Every check but
one: no 5xx, status codes, headers and bodies as the OpenAPI schema documents them, schema-invalid
input refused (ST201). Left out: ``positive_data_acceptance`` (ST202, "schema-valid input
accepted"), because the schema cannot say all that makes input valid: a spec object must be a
workflow spec, node label keys Kubernetes label keys (OpenAPI 3.0 has no ``propertyNames``), a
topology filter one of the pool's keys, a log's task one of the workflow's tasks."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.factories import make_api_key, make_node, make_pool
from tests.ops.conftest import production_env

MAX_EXAMPLES = 5


def schemathesis(url: str, token: str) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("schemathesis") or str(Path(sys.executable).with_name("schemathesis"))
    return subprocess.run(
        [exe, "run", f"{url}/api/schema/", "-H", f"Authorization: Token {token}", "--checks", "all",
         "--exclude-checks", "positive_data_acceptance", "--max-examples", str(MAX_EXAMPLES), "--seed", "1",
         "--phases", "examples,coverage,fuzzing", "--no-color"],
        capture_output=True, text=True, timeout=900, check=False)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("staff", [False, True], ids=["user", "staff"])
def test_schemathesis_finds_nothing_as_user_or_staff(gunicorn_server, worker_env, tmp_path, django_user_model, staff):
    # given the production server, a user or a staff user with a token, and a pool
    # (schemathesis sends each operation a bad token: 30-odd failures a run, past the production rate of
    # 20/min for one address, whose 429 is tests/ops/test_throttling.py's subject, not this test's)
    server = gunicorn_server({**production_env(worker_env, tmp_path / "data"),
                              "OSMO_THROTTLE_AUTH_FAILURE": "100000/min"})
    token = make_api_key(django_user_model.objects.create_user(username="erin" if staff else "dave", password="x",
                                                               is_staff=staff, is_superuser=staff))
    pool = make_pool("st", keys=[("rack", "rack")])
    make_node(pool, "a1", {"rack": "r1"}, gpu=4)
    # when schemathesis runs as them
    found = schemathesis(server.base_url, token)
    # then it finds nothing
    assert found.returncode == 0, found.stdout[-6000:]
