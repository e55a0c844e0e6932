"""``osmo workflow exec``: a command, or an interactive shell on a terminal, in a running task, or a command
in every task of a group with each line of its output prefixed ``[task]``; ``--keep-alive`` opens the
session again when the connection is lost, and waits while the task is rescheduled.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
import time
from typing import Any

import typer
import websocket

from cli.api import Api, workflow_path
from cli.errors import EXIT_INTERRUPTED, EXIT_USAGE, CliError
from cli.main import api_client, workflow_app
from cli.sessions.exec_stream import (
    CLOSE_REASONS,
    CLOSE_TASK_ENDED,
    RESIZE,
    ConnectionLost,
    exec_run,
)
from cli.sessions.opening import open_waiting

SHELL = ["/bin/sh", "-c", "if [ -x /bin/bash ]; then exec /bin/bash; else exec /bin/sh; fi"]


def _writer(stream: Any) -> Any:
    def write(data: bytes) -> None:
        stream.buffer.write(data)
        stream.buffer.flush()
    return write


def _terminal_size() -> tuple[int, int]:
    try:
        size = os.get_terminal_size(sys.stdout.fileno())
    except OSError:
        return 80, 24
    return size.columns, size.lines


def _exec_one(api: Api, workflow_id: str, task: str, argv: list[str], *, tty: bool, keep_alive: bool,
              connect_timeout: float) -> int:
    forward_stdin = tty or not sys.stdin.isatty()
    current: list[websocket.WebSocket] = []
    saved = None
    previous_winch: Any = None
    if tty:
        import termios
        import tty as tty_module

        # raw before connecting, and without flushing (TCSANOW): what is typed meanwhile waits in the terminal,
        # unechoed, and reaches the task's shell once the session is open
        saved = termios.tcgetattr(sys.stdin.fileno())
        tty_module.setraw(sys.stdin.fileno(), termios.TCSANOW)

        def resize(*_: Any) -> None:
            width, height = _terminal_size()
            with contextlib.suppress(Exception):
                current[-1].send_binary(bytes([RESIZE]) + json.dumps({"Width": width, "Height": height}).encode())

        previous_winch = signal.signal(signal.SIGWINCH, resize)
    try:
        while True:
            ws = open_waiting(api, workflow_id, task, {"kind": "exec", "command": argv, "tty": tty},
                              connect_timeout=connect_timeout, keep_alive=keep_alive)
            current[:] = [ws]
            if tty:
                resize()
            try:
                result = exec_run(ws, tty=tty, forward_stdin=forward_stdin, out=_writer(sys.stdout),
                                  err=_writer(sys.stderr))
            except ConnectionLost as exc:
                if not keep_alive:
                    raise CliError(f"the session into {workflow_id}/{task} was lost: {exc}",
                                   hint="--keep-alive opens it again by itself.") from None
                typer.echo(f"\r\n[osmo] connection lost ({exc}); reconnecting to {workflow_id}/{task}...", err=True)
                time.sleep(1)
                continue
            if result.exit_code is not None:
                return result.exit_code
            if keep_alive and result.close_code == CLOSE_TASK_ENDED:  # rescheduled (wait for it) or ended (stop)
                continue
            reason = CLOSE_REASONS.get(result.close_code, f"the service closed the session ({result.close_code})")
            raise CliError(f"the session into {workflow_id}/{task} ended: {reason}")
    finally:
        if saved is not None:
            import termios

            termios.tcsetattr(sys.stdin.fileno(), termios.TCSADRAIN, saved)
            signal.signal(signal.SIGWINCH, previous_winch)


def _group_tasks(api: Api, workflow_id: str, group: str) -> list[str]:
    workflow = api.get(workflow_path(workflow_id), not_found=f"workflow {workflow_id} not found")
    for each in workflow.get("groups") or []:
        if each.get("name") == group:
            return [str(task.get("name")) for task in each.get("tasks") or []]
    names = ", ".join(str(each.get("name")) for each in workflow.get("groups") or [])
    raise CliError(f"workflow {workflow_id} has no group {group!r} (groups: {names})", exit_code=EXIT_USAGE)


class _Prefixed:
    """Whole lines of one task's stream, each prefixed ``[task] `` (as ``osmo workflow logs``)."""

    lock = threading.Lock()

    def __init__(self, task: str, stream: Any) -> None:
        self.prefix = f"[{task}] ".encode()
        self.stream = stream
        self.pending = b""

    def __call__(self, data: bytes) -> None:
        self.pending += data
        *lines, self.pending = self.pending.split(b"\n")
        self._write(lines)

    def flush(self) -> None:
        if self.pending:
            self._write([self.pending])
            self.pending = b""

    def _write(self, lines: list[bytes]) -> None:
        if lines:
            with self.lock:
                self.stream.buffer.write(b"".join(self.prefix + line + b"\n" for line in lines))
                self.stream.buffer.flush()


