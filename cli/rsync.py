"""``osmo workflow rsync upload|download``: copy files and folders to or from a running task (docs/cli.md).

Built on the exec session (cli/sessions.py); no new endpoint: the session's REST call does every check (owner,
RUNNING, backend). Where ``rsync`` is on both ends, ``rsync`` itself runs, with an exec session as its remote
shell (cli/rsync_rsh.py): incremental, only what changed is sent. Otherwise (the CLI's machine or the task's
image lacks it) a plain copy: a tar stream over the session's stdin (``tar -xf -`` in the task) for an
upload, over its stdout (``tar -cf -`` in the task) for a download.
"""

from __future__ import annotations

import contextlib
import json
import os
import posixpath
import shlex
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import typer
import websocket

# (the module, not its names: cli.sessions imports cli.main, which imports this module)
from cli import sessions
from cli.api import Api, workflow_path
from cli.errors import EXIT_INTERRUPTED, EXIT_USAGE, CliError
from cli.main import api_client, workflow_app

#: An upload larger than this (the files' bytes) is refused before anything is sent.
UPLOAD_MAX_BYTES = 2 * 1024**3
#: Lowers the limit (a number of bytes; never raises it above UPLOAD_MAX_BYTES).
MAX_BYTES_ENV = "OSMO_RSYNC_MAX_BYTES"
WORKSPACE = "/osmo/run/workspace"
CHUNK = 64 * 1024
MISSING_CODE = 66  # the task's exit code when REMOTE does not exist (a download)
NO_RSYNC_CODE = 67  # the probe's exit code when the task has no rsync
MKDIR_CODE = 68  # the probe's exit code when REMOTE cannot be made (an upload)
# --daemon's defaults (OSMO leaves them to its admins; these are this CLI's)
DEFAULT_POLL_SECONDS = 2.0
DEFAULT_DEBOUNCE_SECONDS = 1.0
DEFAULT_RECONCILE_SECONDS = 60.0
DEFAULT_MAX_LOG_BYTES = 2 * 1024 * 1024

rsync_app = typer.Typer(
    help=f"Copy files and folders to or from a running task ({WORKSPACE} always exists in it).",
    no_args_is_help=True)
workflow_app.add_typer(rsync_app, name="rsync")


# ------------------------------------------------------------------------------------------------
# Arguments
# ------------------------------------------------------------------------------------------------
def _task_and_path(task: str | None, path: str | None, shape: str) -> tuple[str | None, str]:
    """OSMO's shape: ``WF [TASK] PATH``: with one argument after WF it is the PATH."""
    if path is None:
        if task is None:
            example = f"./data:{WORKSPACE}" if shape.startswith("LOCAL") else f"{WORKSPACE}/out:./out"
            raise CliError(f"give {shape} (e.g. {example})", exit_code=EXIT_USAGE)
        return None, task
    return task, path


def remote_checked(remote: str, shape: str) -> str:
    """An absolute path in the task without ``..``; its trailing slashes dropped."""
    if not remote:
        raise CliError(f"{shape}: REMOTE is empty", exit_code=EXIT_USAGE)
    if not remote.startswith("/"):
        raise CliError(f"{shape}: REMOTE {remote!r} is not an absolute path in the task (e.g. {WORKSPACE})",
                       exit_code=EXIT_USAGE)
    if ".." in remote.split("/"):
        raise CliError(f"{shape}: REMOTE {remote!r} contains '..'", exit_code=EXIT_USAGE)
    if "\0" in remote or "\n" in remote:
        raise CliError(f"{shape}: REMOTE {remote!r} contains a NUL or a newline", exit_code=EXIT_USAGE)
    return posixpath.normpath(remote) if remote != "/" else "/"


def upload_limit() -> int:
    text = os.environ.get(MAX_BYTES_ENV, "").strip()
    if not text:
        return UPLOAD_MAX_BYTES
    try:
        value = int(text)
    except ValueError:
        raise CliError(f"{MAX_BYTES_ENV}={text!r} is not a number of bytes", exit_code=EXIT_USAGE) from None
    return max(0, min(value, UPLOAD_MAX_BYTES))


