"""The embedded default (SQLite + filesystem broker) serves every page and filtered endpoint.

The rest of the suite runs on PostgreSQL; SQLite differs in JSON lookups and locking, and a
`make run` user meets it first (a label filter once answered 500 there: "malformed JSON")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_page_answers_on_sqlite(tmp_path):
    # given the embedded default with the demo pools, one placed workflow and one waiting
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update({"DJANGO_SETTINGS_MODULE": "osmo.settings.local", "OSMO_DATA_DIR": str(tmp_path), "DEBUG": "false",
                "LOG_LEVEL": "ERROR"})
    subprocess.run([sys.executable, "manage.py", "migrate", "--no-input", "-v0"], cwd=ROOT, env=env, check=True)
    # when every page is requested
    script = (ROOT / "tests" / "integration" / "embedded_smoke.py").read_text()
    result = subprocess.run([sys.executable, "manage.py", "shell", "-v0", "-c", script], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-4000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    # then none fails, and the workflow was placed on SQLite too
    assert {url: code for url, code in report["statuses"].items() if code != 200} == {}
    assert report["placed_status"] == "RUNNING"


QUEUE_SCRIPT = """
import json
from django.contrib.auth import get_user_model
from django.core.management import call_command
from scheduler.models import Pool
from workflows.models import Workflow
from workflows.selectors import workflow_detail_queryset
from workflows.services import workflow_submit
from workflows.waiting import workflow_waiting

call_command("osmo_bootstrap", stdout=open("/dev/null", "w"))
admin = get_user_model().objects.get(username="admin")
Pool.objects.filter(name="demo").update(status="OFFLINE")
spec = "workflow:\\n  name: NAME\\n  tasks:\\n  - {name: t, image: busybox, command: [echo]}\\n"
first, _ = workflow_submit(user=admin, pool_name="demo", spec=spec.replace("NAME", "first"))
second, _ = workflow_submit(user=admin, pool_name="demo", spec=spec.replace("NAME", "second"))
answers = {}
for workflow in (first, second):
    [waiting] = workflow_waiting(workflow_detail_queryset(user=admin).get(pk=workflow.pk)).values()
    answers[workflow.workflow_id] = [waiting["position"], waiting["ahead"], waiting["lines"][0]]
print(json.dumps(answers))
"""


def test_a_queued_workflow_is_not_ahead_of_itself_on_sqlite(tmp_path):
    # given: the embedded default, two workflows queued in an OFFLINE pool, one after the other
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update({"DJANGO_SETTINGS_MODULE": "osmo.settings.local", "OSMO_DATA_DIR": str(tmp_path), "DEBUG": "false",
                "LOG_LEVEL": "ERROR"})
    subprocess.run([sys.executable, "manage.py", "migrate", "--no-input", "-v0"], cwd=ROOT, env=env, check=True)
    # when: their places in the pool's queue are asked for
    result = subprocess.run([sys.executable, "manage.py", "shell", "-v0", "-c", QUEUE_SCRIPT], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=300)
    # then: the first is first (SQLite once compared the stored time with the aware one as text, so
    # every workflow counted itself as submitted before itself)
    assert result.returncode == 0, result.stderr[-4000:]
    assert json.loads(result.stdout.strip().splitlines()[-1]) == {
        "first-1": [1, {"HIGH": 0, "NORMAL": 0, "LOW": 0}, "Queue: first in the pool's queue; nothing is ahead of it."],
        "second-1": [2, {"HIGH": 0, "NORMAL": 1, "LOW": 0}, "Queue: 2nd in the pool's queue; ahead of it: 1 NORMAL."],
    }
