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
