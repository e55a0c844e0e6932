"""A metrics directory that is full or read-only costs the metrics, never the work (docs/operations.md,
"Failure answers"). A real process records into a real tmpfs made by bubblewrap: 1 MiB and filled up,
or bound read-only."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Fills the metrics directory (when asked), then records what a placement cycle and a dispatch record.
RECORD = """
import os, sys
import django
django.setup()
directory = os.environ["PROMETHEUS_MULTIPROC_DIR"]
if sys.argv[1] == "fill":
    with open(os.path.join(directory, "filler"), "wb") as filler:
        try:
            while True:
                filler.write(bytes(65536))
                filler.flush()
        except OSError:
            pass
from osmo.metrics import TASK_RUNS, cycle_observe
cycle_observe(pool="demo", seconds=0.5, placed=2, unschedulable=1)
TASK_RUNS.labels(task="workflows.tick").inc()
print("recorded")
"""


def record(tmp_path: Path, *mount: str, mode: str) -> subprocess.CompletedProcess:
    """Run :data:`RECORD` in bubblewrap with the metrics directory mounted as ``mount`` says."""
    metrics = tmp_path / "metrics"
    metrics.mkdir()
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "osmo.settings.test", "PROMETHEUS_MULTIPROC_DIR": str(metrics),
           "LOG_LEVEL": "INFO"}
    argv = [shutil.which("bwrap") or "bwrap", "--bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
            *[str(metrics) if part == "METRICS" else part for part in mount],
            "--", sys.executable, "-c", RECORD, mode]
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def test_a_full_metrics_volume_does_not_kill_the_process_that_records(tmp_path):
    """Replays the fault run: with the metrics volume full, every task of a newly started worker died
    with SIGBUS (prometheus_client writes into sparse memory-mapped files), 294 in 40 s."""
    # given a process whose metrics directory is a 1 MiB tmpfs, filled up
    # when it records a placement cycle and a task run
    ran = record(tmp_path, "--size", str(1 << 20), "--tmpfs", "METRICS", mode="fill")

    # then it goes on, and says once why it records nothing
    assert (ran.returncode, ran.stdout) == (0, "recorded\n"), ran.stderr[-3000:]
    assert ran.stderr.count("metrics.dir_unusable") == 1, ran.stderr[-3000:]
    assert "[Errno 28] No space left on device" in ran.stderr


def test_a_read_only_metrics_volume_does_not_fail_the_recording_task(tmp_path):
    # given a process whose metrics directory is read-only
    # when it records
    ran = record(tmp_path, "--ro-bind", "METRICS", "METRICS", mode="keep")

    # then
    assert (ran.returncode, ran.stdout) == (0, "recorded\n"), ran.stderr[-3000:]
    assert ran.stderr.count("metrics.dir_unusable") == 1, ran.stderr[-3000:]
    assert "Read-only file system" in ran.stderr
    assert os.listdir(tmp_path / "metrics") == []


def test_a_writable_metrics_volume_still_records(tmp_path):
    # given a process whose metrics directory is an ordinary tmpfs with room
    # when it records
    ran = record(tmp_path, "--bind", "METRICS", "METRICS", mode="keep")

    # then its files are written and nothing is said
    assert (ran.returncode, ran.stdout) == (0, "recorded\n"), ran.stderr[-3000:]
    assert "metrics.dir_unusable" not in ran.stderr
    assert sorted(name.split("_")[0] for name in os.listdir(tmp_path / "metrics")) == ["counter", "histogram"]