def _exec_group(api: Api, workflow_id: str, group: str, argv: list[str], *, keep_alive: bool,
                connect_timeout: float) -> int:
    tasks = _group_tasks(api, workflow_id, group)
    codes: dict[str, int] = {}
    failures: dict[str, str] = {}

    def run(task: str) -> None:
        out, err = _Prefixed(task, sys.stdout), _Prefixed(task, sys.stderr)
        while True:
            try:
                ws = open_waiting(api, workflow_id, task, {"kind": "exec", "command": argv, "tty": False},
                                  connect_timeout=connect_timeout, keep_alive=keep_alive)
                result = exec_run(ws, tty=False, forward_stdin=False, out=out, err=err)
            except ConnectionLost as exc:
                if keep_alive:
                    time.sleep(1)
                    continue
                failures[task] = f"the session was lost: {exc}"
                return
            except CliError as exc:
                failures[task] = exc.message
                return
            finally:
                out.flush()
                err.flush()
            if result.exit_code is None and keep_alive and result.close_code == CLOSE_TASK_ENDED:
                continue
            if result.exit_code is None:
                failures[task] = CLOSE_REASONS.get(result.close_code, f"closed ({result.close_code})")
            else:
                codes[task] = result.exit_code
            return

    threads = [threading.Thread(target=run, args=(task,), daemon=True) for task in tasks]
    for thread in threads:
        thread.start()
    for thread in threads:
        while thread.is_alive():
            thread.join(0.2)
    for task, why in failures.items():
        typer.echo(f"error: [{task}] {why}", err=True)
    failed = [code for code in codes.values() if code != 0]
    return failed[0] if failed else (1 if failures else 0)


@workflow_app.command("exec")
def workflow_exec(
    workflow_id: str = typer.Argument(..., metavar="ID", help="The workflow (ID, or OWNER/ID)."),
    task: str = typer.Argument(None, help="The task to exec into."),
    group: str = typer.Option(None, "--group", help="Run --entry in every task of this group, output prefixed "
                                                    "[task]."),
    entry: str = typer.Option(None, "--entry", help="A command to run (with /bin/sh -c) instead of an interactive "
                                                    "shell; its output and exit code are this command's."),
    keep_alive: bool = typer.Option(False, "--keep-alive", help="Open the session again when the connection is lost."),
    connect_timeout: int = typer.Option(60, "--connect-timeout", min=1, help="Seconds to keep trying to connect."),
) -> None:
    """Run a command, or an interactive shell, in a running task.

    Without --entry: a shell (/bin/bash, else /bin/sh) on a terminal when stdin is one (Ctrl-C reaches the
    task's process, Ctrl-D ends the shell). With --entry: its stdout, stderr and exit code are this command's."""
    if (task is None) == (group is None):
        raise CliError("name a TASK or a --group (one of them)", exit_code=EXIT_USAGE)
    if group is not None and entry is None:
        raise CliError("--group runs a command in every task of the group: give it with --entry", exit_code=EXIT_USAGE)
    argv = ["/bin/sh", "-c", entry] if entry is not None else SHELL
    tty = entry is None and sys.stdin.isatty() and sys.stdout.isatty()
    with api_client() as api:
        try:
            if group is not None:
                code = _exec_group(api, workflow_id, group, argv, keep_alive=keep_alive,
                                   connect_timeout=connect_timeout)
            else:
                code = _exec_one(api, workflow_id, task, argv, tty=tty, keep_alive=keep_alive,
                                 connect_timeout=connect_timeout)
        except KeyboardInterrupt:
            raise typer.Exit(EXIT_INTERRUPTED) from None
    raise typer.Exit(code)
