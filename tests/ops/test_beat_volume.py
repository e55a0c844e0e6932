"""Beat keeps sending the periodic tasks when its schedule file cannot be written (a full or read-only
data volume): it keeps the schedule in memory and says so (docs/operations.md, "Failure answers").
A real `celery beat` process in bubblewrap, its schedule folder a tmpfs filled up or bound read-only."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import wait_for

pytestmark = pytest.mark.django_db(transaction=True)
ROOT = Path(__file__).resolve().parents[2]
SENT = "Sending due task workflows-tick"
FILL = "dd if=/dev/zero of=\"$1/filler\" bs=4096 2>/dev/null; shift; exec \"$@\""


def beat_in(tmp_path: Path, worker_env: dict[str, str], *mount: str) -> tuple[subprocess.Popen, Path]:
    """``celery beat`` with its schedule in ``<tmp>/volume``, mounted as ``mount`` says (filled first)."""
    volume = tmp_path / "volume"
    volume.mkdir()
    log = tmp_path / "beat.log"
    beat = [sys.executable, "-m", "celery", "-A", "osmo", "beat", "-l", "DEBUG", "-s", str(volume / "schedule")]
    argv = [shutil.which("bwrap") or "bwrap", "--bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
            *[str(volume) if part == "VOLUME" else part for part in mount],
            "--", "sh", "-c", FILL, "fill", str(volume), *beat]
    with open(log, "w") as output:
        process = subprocess.Popen(argv, cwd=ROOT, env={**worker_env, "LOG_LEVEL": "DEBUG"}, stdout=output,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    return process, log


def stop(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=20)
    except ProcessLookupError:
        pass
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


@pytest.mark.parametrize(("mount", "error"), [
    (("--size", "65536", "--tmpfs", "VOLUME"), "No space left on device"),
    (("--ro-bind", "VOLUME", "VOLUME"), "Read-only file system"),
], ids=["full", "read-only"])
def test_beat_sends_ticks_when_its_schedule_file_cannot_be_written(worker_env, tmp_path, mount, error):
    """Replays the fault run: with the schedule's volume full, beat exited at start (OSError from
    shelve: "No space left on device"), and crash-looped under its supervisor."""
    # given a beat whose schedule folder is full, or read-only
    process, log = beat_in(tmp_path, worker_env, *mount)
    try:
        # when it has run a while
        wait_for(lambda: log.read_text().count(SENT) >= 3 or process.poll() is not None, timeout=60,
                 message="beat to send three ticks or exit")

        # then it is still running, sending the tick, and said once why its schedule is in memory only
        text = log.read_text()
        assert process.poll() is None, text[-3000:]
        assert text.count(SENT) >= 3
        assert text.count("beat.schedule_in_memory") == 1, text[-3000:]
        assert error in text
    finally:
        stop(process)