def local_size(path: str) -> int:
    """The bytes of the regular files an upload of ``path`` sends (symbolic links are sent as links)."""
    if not os.path.isdir(path) or os.path.islink(path):
        return os.lstat(path).st_size if os.path.isfile(path) and not os.path.islink(path) else 0
    total = 0
    for top, _dirs, files in os.walk(path):
        for name in files:
            full = os.path.join(top, name)
            with contextlib.suppress(OSError):
                if not os.path.islink(full):
                    total += os.lstat(full).st_size
    return total


def default_task(api: Api, workflow_id: str) -> str:
    """The lead task of the first group (its first task when none is lead)."""
    workflow = api.get(workflow_path(workflow_id), not_found=f"workflow {workflow_id} not found")
    groups = workflow.get("groups") or []
    tasks = (groups[0].get("tasks") or []) if groups else []
    if not tasks:
        raise CliError(f"workflow {workflow_id} has no task")
    lead = [task for task in tasks if task.get("lead")]
    return str((lead or tasks)[0].get("name"))


# ------------------------------------------------------------------------------------------------
# Progress and rate
# ------------------------------------------------------------------------------------------------
def _human(count: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if count < 1024 or unit == "GiB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    return f"{count:.1f} GiB"


class Meter:
    """Counts the bytes carried; draws ``VERB N (R/s)`` on stderr when ``show``; sleeps to keep under ``rate``
    bytes per second (when given)."""

    def __init__(self, verb: str, *, show: bool, rate: int | None = None) -> None:
        self.verb, self.show, self.rate = verb, show, rate
        self.count = 0
        self.started = time.monotonic()
        self.drawn = 0.0

    def add(self, count: int) -> None:
        self.count += count
        now = time.monotonic()
        if self.rate:
            ahead = self.count / self.rate - (now - self.started)
            if ahead > 0:
                time.sleep(ahead)
                now = time.monotonic()
        if self.show and now - self.drawn >= 0.2:
            self.draw(now)

    def draw(self, now: float) -> None:
        self.drawn = now
        speed = self.count / max(now - self.started, 1e-3)
        sys.stderr.write(f"\r{self.verb} {_human(self.count)} ({_human(speed)}/s)\033[K")
        sys.stderr.flush()

    def done(self) -> None:
        if self.show:
            self.draw(time.monotonic())
            sys.stderr.write("\n")
            sys.stderr.flush()


def _stderr_bytes(data: bytes) -> None:
    sys.stderr.buffer.write(data)
    sys.stderr.buffer.flush()


def _run(api: Api, workflow_id: str, task: str, script: str, *, timeout: int, out: Any, feed: Any = None) -> int:
    """Run ``script`` with /bin/sh -c in the task; the task's stderr is passed on. Returns its exit code."""
    ws = sessions.session_open(api, workflow_id, task, {"kind": "exec", "command": ["/bin/sh", "-c", script],
                                                        "tty": False}, connect_timeout=timeout)
    try:
        result = sessions.exec_run(ws, tty=False, forward_stdin=False, out=out, err=_stderr_bytes, feed=feed)
    except sessions.ConnectionLost as exc:
        raise CliError(f"the session into {workflow_id}/{task} was lost: {exc}") from None
    if result.exit_code is None:
        reason = sessions.CLOSE_REASONS.get(result.close_code, f"the service closed the session ({result.close_code})")
        raise CliError(f"the session into {workflow_id}/{task} ended: {reason}")
    return result.exit_code


# ------------------------------------------------------------------------------------------------
# rsync itself, over an exec session
# ------------------------------------------------------------------------------------------------
def local_rsync() -> str | None:
    """The CLI machine's rsync, or None (then a plain copy)."""
    return shutil.which("rsync")


def _rsh(workflow_id: str, timeout: int) -> str:
    """rsync's --rsh: this Python running cli.rsync_rsh (rsync splits it at spaces; quotes keep a path whole)."""
    words = [sys.executable, "-m", "cli.rsync_rsh", "--timeout", str(timeout), workflow_id]
    return " ".join(f"'{word}'" if " " in word else word for word in words)


def rsync_argv(rsync: str, workflow_id: str, *, timeout: int, rate: int | None, progress: bool) -> list[str]:
    """rsync's options: files, folders, links, permissions and times (not owners: the task's user owns what it
    receives); ``rate`` bytes per second as --bwlimit (KiB/s, at least 1)."""
    argv = [rsync, "-rlpt", "--rsh", _rsh(workflow_id, timeout)]
    if rate:
        argv.append(f"--bwlimit={max(1, rate // 1024)}")
    if progress:
        argv.append("--info=progress2")
    return argv


def _probe(api: Api, workflow_id: str, task: str, script: str, *, timeout: int) -> int:
    return _run(api, workflow_id, task, script, timeout=timeout, out=_stderr_bytes)


def _rsync(argv: list[str], what: str) -> None:
    try:
        code = subprocess.run(argv, check=False).returncode
    except OSError as exc:
        raise CliError(f"{what}: rsync could not start: {exc.strerror or exc}") from None
    if code != 0:
        raise CliError(f"{what} failed: rsync exit code {code}")


# ------------------------------------------------------------------------------------------------
# upload
# ------------------------------------------------------------------------------------------------
class _FrameWriter:
    """A file tarfile writes to: its bytes go out as STDIN frames, metered."""

    def __init__(self, ws: websocket.WebSocket, meter: Meter) -> None:
        self.ws, self.meter = ws, meter

    def write(self, data: bytes) -> int:
        view = memoryview(data)
        for start in range(0, len(view), CHUNK):
            piece = bytes(view[start:start + CHUNK])
            self.ws.send_binary(bytes([sessions.STDIN]) + piece)
            self.meter.add(len(piece))
        return len(data)


def _tar_upload(api: Api, workflow_id: str, task: str, local: str, remote: str, *, contents: bool, timeout: int,
                rate: int | None, show: bool) -> int:
    """The plain copy: a tar stream over the session's stdin. Returns the bytes sent."""
    meter = Meter("sent", show=show, rate=rate)
    failure: list[str] = []

    def feed(ws: websocket.WebSocket) -> None:
        try:
            writer = cast(Any, _FrameWriter(ws, meter))
            with tarfile.open(fileobj=writer, mode="w|", format=tarfile.PAX_FORMAT) as archive:
                if contents:
                    for name in sorted(os.listdir(local)):
                        archive.add(os.path.join(local, name), arcname=name)
                else:
                    archive.add(local, arcname=os.path.basename(local) or ".")
        except (OSError, websocket.WebSocketException) as exc:
            failure.append(str(exc))
            with contextlib.suppress(Exception):
                ws.close(timeout=1)  # the task's tar gets no end: nothing claims the copy is whole
            return
        with contextlib.suppress(Exception):
            ws.send_binary(bytes([sessions.CLOSE_STDIN]))

    script = f"mkdir -p -- {shlex.quote(remote)} && cd -- {shlex.quote(remote)} && exec tar -xf -"
    try:
        code = _run(api, workflow_id, task, script, timeout=timeout, out=_stderr_bytes, feed=feed)
    finally:
        meter.done()
    if failure:
        raise CliError(f"the upload to {workflow_id}/{task}:{remote} stopped: {failure[0]}")
    if code != 0:
        raise CliError(f"the upload to {workflow_id}/{task}:{remote} failed in the task (tar exit code {code})")
    return meter.count


def upload_once(api: Api, workflow_id: str, task: str, local: str, remote: str, *, contents: bool, timeout: int,
                rate: int | None, show: bool) -> str:
    """One upload: rsync where both ends have it (only what changed is sent), else the plain copy. Returns how
    it went, for the user."""
    rsync = local_rsync()
    if rsync is not None:
        quoted = shlex.quote(remote)
        code = _probe(api, workflow_id, task, f"mkdir -p -- {quoted} || exit {MKDIR_CODE}; "
                                              f"command -v rsync >/dev/null || exit {NO_RSYNC_CODE}", timeout=timeout)
        if code == MKDIR_CODE:
            raise CliError(f"the folder {remote} cannot be made in {workflow_id}/{task}")
        if code == 0:
            source = local + "/" if contents else local
            _rsync([*rsync_argv(rsync, workflow_id, timeout=timeout, rate=rate, progress=show), "--", source,
                    f"{task}:{remote}/"], f"the upload to {workflow_id}/{task}:{remote}")
            return "with rsync: only what changed was sent"
        if code != NO_RSYNC_CODE:
            raise CliError(f"the upload to {workflow_id}/{task}:{remote} failed in the task (exit code {code})")
    count = _tar_upload(api, workflow_id, task, local, remote, contents=contents, timeout=timeout, rate=rate,
                        show=show)
    where = "here" if rsync is None else "in the task"
    return f"a plain copy of {count} bytes: rsync is missing {where}"


@rsync_app.command("upload")
def rsync_upload(
    workflow_id: str = typer.Argument(..., metavar="WF", help="The workflow (ID, or OWNER/ID)."),
    task: str = typer.Argument(None, metavar="TASK", help="The task (default: the lead task of the first group)."),
    path: str = typer.Argument(None, metavar="LOCAL:REMOTE", help="A local file or folder, and the task's folder "
                                                                  "to copy it into (absolute)."),
    timeout: int = typer.Option(10, "--timeout", min=1, help="Seconds to keep trying to connect."),
    rate_limit: int = typer.Option(None, "--upload-rate-limit", min=1, help="At most this many bytes per second."),
    no_progress: bool = typer.Option(False, "--no-progress", help="No progress line (shown on a terminal only)."),
    daemon: bool = typer.Option(False, "--daemon", help="Keep uploading changes in a background process, until "
                                                        "the task ends (osmo workflow rsync status|stop)."),
    poll_interval: float = typer.Option(DEFAULT_POLL_SECONDS, "--poll-interval", min=0.05,
                                        help="--daemon: seconds between looks at LOCAL (and at the task)."),
    debounce_delay: float = typer.Option(DEFAULT_DEBOUNCE_SECONDS, "--debounce-delay", min=0.0,
                                         help="--daemon: seconds without a change before changes are sent."),
    reconcile_interval: float = typer.Option(DEFAULT_RECONCILE_SECONDS, "--reconcile-interval", min=1.0,
                                             help="--daemon: seconds between uploads even without a change seen "
                                                  "(one that failed while the connection was down is redone)."),
    max_log_size: int = typer.Option(DEFAULT_MAX_LOG_BYTES, "--max-log-size", min=1024,
                                     help="--daemon: bytes of its log before the log is rotated."),
    verbose: bool = typer.Option(False, "--verbose", help="--daemon: log every look, not only uploads."),
    run_daemon: bool = typer.Option(False, "--run-daemon", hidden=True),
) -> None:
    """Copy a local file or folder into a folder of a running task (made if missing): LOCAL is placed in
    REMOTE under its name; a folder given with a trailing slash (dir/) has its contents placed instead.
    Incremental (rsync) where rsync is on both ends, a plain copy otherwise."""
    shape = "LOCAL:REMOTE"
    chosen, path = _task_and_path(task, path, shape)
    local, colon, remote = path.rpartition(":")
    if not colon or not local:
        raise CliError(f"{path!r} is not {shape} (e.g. ./data:{WORKSPACE})", exit_code=EXIT_USAGE)
    remote = remote_checked(remote, shape)
    if not os.path.lexists(local):
        raise CliError(f"no such local file or folder: {local}")
    contents = local.endswith("/") and os.path.isdir(local)
    local = local.rstrip("/") or "/"
    size = local_size(local)
    limit = upload_limit()
    if size > limit:
        raise CliError(f"{local} holds {_human(size)} ({size} bytes): more than an upload's limit of "
                       f"{_human(limit)} ({limit} bytes)", hint="Upload it in parts, or put it in a dataset.")
    with api_client() as api:
        try:
            task = chosen or default_task(api, workflow_id)
            if daemon or run_daemon:
                options = DaemonOptions(poll=poll_interval, debounce=debounce_delay, reconcile=reconcile_interval,
                                        max_log=max_log_size, verbose=verbose, timeout=timeout, rate=rate_limit)
                if run_daemon:
                    daemon_loop(api, workflow_id, task, local, remote, contents=contents, options=options)
                    return
                daemon_start(workflow_id, task, local if not contents else local + "/", remote, options)
                return
            how = upload_once(api, workflow_id, task, local, remote, contents=contents, timeout=timeout,
                              rate=rate_limit, show=sys.stderr.isatty() and not no_progress)
        except KeyboardInterrupt:
            raise typer.Exit(EXIT_INTERRUPTED) from None
    typer.echo(f"Uploaded {local} to {workflow_id}/{task}:{remote} ({how})")


# ------------------------------------------------------------------------------------------------
# download
# ------------------------------------------------------------------------------------------------
def _conflicts(source: str, target: str) -> list[str]:
    """Where placing ``source`` over ``target`` would put a file over a folder or a folder over a file."""
    if not os.path.lexists(target):
        return []
    source_dir = os.path.isdir(source) and not os.path.islink(source)
    target_dir = os.path.isdir(target) and not os.path.islink(target)
    if source_dir != target_dir:
        return [target]
    if not source_dir:
        return []
    return [c for name in os.listdir(source) for c in _conflicts(os.path.join(source, name),
                                                                 os.path.join(target, name))]


def _place(source: str, target: str) -> None:
    """Move ``source`` to ``target``: folders merged, files replaced (``_conflicts`` checked first)."""
    if os.path.isdir(source) and not os.path.islink(source) and os.path.isdir(target):
        for name in os.listdir(source):
            _place(os.path.join(source, name), os.path.join(target, name))
        return
    os.replace(source, target)


@rsync_app.command("download")
def rsync_download(
    workflow_id: str = typer.Argument(..., metavar="WF", help="The workflow (ID, or OWNER/ID)."),
    task: str = typer.Argument(None, metavar="TASK", help="The task (default: the lead task of the first group)."),
    path: str = typer.Argument(None, metavar="REMOTE:LOCAL", help="A file or folder of the task (absolute), and "
                                                                  "the local folder to copy it into."),
    timeout: int = typer.Option(10, "--timeout", min=1, help="Seconds to keep trying to connect."),
    no_progress: bool = typer.Option(False, "--no-progress", help="No progress line (shown on a terminal only)."),
) -> None:
    """Copy a file or folder of a running task into a local folder (made if missing), under its name. Nothing
    is placed unless the whole copy came: it is received aside, then moved in (folders merged, files replaced)."""
    shape = "REMOTE:LOCAL"
    chosen, path = _task_and_path(task, path, shape)
    remote, colon, local = path.partition(":")
    if not colon or not local:
        raise CliError(f"{path!r} is not {shape} (e.g. {WORKSPACE}/out:./out)", exit_code=EXIT_USAGE)
    remote = remote_checked(remote, shape)
    if remote == "/":
        raise CliError(f"{shape}: REMOTE may not be the task's whole filesystem (/)", exit_code=EXIT_USAGE)
    if os.path.lexists(local) and not os.path.isdir(local):
        raise CliError(f"{local} is not a folder: a download is placed in a local folder, under its own name")
    made = not os.path.exists(local)
    meter = Meter("received", show=sys.stderr.isatty() and not no_progress)
    parent, name = posixpath.split(remote)
    quoted = shlex.quote(remote)
    exists = (f"if [ ! -e {quoted} ] && [ ! -L {quoted} ]; then echo \"no such file or folder in the task: \"{quoted}"
              f" >&2; exit {MISSING_CODE}; fi")
    script = f"{exists}; cd -- {shlex.quote(parent)} && exec tar -cf - -- {shlex.quote(name)}"
    rsync = local_rsync()
    if rsync is not None:  # rsync itself where the task has it too: only what changed comes
        with api_client() as api:
            try:
                task = chosen or default_task(api, workflow_id)
                code = _probe(api, workflow_id, task, f"{exists}; command -v rsync >/dev/null || exit {NO_RSYNC_CODE}",
                              timeout=timeout)
                if code == MISSING_CODE:
                    raise CliError(f"{workflow_id}/{task} has no file or folder {remote}")
                if code == 0:
                    try:
                        os.makedirs(local, exist_ok=True)
                    except OSError as exc:
                        raise CliError(f"cannot make the local folder {local}: {exc.strerror or exc}") from None
                    what = f"the download of {workflow_id}/{task}:{remote}"
                    _rsync([*rsync_argv(rsync, workflow_id, timeout=timeout, rate=None, progress=meter.show), "--",
                            f"{task}:{remote}", local.rstrip("/") + "/"], what)
                    typer.echo(f"Downloaded {workflow_id}/{task}:{remote} to {os.path.join(local, name)} (with rsync: "
                               "only what changed was received)")
                    return
                if code != NO_RSYNC_CODE:
                    raise CliError(f"the download of {workflow_id}/{task}:{remote} failed in the task "
                                   f"(exit code {code})")
                chosen = task
            except KeyboardInterrupt:
                raise typer.Exit(EXIT_INTERRUPTED) from None
    try:
        os.makedirs(local, exist_ok=True)
    except OSError as exc:
        raise CliError(f"cannot make the local folder {local}: {exc.strerror or exc}") from None
    staging = tempfile.mkdtemp(prefix=".osmo-rsync-", dir=local)
    try:
        spool_path = os.path.join(staging, "stream.tar")
        with open(spool_path, "wb") as spool, api_client() as api:
            lock = threading.Lock()

            def out(data: bytes) -> None:
                with lock:
                    spool.write(data)
                    meter.add(len(data))

            try:
                task = chosen or default_task(api, workflow_id)
                code = _run(api, workflow_id, task, script, timeout=timeout, out=out)
            except KeyboardInterrupt:
                raise typer.Exit(EXIT_INTERRUPTED) from None
            finally:
                meter.done()
        if code == MISSING_CODE:
            raise CliError(f"{workflow_id}/{task} has no file or folder {remote}")
        if code != 0:
            raise CliError(f"the download of {workflow_id}/{task}:{remote} failed in the task (tar exit code {code})")
        tree = os.path.join(staging, "tree")
        os.mkdir(tree)
        try:
            with tarfile.open(spool_path, mode="r:") as archive:
                archive.extractall(tree, filter="data")
        except (tarfile.TarError, OSError) as exc:
            raise CliError(f"the download of {workflow_id}/{task}:{remote} could not be unpacked: {exc}") from None
        entries = os.listdir(tree)
        clashes = [c for entry in entries for c in _conflicts(os.path.join(tree, entry), os.path.join(local, entry))]
        if clashes:
            raise CliError(f"the download would replace a folder with a file or a file with a folder: {clashes[0]}",
                           details=clashes[1:5])
        for entry in entries:
            _place(os.path.join(tree, entry), os.path.join(local, entry))
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        if made:
            with contextlib.suppress(OSError):
                os.rmdir(local)
        raise
    shutil.rmtree(staging, ignore_errors=True)
    typer.echo(f"Downloaded {workflow_id}/{task}:{remote} to {os.path.join(local, name)} ({meter.count} bytes)")


# ------------------------------------------------------------------------------------------------
# --daemon: keep uploading changes
# ------------------------------------------------------------------------------------------------
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
            status = sessions.task_status(api, workflow_id, task)
        except CliError as exc:
            log(f"Cannot read the task's status: {exc.message}")
            time.sleep(options.poll)
            continue
        if sessions.task_ended(status):
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


@rsync_app.command("status")
def rsync_status() -> None:
    """The rsync daemons running on this machine."""
    running = daemons()
    if not running:
        typer.echo("No rsync daemon is running.")
        return
    for each in running:
        typer.echo(f"PID {each['pid']}: {each['local']} -> {each['workflow']}/{each['task']}:{each['remote']} "
                   f"(since {each.get('started', '?')}; log {each.get('log', '?')})")


@rsync_app.command("stop")
def rsync_stop(
    workflow_id: str = typer.Argument(None, metavar="[WF]", help="Only the daemons of this workflow."),
    task: str = typer.Option(None, "--task", help="Only the daemon of this task."),
) -> None:
    """Stop rsync daemons: all of them, a workflow's, or one task's."""
    chosen = [each for each in daemons() if (workflow_id is None or each.get("workflow") == workflow_id)
              and (task is None or each.get("task") == task)]
    if not chosen:
        typer.echo("No such rsync daemon is running.")
        return
    for each in chosen:
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(each["pid"]), signal.SIGTERM)
        typer.echo(f"Stopped the rsync daemon of {each['workflow']}/{each['task']} (PID {each['pid']})")
