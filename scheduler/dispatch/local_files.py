"""What the ``local`` dispatch backend (:mod:`scheduler.dispatch.local`) reads of a pod's processes
and files: whether a supervisor or its process group still runs (from ``/proc``), a result file that
the task could have replaced by a symlink or a pipe, a log's last lines read from its end, and the
pod's phase (:func:`pod_state`). Imports
nothing from Django."""

from __future__ import annotations

import json
import os
import stat
from datetime import UTC, datetime
from pathlib import Path

from scheduler.dispatch.base import LOG_READ_MAX_BYTES, PodState
from scheduler.dispatch.local_limits import LimitHit

START_DEADLINE_SECONDS = 60.0  # a supervisor that has not written its pid by then never started


def proc_stat(path: Path) -> list[str] | None:
    """The fields of a ``/proc/<pid>/stat`` after the command name (state first, then ppid and pgrp), or
    None when the process is gone."""
    try:
        return path.read_text(encoding="ascii", errors="replace").rsplit(")", 1)[1].split() or None
    except (OSError, IndexError):
        return None


def group_running(pgid: int) -> bool:
    """Whether any process of the process group still runs (zombies do not count)."""
    for path in Path("/proc").glob("[0-9]*/stat"):
        fields = proc_stat(path)
        if fields is not None and len(fields) > 2 and fields[2] == str(pgid) and fields[0] != "Z":
            return True
    return False


def alive(pid: int) -> bool:
    """Whether the process runs (a zombie does not: where nothing reaps orphans, a supervisor that was
    killed stays one)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    fields = proc_stat(Path(f"/proc/{pid}/stat"))
    return fields is None or fields[0] != "Z"


RESULT_MAX_BYTES = 1 << 20  # a runtime result is a few hundred bytes; more is not one
LOG_CHUNK_BYTES = 1 << 16


def read_regular(path: Path, limit: int) -> bytes:
    """At most ``limit`` bytes of ``path`` when it is a regular file. The pod's ``run`` folder is the
    task's ``/osmo/run``: the task may have put a symlink (to a host file) or a named pipe (whose
    ``open()`` blocks until someone writes) there, so neither is followed nor opened for real."""
    descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise OSError(f"{path.name} is not a regular file")
        return os.read(descriptor, limit)
    finally:
        os.close(descriptor)


def tail_lines(path: Path, tail: int) -> tuple[list[str], bool]:
    """The last ``tail`` lines of ``path`` and whether there are more before them, reading the file
    backwards from its end (never more than :data:`LOG_READ_MAX_BYTES`): a log can be gigabytes."""
    with open(path, "rb") as handle:
        position = handle.seek(0, os.SEEK_END)
        chunks: list[bytes] = []
        newlines = 0
        read = 0
        while position > 0 and newlines <= tail and read < LOG_READ_MAX_BYTES:
            size = min(LOG_CHUNK_BYTES, position, LOG_READ_MAX_BYTES - read)
            position -= size
            handle.seek(position)
            chunk = handle.read(size)
            chunks.append(chunk)
            read += len(chunk)
            newlines += chunk.count(b"\n")
    lines = b"".join(reversed(chunks)).decode("utf-8", errors="replace").splitlines()
    if position > 0 and lines:
        lines = lines[1:]  # the first line read may be the end of a longer one
    return (lines[-tail:] if tail else []), position > 0 or len(lines) > tail


def mtime(path: Path) -> datetime:
    return datetime.fromtimestamp(path.stat().st_mtime, tz=UTC)


def pod_pid(folder: Path) -> int | None:
    """The pid the pod's supervisor wrote, or None (not started yet, or unreadable)."""
    try:
        return int((folder / "pid").read_text().strip())
    except (OSError, ValueError):
        return None

def pod_state(folder: Path, *, now: datetime) -> PodState:
    """The pod's phase read from its folder (:mod:`scheduler.dispatch.local`'s docstring)."""
    if not folder.exists():
        return PodState("Missing")
    try:
        status = int((folder / "exit").read_text().strip())
    except FileNotFoundError:
        pid = pod_pid(folder)
        if pid is None:
            waited = (now - mtime(folder / "request.json")).total_seconds()
            if waited > START_DEADLINE_SECONDS:
                return PodState("Failed", None, f"the task's sandbox did not start within {waited:.0f} s",
                                live=True)
            return PodState("Pending")
        if alive(pid):
            return PodState("Running")
        return PodState("Failed", None, "the task's process ended without an exit status (killed)")
    except ValueError:
        return PodState("Failed", None, "the task's exit status is unreadable")
    try:
        hit = LimitHit.from_json(read_regular(folder / "limit.json", RESULT_MAX_BYTES).decode())
        return PodState("Failed", 137, hit.message)
    except FileNotFoundError:
        pass
    except (OSError, ValueError, KeyError, TypeError):
        return PodState("Failed", 137, "the task went over a limit of its sandbox")
    code, message = status, ""
    try:
        result = json.loads(read_regular(folder / "run" / "result.json", RESULT_MAX_BYTES))
        code, message = int(result["exit_code"]), str(result.get("message") or "")
    except (OSError, ValueError, KeyError, TypeError):
        if status:
            message = f"the sandbox exited with status {status} (no runtime result)"
    if code == 0 and status == 0:
        return PodState("Succeeded", 0)
    return PodState("Failed", code or status, message)
