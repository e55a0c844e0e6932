"""A worker started the way Celery's documentation shows (`celery -A osmo worker`, no -Q) serves every
queue of the service (docs/operations.md, "Processes")."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from scheduler.models import WorkerHeartbeat
from tests.conftest import _broker_flush, wait_for
from tests.ops.conftest import ROOT
from workflows.tasks import tick_task


@pytest.mark.django_db(transaction=True)
def test_a_worker_without_queue_options_runs_scheduler_tasks(worker_env, tmp_path):
    """Replays the fault run's finding: a plain `celery -A osmo worker` consumed only `default` and
    never placed anything."""
    # given a worker started with no -Q
    _broker_flush()
    log_path = tmp_path / "worker.log"
    with open(log_path, "w") as log:
        worker = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "osmo", "worker", "-c", "1", "--without-mingle",
             "--without-gossip", "-n", "plain@%h", "-l", "INFO"],
            cwd=ROOT, env=worker_env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
        try:
            # when the tick, a task of the scheduler queue, is sent
            tick_task.delay()
            # then the worker runs it
            wait_for(lambda: WorkerHeartbeat.objects.filter(token="scheduler.tick").exists(), timeout=60,
                     message=f"the tick to run; worker log:\n{log_path.read_text()[-3000:]}")
        finally:
            os.killpg(worker.pid, signal.SIGTERM)
            worker.wait(timeout=30)
    queues = log_path.read_text().split("[queues]", 1)[1].split("[tasks]", 1)[0]
    assert [line.split()[1] for line in queues.strip().splitlines()] == ["default", "dispatch", "scheduler"]
