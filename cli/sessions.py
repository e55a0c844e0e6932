"""``osmo workflow exec`` and ``osmo workflow port-forward``: sessions into a running task (docs/cli.md).

Each session is a REST call that does every check and answers a single-use ticket
(``POST /api/workflows/{id}/tasks/{task}/sessions/``), then a websocket opened with that ticket and the
same credentials as the API (docs/api.md, "Sessions into running tasks"). Exec speaks Kubernetes'
``v5.channel.k8s.io`` frames; port-forward opens one websocket per accepted local connection, and keeps four
spare sessions per forwarded port opened ahead (``?connect=deferred``: the service connects to the task's port
only on the spare's ``connect`` message), so a new local connection skips both round trips.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import signal
import socket
import struct
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

import typer
import websocket

from cli.api import Api, workflow_path
from cli.errors import EXIT_INTERRUPTED, EXIT_USAGE, ApiError, CliError
from cli.main import api_client, workflow_app

STDIN, STDOUT, STDERR, STATUS, RESIZE, CLOSE_STDIN = 0, 1, 2, 3, 4, 255
SUBPROTOCOL = "v5.channel.k8s.io"
# The service's close codes (docs/api.md): what each means to the user.
CLOSE_REASONS = {4409: "the task is no longer running", 4408: "the session was idle too long",
                 4410: "the session reached its maximum length", 4500: "the backend failed"}
CLOSE_TASK_ENDED = 4409
RECONNECT_CODES = {1001, 1006, 1011, 1012, 1013}  # going away, lost, server error, restart, try again later
SHELL = ["/bin/sh", "-c", "if [ -x /bin/bash ]; then exec /bin/bash; else exec /bin/sh; fi"]
PORTS_MAX = 1000
SPARES_MAX = 16  # port-forward: spare sessions are held ready for the first this many task ports,
SPARES_PER_PORT = 4  # this many each, so a burst of connections (a page and its assets) finds them ready
KEEP_ALIVE_POLL_SECONDS = 2.0
PING_ENV = "OSMO_FORWARD_PING_SECONDS"  # a forward's websocket pings this often (the CLI's environment)
DEFAULT_PING_SECONDS = 30.0  # --keep-alive: how often a task that is not running is looked at again


class ConnectionLost(Exception):
    """The websocket ended without the session's end (a restart, a network failure)."""


# ------------------------------------------------------------------------------------------------
# Opening a session
# ------------------------------------------------------------------------------------------------
def _websocket_url(api: Api, path: str) -> str:
    base = api.url.rstrip("/")
    if base.startswith("https://"):
        return "wss://" + base[len("https://"):] + path
    if base.startswith("http://"):
        return "ws://" + base[len("http://"):] + path
    return base + path


def _refusal(exc: websocket.WebSocketBadStatusException) -> CliError:
    body: Any = None
    with contextlib.suppress(ValueError, TypeError, AttributeError):
        body = json.loads(exc.resp_body or b"")
    if isinstance(body, dict) and body.get("message"):
        return ApiError(str(body["message"]), status=exc.status_code, code=str(body.get("code") or ""))
    return ApiError(f"the server refused the session's websocket (HTTP {exc.status_code})", status=exc.status_code)


def session_open(api: Api, workflow_id: str, task: str, body: dict[str, Any], *,
                 connect_timeout: float, deferred: bool = False) -> websocket.WebSocket:
    """POST the session, open its websocket (``deferred``: a port-forward spare, connected to the task's port
    only on its ``connect`` message). Retries while the service cannot be reached (it restarts) until
    ``connect_timeout``; any refusal of the service is raised at once."""
    deadline = time.monotonic() + connect_timeout
    path = workflow_path(workflow_id, f"tasks/{_segment(task)}/sessions/")
    while True:
        try:
            _status, answer = api.post(path, json=body, not_found=f"workflow {workflow_id} not found")
            return websocket.create_connection(
                _websocket_url(api, str(answer["websocket"]) + ("?connect=deferred" if deferred else "")),
                timeout=max(1.0, deadline - time.monotonic()),
                header=[f"Authorization: {api.headers['Authorization']}"], subprotocols=[SUBPROTOCOL],
                enable_multithread=True)
        except websocket.WebSocketBadStatusException as exc:
            if exc.status_code not in (502, 503, 504) or time.monotonic() >= deadline:
                raise _refusal(exc) from None
        except ApiError as exc:
            if exc.status not in (502, 503, 504) or time.monotonic() >= deadline:
                raise
        except (CliError, OSError, websocket.WebSocketException) as exc:
            if time.monotonic() >= deadline:
                if isinstance(exc, CliError):
                    raise
                raise CliError(f"cannot open the session's websocket at {api.url}: {exc}") from None
        time.sleep(0.5)


