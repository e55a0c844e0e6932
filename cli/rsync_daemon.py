"""``osmo workflow rsync upload --daemon``: a detached process that keeps uploading a local file or folder
to a running task (at each change, after a debounce delay, and at every reconcile interval), waits while the
task is rescheduled and stops once it ended; its records and rotated log under ``$XDG_STATE_HOME/osmo/rsync``
are what ``osmo workflow rsync status|stop`` read.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer

from cli.api import Api
from cli.errors import CliError
from cli.rsync_transfer import upload_once
from cli.sessions.opening import task_ended, task_status

# --daemon's defaults (OSMO leaves them to its admins; these are this CLI's)
DEFAULT_POLL_SECONDS = 2.0
DEFAULT_DEBOUNCE_SECONDS = 1.0
DEFAULT_RECONCILE_SECONDS = 60.0
DEFAULT_MAX_LOG_BYTES = 2 * 1024 * 1024


@dataclass(frozen=True)
class DaemonOptions:
    poll: float
    debounce: float
    reconcile: float
    max_log: int
    verbose: bool
    timeout: int
    rate: int | None


def state_dir() -> Path:
    """Where the daemons keep their logs and records (``$XDG_STATE_HOME/osmo/rsync``, as OSMO's)."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "osmo" / "rsync"


def _daemon_name(workflow_id: str, task: str) -> str:
    return "rsync_daemon_" + "".join(c if c.isalnum() or c in "-_." else "_" for c in f"{workflow_id}_{task}")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def daemons() -> list[dict[str, Any]]:
    """The daemons' records whose process still runs (the others' records are removed)."""
    found = []
    folder = state_dir()
    for record in sorted(folder.glob("rsync_daemon_*.json")) if folder.is_dir() else []:
        try:
            data = json.loads(record.read_text())
            pid = int(data["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if _alive(pid):
            found.append(data)
        else:
            with contextlib.suppress(OSError):
                record.unlink()
    return found


def daemon_start(workflow_id: str, task: str, local: str, remote: str, options: DaemonOptions) -> None:
    """Start this command again as a detached process that runs :func:`daemon_loop`; its output goes to its log."""
    folder = state_dir()
    folder.mkdir(parents=True, exist_ok=True)
    name = _daemon_name(workflow_id, task)
    for running in daemons():
        if running.get("workflow") == workflow_id and running.get("task") == task:
            raise CliError(f"an rsync daemon already uploads to {workflow_id}/{task} (PID {running['pid']})",
                           hint=f"osmo workflow rsync stop {workflow_id} --task {task}")
    log = folder / f"{name}.log"
    argv = [sys.executable, "-m", "cli", "workflow", "rsync", "upload", workflow_id, task, f"{local}:{remote}",
            "--run-daemon", "--timeout", str(options.timeout), "--poll-interval", str(options.poll),
            "--debounce-delay", str(options.debounce), "--reconcile-interval", str(options.reconcile),
            "--max-log-size", str(options.max_log), *(["--upload-rate-limit", str(options.rate)] if options.rate
                                                      else []), *(["--verbose"] if options.verbose else [])]
    with open(log, "ab") as out:
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True,
                                   close_fds=True)
    (folder / f"{name}.json").write_text(json.dumps({
        "pid": process.pid, "workflow": workflow_id, "task": task, "local": local, "remote": remote,
        "log": str(log), "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}))
    typer.echo(f"Rsync daemon started in detached process: PID {process.pid}")
    typer.echo(f"To view daemon logs: tail -f {log}")


def _snapshot(path: str) -> dict[str, tuple[int, int]]:
    """Each file's (size, modification time) under ``path``: what a change is."""
    found: dict[str, tuple[int, int]] = {}

    def add(full: str) -> None:
        with contextlib.suppress(OSError):
            info = os.lstat(full)
            found[full] = (info.st_size, info.st_mtime_ns)

    add(path)
    if os.path.isdir(path) and not os.path.islink(path):
        for top, dirs, files in os.walk(path):
            for name in dirs + files:
                add(os.path.join(top, name))
    return found


class _Log:
    """Lines to the daemon's log (its stdout and stderr), rotated to ``.1`` past ``limit`` bytes."""

    def __init__(self, limit: int) -> None:
        self.limit = limit

    def __call__(self, message: str) -> None:
        sys.stdout.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} - {os.getpid()} - {message}\n")
        sys.stdout.flush()
        self.rotate()

    def rotate(self) -> None:
        try:
            path = os.readlink(f"/proc/self/fd/{sys.stdout.fileno()}")
            if os.path.getsize(path) <= self.limit:
                return
            os.replace(path, path + ".1")
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        except OSError:
            return
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)


def daemon_loop(api: Api, workflow_id: str, task: str, local: str, remote: str, *, contents: bool,
                options: DaemonOptions) -> None:
    """Upload LOCAL now, then whenever it changed and stayed unchanged for the debounce delay, and at every
    reconcile interval anyway; wait while the task is not running (rescheduled); stop once it ended."""

    log = _Log(options.max_log)
    log(f"Starting rsync daemon: {local} -> {workflow_id}/{task}:{remote}")
    stopping: list[int] = []
    signal.signal(signal.SIGTERM, lambda signum, _frame: stopping.append(signum))
    synced: dict[str, tuple[int, int]] | None = None
    seen: dict[str, tuple[int, int]] | None = None
    changed_at = last_upload = 0.0
    while not stopping:
        try:
            status = task_status(api, workflow_id, task)
        except CliError as exc:
            log(f"Cannot read the task's status: {exc.message}")
            time.sleep(options.poll)
            continue
        if task_ended(status):
            log(f"Task {task} is {status or 'gone'}: the daemon stops")
            break
        if status != "RUNNING":
            log(f"Task {task} is {status}: waiting for it to run")
            time.sleep(options.poll)
            continue
        now = time.monotonic()
        snapshot = _snapshot(local)
        if snapshot != seen:
            seen, changed_at = snapshot, now
        due = snapshot != synced and now - changed_at >= options.debounce
        if due or now - last_upload >= options.reconcile:
            try:
                how = upload_once(api, workflow_id, task, local, remote, contents=contents, timeout=options.timeout,
                                  rate=options.rate, show=False)
                synced, last_upload = snapshot, time.monotonic()
                log(f"Uploaded {local} to {workflow_id}/{task}:{remote} ({how})")
            except CliError as exc:
                last_upload = time.monotonic()
                log(f"Upload failed (retried at the next change or reconcile): {exc.message}")
        elif options.verbose:
            log("No change")
        time.sleep(options.poll)
    if stopping:
        log("Stopped (SIGTERM)")
    with contextlib.suppress(OSError):
        (state_dir() / f"{_daemon_name(workflow_id, task)}.json").unlink()

