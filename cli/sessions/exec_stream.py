"""One exec session carried over its websocket: Kubernetes' ``v5.channel.k8s.io`` frames (stdin to the task,
its stdout, stderr and exit status back, a terminal's size), and what the service's close codes mean to the
user. ``osmo workflow exec`` and ``osmo workflow rsync`` both run their commands through :func:`exec_run`.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import struct
import sys
import threading
from dataclasses import dataclass
from typing import Any

import websocket

STDIN, STDOUT, STDERR, STATUS, RESIZE, CLOSE_STDIN = 0, 1, 2, 3, 4, 255
# The service's close codes (docs/api.md): what each means to the user.
CLOSE_REASONS = {4409: "the task is no longer running", 4408: "the session was idle too long",
                 4410: "the session reached its maximum length", 4500: "the backend failed"}
CLOSE_TASK_ENDED = 4409
RECONNECT_CODES = {1001, 1006, 1011, 1012, 1013}  # going away, lost, server error, restart, try again later


class ConnectionLost(Exception):
    """The websocket ended without the session's end (a restart, a network failure)."""



def _close_code(ws: websocket.WebSocket, frame: Any) -> int:
    data = getattr(frame, "data", b"") or b""
    return struct.unpack("!H", data[:2])[0] if len(data) >= 2 else 1005


@dataclass
class ExecResult:
    exit_code: int | None = None
    close_code: int = 1000


def _status_exit_code(payload: bytes) -> int:
    try:
        status = json.loads(payload)
    except ValueError:
        return 1
    if status.get("status") == "Success":
        return 0
    for cause in (status.get("details") or {}).get("causes") or []:
        if cause.get("reason") == "ExitCode":
            with contextlib.suppress(ValueError, TypeError):
                return int(cause.get("message"))
    return 1


def exec_run(ws: websocket.WebSocket, *, tty: bool, forward_stdin: bool, out: Any, err: Any,
             feed: Any = None) -> ExecResult:
    """Carry one exec session: stdin to the task (when ``forward_stdin``), its output to ``out``/``err``
    (callables taking bytes). ``feed``, when given, is the stdin instead: called with the websocket in a
    thread of its own, it sends the STDIN frames and the CLOSE_STDIN one. Returns when the websocket closes;
    raises :class:`ConnectionLost` when it was lost before the command's status came."""
    result = ExecResult()
    stop = threading.Event()

    def pump_stdin() -> None:
        fd = sys.stdin.fileno()
        while not stop.is_set():
            try:  # waits in short steps: a session that ended leaves the next one the bytes typed after it
                if not select.select([fd], [], [], 0.2)[0]:
                    continue
                data = os.read(fd, 65536)
            except (OSError, ValueError):
                data = b""
            try:
                ws.send_binary(bytes([STDIN]) + data if data else bytes([CLOSE_STDIN]))
            except (OSError, websocket.WebSocketException):
                return
            if not data:
                return

    if feed is not None:
        threading.Thread(target=feed, args=(ws,), name="exec-feed", daemon=True).start()
    elif forward_stdin:
        threading.Thread(target=pump_stdin, name="exec-stdin", daemon=True).start()
    else:
        ws.send_binary(bytes([CLOSE_STDIN]))
    try:
        while True:
            try:
                opcode, frame = ws.recv_data_frame(True)
            except websocket.WebSocketTimeoutException:
                continue
            except (OSError, websocket.WebSocketConnectionClosedException) as exc:
                if result.exit_code is not None:
                    return result
                raise ConnectionLost(str(exc) or "the connection was lost") from None
            if opcode == websocket.ABNF.OPCODE_CLOSE:
                result.close_code = _close_code(ws, frame)
                if result.exit_code is None and result.close_code in RECONNECT_CODES:
                    raise ConnectionLost(f"the service closed the connection ({result.close_code})")
                return result
            data = frame.data or b""
            if opcode != websocket.ABNF.OPCODE_BINARY or not data:
                continue
            channel, payload = data[0], data[1:]
            if channel == STDOUT:
                out(payload)
            elif channel == STDERR:
                err(payload)
            elif channel == STATUS:
                result.exit_code = _status_exit_code(payload)
    finally:
        stop.set()
        with contextlib.suppress(Exception):
            ws.close(timeout=1)