def _segment(text: str) -> str:
    from cli.api import q

    return q(text)


def _close_code(ws: websocket.WebSocket, frame: Any) -> int:
    data = getattr(frame, "data", b"") or b""
    return struct.unpack("!H", data[:2])[0] if len(data) >= 2 else 1005


# ------------------------------------------------------------------------------------------------
# exec
# ------------------------------------------------------------------------------------------------
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


def task_status(api: Api, workflow_id: str, task: str) -> str | None:
    """The task's status as the API shows it (None when the workflow has no such task)."""
    workflow = api.get(workflow_path(workflow_id), not_found=f"workflow {workflow_id} not found")
    for group in workflow.get("groups") or []:
        for each in group.get("tasks") or []:
            if each.get("name") == task:
                return str(each.get("status") or "")
    return None


def task_ended(status: str | None) -> bool:
    return status is None or status == "COMPLETED" or status.startswith("FAILED")


def open_waiting(api: Api, workflow_id: str, task: str, body: dict[str, Any], *, connect_timeout: float,
                 keep_alive: bool) -> websocket.WebSocket:
    """:func:`session_open`; with ``keep_alive``, a task that is not RUNNING is waited for while it is on its
    way to running again (RESCHEDULED, then queued and started anew), and the wait stops once it ended."""
    said = ""
    while True:
        try:
            return session_open(api, workflow_id, task, body, connect_timeout=connect_timeout)
        except ApiError as exc:
            if not keep_alive or exc.code != "task_not_running":
                raise
            status = task_status(api, workflow_id, task)
            if task_ended(status):
                raise CliError(f"task {task} of workflow {workflow_id} is {status or 'gone'}: it ended, so "
                               "--keep-alive stops") from None
            if status != said:
                said = status or ""
                typer.echo(f"\r\n[osmo] task {task} is {status}; waiting for it to run again...", err=True)
            time.sleep(KEEP_ALIVE_POLL_SECONDS)


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


# ------------------------------------------------------------------------------------------------
# port-forward
# ------------------------------------------------------------------------------------------------
_RANGE = re.compile(r"^(\d{1,5})(?:-(\d{1,5}))?$")


def _port_range(text: str, whole: str) -> list[int]:
    match = _RANGE.match(text.strip())
    if not match:
        raise CliError(f"--port {whole!r}: {text!r} is not a port or a range of ports (like 8000 or 8000-8010)",
                       exit_code=EXIT_USAGE)
    first = int(match.group(1))
    last = int(match.group(2) or first)
    for port in (first, last):
        if not 1 <= port <= 65535:
            raise CliError(f"--port {whole!r}: port {port} is out of range (1-65535)", exit_code=EXIT_USAGE)
    if last < first:
        raise CliError(f"--port {whole!r}: the range {text!r} ends before it starts", exit_code=EXIT_USAGE)
    return list(range(first, last + 1))


def parse_ports(text: str) -> list[tuple[int, int]]:
    """``LOCAL[:REMOTE][,...]``, each side a port or a range ``A-B`` (both ends included); without
    ``:REMOTE`` the task's port is the local one. Returns ``(local, remote)`` pairs."""
    pairs: list[tuple[int, int]] = []
    if not text.strip():
        raise CliError("--port is empty: give LOCAL[:REMOTE], e.g. 8000 or 8000:80", exit_code=EXIT_USAGE)
    for item in text.split(","):
        local_text, colon, remote_text = item.partition(":")
        local = _port_range(local_text, text)
        remote = _port_range(remote_text, text) if colon else local
        if len(local) != len(remote):
            raise CliError(f"--port {text!r}: {item!r} maps {len(local)} local ports to {len(remote)} task ports",
                           exit_code=EXIT_USAGE)
        pairs += list(zip(local, remote, strict=True))
    locals_ = [local for local, _ in pairs]
    if len(set(locals_)) != len(locals_):
        raise CliError(f"--port {text!r}: a local port is named twice", exit_code=EXIT_USAGE)
    if len(pairs) > PORTS_MAX:
        raise CliError(f"--port {text!r}: at most {PORTS_MAX} ports at once", exit_code=EXIT_USAGE)
    return pairs


