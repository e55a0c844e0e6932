"""``osmo workflow rsync upload|download``: copy files and folders to or from a running task (docs/cli.md).

Built on the exec session (cli/sessions.py): a tar stream over its stdin (``tar -xf -`` in the task) for an
upload, over its stdout (``tar -cf -`` in the task) for a download. No new endpoint: the session's REST call
does every check (owner, RUNNING, backend). A plain copy each time (no incremental rsync).
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import shlex
import shutil
import sys
import tarfile
import tempfile
import threading
import time
from typing import Any, cast

import typer
import websocket

from cli.api import Api, workflow_path
from cli.errors import EXIT_INTERRUPTED, EXIT_USAGE, CliError
from cli.main import api_client, workflow_app
from cli.sessions import CLOSE_REASONS, CLOSE_STDIN, STDIN, ConnectionLost, exec_run, session_open

#: An upload larger than this (the files' bytes) is refused before anything is sent.
UPLOAD_MAX_BYTES = 2 * 1024**3
#: Lowers the limit (a number of bytes; never raises it above UPLOAD_MAX_BYTES).
MAX_BYTES_ENV = "OSMO_RSYNC_MAX_BYTES"
WORKSPACE = "/osmo/run/workspace"
CHUNK = 64 * 1024
MISSING_CODE = 66  # the task's exit code when REMOTE does not exist (a download)

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
    ws = session_open(api, workflow_id, task, {"kind": "exec", "command": ["/bin/sh", "-c", script], "tty": False},
                      connect_timeout=timeout)
    try:
        result = exec_run(ws, tty=False, forward_stdin=False, out=out, err=_stderr_bytes, feed=feed)
    except ConnectionLost as exc:
        raise CliError(f"the session into {workflow_id}/{task} was lost: {exc}") from None
    if result.exit_code is None:
        reason = CLOSE_REASONS.get(result.close_code, f"the service closed the session ({result.close_code})")
        raise CliError(f"the session into {workflow_id}/{task} ended: {reason}")
    return result.exit_code


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
            self.ws.send_binary(bytes([STDIN]) + piece)
            self.meter.add(len(piece))
        return len(data)


@rsync_app.command("upload")
def rsync_upload(
    workflow_id: str = typer.Argument(..., metavar="WF", help="The workflow (ID, or OWNER/ID)."),
    task: str = typer.Argument(None, metavar="TASK", help="The task (default: the lead task of the first group)."),
    path: str = typer.Argument(None, metavar="LOCAL:REMOTE", help="A local file or folder, and the task's folder "
                                                                  "to copy it into (absolute)."),
    timeout: int = typer.Option(10, "--timeout", min=1, help="Seconds to keep trying to connect."),
    rate_limit: int = typer.Option(None, "--upload-rate-limit", min=1, help="At most this many bytes per second."),
    no_progress: bool = typer.Option(False, "--no-progress", help="No progress line (shown on a terminal only)."),
) -> None:
    """Copy a local file or folder into a folder of a running task (made if missing): LOCAL is placed in
    REMOTE under its name; a folder given with a trailing slash (dir/) has its contents placed instead."""
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
    meter = Meter("sent", show=sys.stderr.isatty() and not no_progress, rate=rate_limit)
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
            ws.send_binary(bytes([CLOSE_STDIN]))

    script = f"mkdir -p -- {shlex.quote(remote)} && cd -- {shlex.quote(remote)} && exec tar -xf -"
    with api_client() as api:
        try:
            task = chosen or default_task(api, workflow_id)
            code = _run(api, workflow_id, task, script, timeout=timeout, out=_stderr_bytes, feed=feed)
        except KeyboardInterrupt:
            raise typer.Exit(EXIT_INTERRUPTED) from None
        finally:
            meter.done()
    if failure:
        raise CliError(f"the upload to {workflow_id}/{task}:{remote} stopped: {failure[0]}")
    if code != 0:
        raise CliError(f"the upload to {workflow_id}/{task}:{remote} failed in the task (tar exit code {code})")
    typer.echo(f"Uploaded {local} to {workflow_id}/{task}:{remote} ({meter.count} bytes)")


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
    script = (f"if [ ! -e {quoted} ] && [ ! -L {quoted} ]; then echo \"no such file or folder in the task: \"{quoted}"
              f" >&2; exit {MISSING_CODE}; fi; cd -- {shlex.quote(parent)} && exec tar -cf - -- {shlex.quote(name)}")
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
