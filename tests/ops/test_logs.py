"""Structured logs on demand (docs/design.md §10): LOG_FORMAT=json, or plain text, both with the
records' extra fields (the ids the scheduler puts on its lines)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import wait_for
from tests.factories import make_node, make_pool
from tests.ops.conftest import ROOT
from tests.pipeline.helpers import gang_spec
from workflows.models import Workflow
from workflows.services import workflow_submit

EMIT = ("import logging; logging.getLogger('workflows.scheduling.cycle').warning("
        "'placement.cycle', extra={'pool': 'nvl72', 'placed': 2, 'group': 17, 'reason': 'no room'})")


def _emit(log_format: str, tmp_path) -> subprocess.CompletedProcess:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "osmo.settings.test", "LOG_FORMAT": log_format,
           "OSMO_DATA_DIR": str(tmp_path)}
    return subprocess.run([sys.executable, "manage.py", "shell", "-v0", "-c", EMIT], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


def _lines(text: str, message: str) -> list[str]:
    return [line for line in text.splitlines() if message in line]


def test_json_logs_are_one_object_per_line_with_the_extras(tmp_path):
    # when a scheduler line is logged with LOG_FORMAT=json
    result = _emit("json", tmp_path)
    # then it is a JSON object carrying the extras as fields
    assert result.returncode == 0, result.stderr
    [line] = _lines(result.stderr, "placement.cycle")
    record = json.loads(line)
    assert set(record) == {"time", "level", "logger", "message", "pool", "placed", "group", "reason"}
    assert {key: value for key, value in record.items() if key != "time"} == {
        "level": "WARNING", "logger": "workflows.scheduling.cycle", "message": "placement.cycle",
        "pool": "nvl72", "placed": 2, "group": 17, "reason": "no room"}


def test_plain_logs_append_the_extras(tmp_path):
    # when the same line is logged in the default format
    result = _emit("plain", tmp_path)
    # then the extras follow the message as key=value
    assert result.returncode == 0, result.stderr
    [line] = _lines(result.stderr, "placement.cycle")
    assert line.split(" ", 2)[2] == (
        "WARNING workflows.scheduling.cycle placement.cycle group=17 placed=2 pool=nvl72 reason='no room'")


def test_an_unknown_log_format_stops_startup(tmp_path):
    result = _emit("xml", tmp_path)
    assert result.returncode != 0
    assert "LOG_FORMAT must be one of plain, json, not 'xml'" in result.stderr


@pytest.mark.django_db(transaction=True)
def test_a_real_worker_logs_its_placement_cycle_as_json_with_the_pool(user, celery_worker_factory, worker_env):
    # given a worker logging JSON
    pool = make_pool("json-logs", keys=[("rack", "rack")])
    make_node(pool, "a1", {"rack": "r1"}, gpu=4)
    worker = celery_worker_factory("jsonlogs", env={**worker_env, "LOG_FORMAT": "json"})
    # when a gang is submitted and placed
    workflow, _created = workflow_submit(user=user, pool_name="json-logs", spec=gang_spec("logged", 1, 1, key=None))
    wait_for(lambda: Workflow.objects.get(pk=workflow.pk).tasks.filter(node__isnull=False).exists(), timeout=60,
             message="the gang placed")
    # then the worker's cycle line is a JSON object naming the pool and what it placed
    def cycle_records():
        return [json.loads(line) for line in _lines(worker.log(), '"placement.cycle"')]

    [record] = wait_for(cycle_records, timeout=10, message="the cycle's log line")
    assert (record["level"], record["message"], record["pool"], record["placed"], record["unschedulable"]) == (
        "INFO", "placement.cycle", "json-logs", 1, 0)


CELERY_LINES = """
import logging
from celery.app import trace
def task(name, **more):
    return {"id": "0f0f", "name": name, "args": "()", "kwargs": "{}", "eta": None, "runtime": 0.01,
            "return_value": "None", **more}
for name in ("workflows.tick", "workflows.tick_watch", "workflows.placement_cycle_run", "workflows.pods_sync",
             "workflows.groups_dispatch"):
    logging.getLogger("celery.worker.strategy").info(trace.LOG_RECEIVED, task(name), extra={"data": task(name)})
    trace.info(trace.LOG_SUCCESS, task(name))
failed = task("workflows.tick", description="raised unexpected", exc="OperationalError('gone')")
logging.getLogger("celery.app.trace").error(trace.LOG_FAILURE, failed, extra={"data": failed})
logging.getLogger("celery.beat").info("Scheduler: Sending due task %s (%s)", "workflows-tick", "workflows.tick")
logging.getLogger("django.server").info('"%s" %s %s', "GET /api/me/ HTTP/1.1", "200", "36",
                                        extra={"request": object(), "server_time": "26/Nov/2026", "status_code": 200})
"""


def _celery_lines(tmp_path, level: str) -> list[str]:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "osmo.settings.test", "LOG_FORMAT": "plain", "LOG_LEVEL": level,
           "OSMO_DATA_DIR": str(tmp_path)}
    result = subprocess.run([sys.executable, "manage.py", "shell", "-v0", "-c", CELERY_LINES], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return [line.split(" ", 2)[2] for line in result.stderr.splitlines()
            if (" celery." in line or " django.server " in line) and not line.startswith(" ")]


def test_ticks_and_idle_cycles_log_at_debug_and_a_dispatch_or_failure_at_info_once(tmp_path):
    """Replays ``make run``'s console: every second two INFO lines with the whole message body (a
    tick received, a tick succeeded) buried the lines a user needs. Routine work (ticks, their
    watch, idle placement cycles, pod syncs, beat sending them) logs at DEBUG, a task's receipt at
    DEBUG too; a dispatch is one INFO line without the body, a failure stays an ERROR line; a
    request line leaves out runserver's socket object."""
    # when Celery's own lines are logged at the default level
    lines = _celery_lines(tmp_path, "INFO")
    # then
    assert lines == [
        "INFO celery.app.trace Task workflows.groups_dispatch[0f0f] succeeded in 0.01s: None",
        "ERROR celery.app.trace Task workflows.tick[0f0f] raised unexpected: OperationalError('gone')",
        'INFO django.server "GET /api/me/ HTTP/1.1" 200 36 status_code=200',
    ]


def test_with_log_level_debug_the_routine_lines_come_back_at_debug(tmp_path):
    # when
    lines = _celery_lines(tmp_path, "DEBUG")
    # then every line is there, the routine ones and the receipts at DEBUG
    assert [line.split(" ", 1)[0] for line in lines] == ["DEBUG"] * 9 + ["INFO", "ERROR", "DEBUG", "INFO"]
    assert lines[-2] == "DEBUG celery.beat Scheduler: Sending due task workflows-tick (workflows.tick)"