def forward_ping_seconds() -> float:
    """Seconds between the pings a forward's websocket sends (``OSMO_FORWARD_PING_SECONDS``, default 30)."""
    try:
        return max(0.05, float(os.environ.get(PING_ENV) or DEFAULT_PING_SECONDS))
    except ValueError:
        return DEFAULT_PING_SECONDS


CONNECT, CONNECTED = "connect", "connected"  # a spare's control messages (docs/api.md)
SPARE_RETRY_SECONDS = (0.5, 30.0)  # a spare that cannot be opened is tried again after 0.5 s, doubling to 30 s


class Spare:
    """One port-forward session per forwarded port held ready ahead of the next local connection: its
    ticket fetched and its websocket open, deferred (the service holds no connection to the task until it
    is used). Taken by a connection and replaced at once; replaced too when it ends unused (the service's
    idle timeout, the task's end, a restart: anything that arrives on an unused spare means it ended)."""

    def __init__(self, api: Api, workflow_id: str, task: str, remote: int, connect_timeout: float) -> None:
        self.api, self.workflow_id, self.task, self.remote = api, workflow_id, task, remote
        self.connect_timeout = connect_timeout
        self.lock = threading.Lock()
        self.ready: websocket.WebSocket | None = None
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self.keep, name="forward-spare", daemon=True)

    def start(self) -> Spare:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stopped.set()
        ws = self.take()
        if ws is not None:
            with contextlib.suppress(Exception):
                ws.close(timeout=1)

    def take(self) -> websocket.WebSocket | None:
        """The spare, now the caller's (None when none is ready: open a session as usual)."""
        with self.lock:
            ws, self.ready = self.ready, None
        return ws

    def keep(self) -> None:
        retry = SPARE_RETRY_SECONDS[0]
        while not self.stopped.is_set():
            with self.lock:
                ws = self.ready
            if ws is None:
                try:
                    ws = session_open(self.api, self.workflow_id, self.task,
                                      {"kind": "port-forward", "port": self.remote},
                                      connect_timeout=self.connect_timeout, deferred=True)
                except CliError:  # (each connection then opens its own session, and says why it cannot)
                    self.stopped.wait(retry)
                    retry = min(retry * 2, SPARE_RETRY_SECONDS[1])
                    continue
                retry = SPARE_RETRY_SECONDS[0]
                with self.lock:
                    if not self.stopped.is_set():
                        self.ready, ws = ws, None
                if ws is not None:
                    ws.close(timeout=1)
                continue
            try:
                arrived = bool(select.select([ws.sock], [], [], 0.5)[0])
            except (OSError, ValueError, TypeError):
                arrived = True
            if arrived:
                with self.lock:
                    if self.ready is not ws:  # taken meanwhile: its bytes are the connection's
                        continue
                    if _control_only(ws):  # the service's ping (answered): still a spare
                        continue
                    self.ready = None
                with contextlib.suppress(Exception):
                    ws.close(timeout=1)


class Spares:
    """The spares of one task port (:data:`SPARES_PER_PORT` of them, each kept by its own :class:`Spare`):
    a connection takes whichever is ready."""

    def __init__(self, spares: list[Spare]) -> None:
        self.spares = spares

    def start(self) -> Spares:
        for spare in self.spares:
            spare.start()
        return self

    def stop(self) -> None:
        for spare in self.spares:
            spare.stop()

    def take(self) -> websocket.WebSocket | None:
        """A ready spare, now the caller's (None when none is ready)."""
        for spare in self.spares:
            ws = spare.take()
            if ws is not None:
                return ws
        return None


