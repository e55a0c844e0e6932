"""How ``osmo workflow rsync`` moves bytes over an exec session (:mod:`cli.exec_stream`): ``rsync``
itself where both ends have it, with an exec session as its remote shell (cli/rsync_rsh.py), so only what
changed is sent; otherwise a plain copy, a tar stream over the session's stdin (``tar -xf -`` in the task).
Also the meter that draws the progress line and keeps a transfer under its rate, and the short scripts
(probes) run in the task first.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import subprocess
import sys
import tarfile
import time
from typing import Any, cast

import websocket

from cli.api import Api
from cli.errors import CliError
from cli.sessions.exec_stream import CLOSE_REASONS, CLOSE_STDIN, STDIN, ConnectionLost, exec_run
from cli.sessions.opening import session_open

CHUNK = 64 * 1024
NO_RSYNC_CODE = 67  # the probe's exit code when the task has no rsync
MKDIR_CODE = 68  # the probe's exit code when REMOTE cannot be made (an upload)


# ------------------------------------------------------------------------------------------------
# Progress and rate
# ------------------------------------------------------------------------------------------------
def human(count: float) -> str:
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
        sys.stderr.write(f"\r{self.verb} {human(self.count)} ({human(speed)}/s)\033[K")
        sys.stderr.flush()

    def done(self) -> None:
        if self.show:
            self.draw(time.monotonic())
            sys.stderr.write("\n")
            sys.stderr.flush()


def _stderr_bytes(data: bytes) -> None:
    sys.stderr.buffer.write(data)
    sys.stderr.buffer.flush()


def run_script(api: Api, workflow_id: str, task: str, script: str, *, timeout: int, out: Any, feed: Any = None) -> int:
    """Run ``script`` with /bin/sh -c in the task; the task's stderr is passed on. Returns its exit code."""
    ws = session_open(api, workflow_id, task, {"kind": "exec", "command": ["/bin/sh", "-c", script],
                                                        "tty": False}, connect_timeout=timeout)
    try:
        result = exec_run(ws, tty=False, forward_stdin=False, out=out, err=_stderr_bytes, feed=feed)
    except ConnectionLost as exc:
        raise CliError(f"the session into {workflow_id}/{task} was lost: {exc}") from None
    if result.exit_code is None:
        reason = CLOSE_REASONS.get(result.close_code, f"the service closed the session ({result.close_code})")
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


def probe(api: Api, workflow_id: str, task: str, script: str, *, timeout: int) -> int:
    return run_script(api, workflow_id, task, script, timeout=timeout, out=_stderr_bytes)


def rsync_run(argv: list[str], what: str) -> None:
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
            self.ws.send_binary(bytes([STDIN]) + piece)
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
            ws.send_binary(bytes([CLOSE_STDIN]))

    script = f"mkdir -p -- {shlex.quote(remote)} && cd -- {shlex.quote(remote)} && exec tar -xf -"
    try:
        code = run_script(api, workflow_id, task, script, timeout=timeout, out=_stderr_bytes, feed=feed)
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
        code = probe(api, workflow_id, task, f"mkdir -p -- {quoted} || exit {MKDIR_CODE}; "
                                              f"command -v rsync >/dev/null || exit {NO_RSYNC_CODE}", timeout=timeout)
        if code == MKDIR_CODE:
            raise CliError(f"the folder {remote} cannot be made in {workflow_id}/{task}")
        if code == 0:
            source = local + "/" if contents else local
            rsync_run([*rsync_argv(rsync, workflow_id, timeout=timeout, rate=rate, progress=show), "--", source,
                    f"{task}:{remote}/"], f"the upload to {workflow_id}/{task}:{remote}")
            return "with rsync: only what changed was sent"
        if code != NO_RSYNC_CODE:
            raise CliError(f"the upload to {workflow_id}/{task}:{remote} failed in the task (exit code {code})")
    count = _tar_upload(api, workflow_id, task, local, remote, contents=contents, timeout=timeout, rate=rate,
                        show=show)
    where = "here" if rsync is None else "in the task"
    return f"a plain copy of {count} bytes: rsync is missing {where}"

