"""``osmo workflow rsync upload|download``: copy files and folders to or from a running task (docs/cli.md).

Built on the exec session (cli/sessions/); no new endpoint: the session's REST call does every check (owner,
RUNNING, backend). Where ``rsync`` is on both ends, ``rsync`` itself runs, with an exec session as its remote
shell (cli/rsync_rsh.py): incremental, only what changed is sent. Otherwise (the CLI's machine or the task's
image lacks it) a plain copy: a tar stream over the session's stdin (``tar -xf -`` in the task) for an
upload, over its stdout (``tar -cf -`` in the task) for a download.

The commands and their arguments are here; how the bytes move is :mod:`cli.rsync_transfer`, the ``--daemon``
machinery :mod:`cli.rsync_daemon`.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import shlex
import shutil
import signal
import sys
import tarfile
import tempfile
import threading

import typer

from cli.api import Api, workflow_path
from cli.errors import EXIT_INTERRUPTED, EXIT_USAGE, CliError
from cli.main import api_client, workflow_app
from cli.rsync_daemon import (
    DEFAULT_DEBOUNCE_SECONDS,
    DEFAULT_MAX_LOG_BYTES,
    DEFAULT_POLL_SECONDS,
    DEFAULT_RECONCILE_SECONDS,
    DaemonOptions,
    daemon_loop,
    daemon_start,
    daemons,
)
from cli.rsync_transfer import (
    NO_RSYNC_CODE,
    Meter,
    human,
    local_rsync,
    probe,
    rsync_argv,
    rsync_run,
    run_script,
    upload_once,
)

#: An upload larger than this (the files' bytes) is refused before anything is sent.
UPLOAD_MAX_BYTES = 2 * 1024**3
#: Lowers the limit (a number of bytes; never raises it above UPLOAD_MAX_BYTES).
MAX_BYTES_ENV = "OSMO_RSYNC_MAX_BYTES"
WORKSPACE = "/osmo/run/workspace"
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
# upload
# ------------------------------------------------------------------------------------------------
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
        raise CliError(f"{local} holds {human(size)} ({size} bytes): more than an upload's limit of "
                       f"{human(limit)} ({limit} bytes)", hint="Upload it in parts, or put it in a dataset.")
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
                code = probe(api, workflow_id, task, f"{exists}; command -v rsync >/dev/null || exit {NO_RSYNC_CODE}",
                              timeout=timeout)
                if code == MISSING_CODE:
                    raise CliError(f"{workflow_id}/{task} has no file or folder {remote}")
                if code == 0:
                    try:
                        os.makedirs(local, exist_ok=True)
                    except OSError as exc:
                        raise CliError(f"cannot make the local folder {local}: {exc.strerror or exc}") from None
                    what = f"the download of {workflow_id}/{task}:{remote}"
                    rsync_run([*rsync_argv(rsync, workflow_id, timeout=timeout, rate=None, progress=meter.show), "--",
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
                code = run_script(api, workflow_id, task, script, timeout=timeout, out=out)
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
# the --daemon processes: status and stop
# ------------------------------------------------------------------------------------------------
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