def _control_only(ws: websocket.WebSocket) -> bool:
    """Read what arrived on an unused spare: True for a ping or pong (answered), False when it ended."""
    try:
        ws.settimeout(5)
        opcode, _frame = ws.recv_data_frame(True)
    except (OSError, websocket.WebSocketException):
        return False
    return opcode in (websocket.ABNF.OPCODE_PING, websocket.ABNF.OPCODE_PONG)


def _spare_connect(ws: websocket.WebSocket) -> bool:
    """Use a spare: ``connect``, then its answer. False when the spare had ended (the caller opens a
    session anew: nothing of the local connection was sent yet)."""
    try:
        ws.settimeout(30)
        ws.send(CONNECT)
        opcode, frame = ws.recv_data_frame(True)
        while opcode in (websocket.ABNF.OPCODE_PING, websocket.ABNF.OPCODE_PONG):
            opcode, frame = ws.recv_data_frame(True)
    except (OSError, websocket.WebSocketException):
        opcode, frame = websocket.ABNF.OPCODE_CLOSE, None
    if opcode == websocket.ABNF.OPCODE_TEXT and frame is not None and frame.data == CONNECTED.encode():
        return True
    with contextlib.suppress(Exception):
        ws.close(timeout=1)
    return False


def _bridge(api: Api, workflow_id: str, task: str, remote: int, client: socket.socket, connect_timeout: float,
            spare: Spares | None = None) -> None:
    """One local connection, carried over its own websocket until either side ends: the spare's when one
    is ready, else a session opened now."""
    ws = spare.take() if spare is not None else None
    if ws is not None and not _spare_connect(ws):
        ws = None
    try:
        if ws is None:
            ws = session_open(api, workflow_id, task, {"kind": "port-forward", "port": remote},
                              connect_timeout=connect_timeout)
    except CliError as exc:
        typer.echo(f"error: a connection to {workflow_id}/{task}:{remote} was refused: {exc.message}", err=True)
        client.close()
        return
    ws.settimeout(None)
    closed = threading.Event()

    def keepalive() -> None:  # traffic for the proxies and NATs on the way while the connection is idle
        while not closed.wait(forward_ping_seconds()):
            try:
                ws.ping()
            except (OSError, websocket.WebSocketException):
                return

    threading.Thread(target=keepalive, name="forward-ping", daemon=True).start()

    def upstream() -> None:
        try:
            while data := client.recv(65536):
                ws.send_binary(data)
        except (OSError, websocket.WebSocketException):
            pass
        with contextlib.suppress(Exception):
            ws.close(timeout=1)

    threading.Thread(target=upstream, name="forward-up", daemon=True).start()
    try:
        while True:
            opcode, frame = ws.recv_data_frame(True)
            if opcode == websocket.ABNF.OPCODE_CLOSE:
                break
            if opcode == websocket.ABNF.OPCODE_BINARY and frame.data:
                client.sendall(frame.data)
    except (OSError, websocket.WebSocketException):
        pass
    finally:
        closed.set()
        with contextlib.suppress(OSError):
            client.shutdown(socket.SHUT_RDWR)
        client.close()
        with contextlib.suppress(Exception):
            ws.close(timeout=1)


def _udp_socket(host: str, port: int) -> socket.socket:
    family, kind, proto, _name, address = socket.getaddrinfo(host, port, type=socket.SOCK_DGRAM)[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.bind(address)
    except OSError:
        sock.close()
        raise
    return sock


def _udp_forward(api: Api, workflow_id: str, task: str, remote: int, listener: socket.socket,
                 connect_timeout: float) -> None:
    """Datagrams of one local UDP port to the task's UDP port ``remote`` and back. Each local peer (address
    and port) gets its own session, so the answers go back to the peer that asked."""
    peers: dict[Any, websocket.WebSocket] = {}
    lock = threading.Lock()

    def from_task(peer: Any, ws: websocket.WebSocket) -> None:
        try:
            while True:
                opcode, frame = ws.recv_data_frame(True)
                if opcode == websocket.ABNF.OPCODE_CLOSE:
                    break
                if opcode == websocket.ABNF.OPCODE_BINARY:
                    listener.sendto(frame.data or b"", peer)
        except (OSError, websocket.WebSocketException):
            pass
        finally:
            with lock:
                if peers.get(peer) is ws:
                    del peers[peer]
            with contextlib.suppress(Exception):
                ws.close(timeout=1)

    while True:
        try:
            data, peer = listener.recvfrom(65535)
        except OSError:
            return
        with lock:
            ws = peers.get(peer)
        if ws is None:
            try:
                ws = session_open(api, workflow_id, task, {"kind": "port-forward-udp", "port": remote},
                                  connect_timeout=connect_timeout)
            except CliError as exc:
                typer.echo(f"error: datagrams to {workflow_id}/{task}:{remote}/udp were refused: {exc.message}",
                           err=True)
                continue
            ws.settimeout(None)
            with lock:
                peers[peer] = ws
            threading.Thread(target=from_task, args=(peer, ws), name="forward-udp", daemon=True).start()
        try:
            ws.send_binary(data)
        except (OSError, websocket.WebSocketException):
            with lock:
                peers.pop(peer, None)


@workflow_app.command("port-forward")
def workflow_port_forward(
    workflow_id: str = typer.Argument(..., metavar="ID", help="The workflow (ID, or OWNER/ID)."),
    task: str = typer.Argument(..., help="The task whose port to forward."),
    port: str = typer.Option(..., "--port", help="LOCAL[:REMOTE], or ranges: 8000, 8000:80, "
                                                 "8000-8010:9000-9010,8015 (ranges include both ends)."),
    host: str = typer.Option("localhost", "--host", help="The local address to listen on."),
    udp: bool = typer.Option(False, "--udp", help="Forward UDP instead of TCP: datagrams to ports the task is "
                                                  "bound to (the local backend; Kubernetes' API forwards TCP only)."),
    connect_timeout: int = typer.Option(60, "--connect-timeout", min=1, help="Seconds to keep trying to connect."),
) -> None:
    """Forward local TCP ports to ports a running task listens on, through the service. Many connections at once;
    Ctrl-C stops it. A connection made while the service restarts waits for it (up to --connect-timeout)."""
    pairs = parse_ports(port)
    kind, suffix = ("port-forward-udp", "/udp") if udp else ("port-forward", "")
    listeners: list[tuple[socket.socket, int, int]] = []
    with api_client() as api:
        # every task port checked first (owner, status, the task listens on it): a clear refusal now
        # (the tickets of these checks are left unused: they expire, and no session is recorded)
        for remote in sorted({remote for _, remote in pairs}):
            api.post(workflow_path(workflow_id, f"tasks/{_segment(task)}/sessions/"),
                     json={"kind": kind, "port": remote}, not_found=f"workflow {workflow_id} not found")
        try:
            for local, remote in pairs:
                listener = _udp_socket(host, local) if udp else socket.create_server((host, local), reuse_port=False)
                listeners.append((listener, local, remote))
        except OSError as exc:
            for listener, _, _ in listeners:
                listener.close()
            raise CliError(f"cannot listen on {host}:{local}{suffix}: {exc.strerror or exc}") from None
        for _listener, local, remote in listeners:
            typer.echo(f"Forwarding {host}:{local}{suffix} -> {workflow_id}/{task}:{remote}{suffix}")
        typer.echo("Ctrl-C stops it.")

        spares: dict[int, Spares] = {}

        def accept(listener: socket.socket, remote: int) -> None:
            while True:
                try:
                    client, _ = listener.accept()
                except OSError:
                    return
                threading.Thread(target=_bridge, args=(api, workflow_id, task, remote, client, connect_timeout,
                                                       spares.get(remote)), daemon=True).start()

        for listener, _local, remote in listeners:
            if udp:
                threading.Thread(target=_udp_forward, args=(api, workflow_id, task, remote, listener, connect_timeout),
                                 daemon=True).start()
            else:
                if remote not in spares:  # spares per task port (ranges of many ports: the first 16 get them)
                    if len(spares) < SPARES_MAX:
                        spares[remote] = Spares([Spare(api, workflow_id, task, remote, connect_timeout)
                                                 for _ in range(SPARES_PER_PORT)]).start()
                threading.Thread(target=accept, args=(listener, remote), daemon=True).start()
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            typer.echo("\nStopped forwarding.", err=True)
        finally:
            for listener, _, _ in listeners:
                listener.close()
            for each in spares.values():
                each.stop()
