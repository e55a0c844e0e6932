"""Sessions into a task's pod through the Kubernetes API server (``osmo workflow exec`` and
``port-forward``; docs/kubernetes.md §11): the ``pods/exec`` and ``pods/portforward`` subresources,
spoken by the official client's ``kubernetes.stream`` (``stream(...)`` gives a ``WSClient``,
``portforward(...)`` a ``PortForward``).

Exec is a websocket offering ``v5.channel.k8s.io`` then ``v4.channel.k8s.io``; the API server picks
(v5 from Kubernetes 1.30). Each binary message starts with its channel: 0 stdin, 1 stdout, 2 stderr,
3 the command's end (a ``metav1.Status``: ``Success``, or ``Failure`` whose ``details.causes`` carry
``ExitCode``), 4 a terminal's size (``{"Width": w, "Height": h}``), and in v5 only 255 to close a
channel (its payload: the channel). v4 cannot end a command's input: without a terminal,
``close_stdin`` then does nothing (a terminal gets its EOF character, as on every backend).

Port-forward is a websocket (``v4.channel.k8s.io`` framing) with two channels per port, data then
error; the server's first message on each carries the port (2 bytes, little endian). The client's
``PortForward`` bridges it to one end of a socket pair from a thread of its own.

The ports a task listens on are read by an exec of ``cat /proc/net/tcp /proc/net/tcp6`` in its
container (:mod:`scheduler.dispatch.proc_net`, the local backend's parser): the pod's network is its
containers', so that is every socket a port-forward can reach.

Closing an exec without a terminal ends the websocket, not the command: the kubelet leaves a command
that ignores its closed output running until it ends (with a terminal, it gets SIGHUP).

Failures: the API server's refusal of the upgrade (the client reports it as ``ApiException(status=0)``
raised while handling websocket-client's ``WebSocketBadStatusException``, which carries the HTTP status
and the Status body) and connection errors are mapped as the other calls' are (docs/kubernetes.md §7):
403 names the verb and the subresource the service's account lacks, 404 says the pod is gone.
Imports nothing from Django.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import socket
import threading
from collections.abc import Callable, Sequence
from typing import Any

import websocket
from kubernetes import client as k8s_client
from kubernetes.client.exceptions import ApiException
from kubernetes.stream import portforward, stream
from urllib3.exceptions import HTTPError as Urllib3HTTPError

from scheduler.dispatch.base import DispatchPermanentError, DispatchTransientError
from scheduler.dispatch.pod.manifest import CONTAINER_NAME
from scheduler.dispatch.proc_net import listening_ports_parse

logger = logging.getLogger(__name__)

STDIN, STDOUT, STDERR, STATUS, RESIZE = 0, 1, 2, 3, 4
V5_PROTOCOL = "v5.channel.k8s.io"
#: The exit code of a command whose stream ended without its Status (the connection was lost), as ssh's.
LOST_EXIT_CODE = 255
#: How long the exec's reader waits for a frame before looking whether it was closed.
POLL_SECONDS = 0.2
#: ``cat`` of both tables: a pod without IPv6 has no tcp6 (cat then exits 1, having printed tcp).
PORTS_ARGV = ("cat", "/proc/net/tcp", "/proc/net/tcp6")


# ------------------------------------------------------------------------------------------------
# Errors
# ------------------------------------------------------------------------------------------------
def _status_message(body: bytes | str | None) -> tuple[str, str]:
    """``(reason, message)`` of a ``metav1.Status`` body ("" when it is none)."""
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    try:
        status = json.loads(body) if body else {}
    except ValueError:
        return "", str(body)[:500]
    if not isinstance(status, dict):
        return "", str(body)[:500]
    return str(status.get("reason") or ""), str(status.get("message") or "")


def stream_error(exc: BaseException, *, action: str, resource: str, namespace: str) -> Exception:
    """The dispatch error for a failed exec or port-forward ``action`` on ``resource`` (``pods/exec``,
    ``pods/portforward``)."""
    # kubernetes.stream reports every failure to open the websocket as ApiException(status=0,
    # reason=str(error)) raised in the handler of the websocket-client error: that error is the context.
    cause: BaseException = exc
    if isinstance(exc, ApiException) and not exc.status and exc.__context__ is not None:
        cause = exc.__context__
    if isinstance(cause, websocket.WebSocketBadStatusException):
        status = cause.status_code
        reason, message = _status_message(cause.resp_body)
        text = f"Kubernetes API {action}: HTTP {status} {reason or cause.status_message or ''}".rstrip()
        text = f"{text}: {message}" if message else text
        if status == 403:
            return DispatchPermanentError(f"{text} (the service's Kubernetes account needs the create verb on "
                                          f"{resource} in namespace {namespace}: docs/kubernetes.md §3)")
        if status == 404:
            return DispatchPermanentError(f"{text} (the pod is gone)")
        if not status or status in (408, 429) or status >= 500:
            return DispatchTransientError(text)
        return DispatchPermanentError(text)
    if isinstance(cause, ApiException):  # refused before any connection (an invalid argument)
        return DispatchPermanentError(f"Kubernetes API {action}: {cause.reason or cause}")
    return DispatchTransientError(f"Kubernetes API {action}: {cause.__class__.__name__}: {cause}")


_STREAM_ERRORS = (ApiException, websocket.WebSocketException, Urllib3HTTPError, OSError)


def _exit_code(status: bytes) -> tuple[int, str]:
    """The command's exit code from its Status (channel 3), and what to tell the user when it did not
    run to an exit code of its own (the kubelet could not start it, the connection was lost)."""
    if not status:
        return LOST_EXIT_CODE, "the Kubernetes API server's stream ended before the command's exit status\n"
    try:
        parsed = json.loads(status)
    except ValueError:
        return 1, status.decode("utf-8", "replace") + "\n"
    if not isinstance(parsed, dict) or parsed.get("status") == "Success":
        return 0, ""
    for cause in (parsed.get("details") or {}).get("causes") or ():
        if isinstance(cause, dict) and cause.get("reason") == "ExitCode":
            try:
                return int(cause.get("message", "")), ""
            except ValueError:
                break
    return 1, f"{parsed.get('message') or 'the command failed'}\n"


# ------------------------------------------------------------------------------------------------
# Exec
# ------------------------------------------------------------------------------------------------
class KubeExec:
    """A command started by the API server's ``pods/exec`` (implements
    :class:`scheduler.dispatch.base.TaskExec`). One thread of its own reads the websocket (so
    :meth:`wait` answers whoever reads); writes are serialised by a lock."""

    def __init__(self, client: Any, *, tty: bool, name: str) -> None:
        self.client = client  # kubernetes.stream.ws_client.WSClient (binary)
        # websocket-client locks its sends only when made with enable_multithread, which the client does
        # not ask for: this object's writes and the reader's answers to pings would interleave in a frame.
        client.sock.lock = threading.Lock()
        self.tty = tty
        self.protocol: str = client.subprotocol or ""
        self._outputs: queue.Queue[tuple[int, bytes]] = queue.Queue()
        self._send = threading.Lock()
        self._stop = threading.Event()
        self._ended = threading.Event()
        self._closed = False
        self._code: int | None = None
        self._reader = threading.Thread(target=self._read_all, name=f"k8s-exec-{name}", daemon=True)
        self._reader.start()

    # -- the reader thread -------------------------------------------------------------------------
    def _drain(self, status: bytearray) -> bool:
        """Move every buffered frame's data to the outputs; whether there was any."""
        moved = False
        for channel in (STDOUT, STDERR, STATUS):
            data = self.client.read_channel(channel)
            if not data:
                continue
            moved = True
            if channel == STATUS:
                status.extend(data)
            else:
                self._outputs.put((channel, bytes(data)))
        return moved

    def _read_all(self) -> None:
        status = bytearray()
        try:
            while not self._stop.is_set() and self.client.is_open():
                self.client.update(timeout=POLL_SECONDS)
                while self._drain(status):
                    pass
            self._drain(status)
        except (websocket.WebSocketException, OSError, ValueError) as exc:
            logger.info("k8s.exec.stream_lost", extra={"error": str(exc)})
        finally:
            code, message = _exit_code(bytes(status))
            if message and not self._stop.is_set():
                self._outputs.put((STDERR, message.encode()))
            self._code = code
            self._outputs.put((0, b""))
            self._ended.set()
            self._shut()

    def _shut(self) -> None:
        with self._send:
            if not self._closed:
                self._closed = True
                try:
                    self.client.close(timeout=1)
                except (websocket.WebSocketException, OSError):
                    pass

    # -- TaskExec ----------------------------------------------------------------------------------
    def read(self) -> tuple[int, bytes]:
        return self._outputs.get()

    def _frame(self, channel: int, data: bytes) -> None:
        with self._send:
            if self._closed:
                raise BrokenPipeError("the command's stream is closed")
            try:
                self.client.write_channel(channel, data)
            except websocket.WebSocketException as exc:  # the session code expects OSError of a closed input
                raise BrokenPipeError(str(exc)) from exc

    def write(self, data: bytes) -> None:
        if data:
            self._frame(STDIN, bytes(data))

    def close_stdin(self) -> None:
        if self.tty:
            self._frame(STDIN, b"\x04")  # the terminal's EOF character, as the local backend sends
        elif self.protocol == V5_PROTOCOL:
            with self._send:
                if not self._closed:
                    self.client.close_channel(STDIN)
        else:  # v4 has no way to say it; the command reads on (docs/kubernetes.md §11)
            logger.info("k8s.exec.stdin_close_unsupported", extra={"protocol": self.protocol})

    def resize(self, width: int, height: int) -> None:
        if self.tty:
            self._frame(RESIZE, json.dumps({"Width": int(width), "Height": int(height)}).encode())

    def wait(self, timeout: float | None = None) -> int | None:
        return self._code if self._ended.wait(timeout) else None

    def close(self) -> None:
        self._stop.set()
        if threading.current_thread() is not self._reader:
            self._reader.join(POLL_SECONDS * 5)
        if self._reader.is_alive():  # stuck inside a frame: cut the connection under it
            self.client.sock.shutdown()
        self._shut()


# ------------------------------------------------------------------------------------------------
# The backend's session calls
# ------------------------------------------------------------------------------------------------
class KubeSessions:
    """The session calls of one cluster's client (``KubernetesBackend`` delegates to it)."""

    def __init__(self, core: k8s_client.CoreV1Api, *, timeout: float) -> None:
        self.core = core
        self.timeout = timeout

    def _open(self, call: Callable[[], Any], close: Callable[[Any], None], *, action: str, resource: str,
              namespace: str) -> Any:
        """``call()`` (opening a websocket), given up after ``timeout`` seconds: the client opens its
        websockets with no timeout (``create_websocket`` passes none to websocket-client, whose global
        default only its ``create_connection`` reads), so an API server that accepts and never answers
        would hold the caller forever. The call goes on in its thread; what it opens late is closed."""
        lock = threading.Lock()
        answered = threading.Event()
        outcome: dict[str, Any] = {}

        def run() -> None:
            value: Any = None
            error: Exception | None = None
            try:
                value = call()
            except Exception as exc:  # noqa: BLE001 - handed to the caller below
                error = exc
            with lock:
                late = outcome.get("abandoned", False)
                if not late:
                    outcome.update(value=value, error=error)
                    answered.set()
            if late and value is not None:
                close(value)

        threading.Thread(target=run, name=f"k8s-open-{resource}", daemon=True).start()
        answered.wait(self.timeout)
        with lock:
            if not answered.is_set():
                outcome["abandoned"] = True
                raise DispatchTransientError(f"Kubernetes API {action}: no answer within {self.timeout:g} s")
        error = outcome["error"]
        if isinstance(error, _STREAM_ERRORS):
            raise stream_error(error, action=action, resource=resource, namespace=namespace) from error
        if error is not None:
            raise error
        return outcome["value"]

    def exec_start(self, *, namespace: str, name: str, argv: Sequence[str], tty: bool, stdin: bool = True
                   ) -> KubeExec:
        client = self._open(lambda: stream(
            self.core.connect_get_namespaced_pod_exec, name, namespace, command=list(argv),
            container=CONTAINER_NAME, stdin=stdin, stdout=True, stderr=not tty, tty=tty,
            _preload_content=False, binary=True), lambda late: late.close(),
            action=f"exec in pod {namespace}/{name}", resource="pods/exec", namespace=namespace)
        return KubeExec(client, tty=tty, name=name)

    def task_ports(self, *, namespace: str, name: str) -> dict[int, str]:
        process = self.exec_start(namespace=namespace, name=name, argv=PORTS_ARGV, tty=False, stdin=False)
        out, err = bytearray(), bytearray()
        try:
            while True:
                channel, data = process.read()
                if not data:
                    break
                (out if channel == STDOUT else err).extend(data)
            code = process.wait(self.timeout)
        finally:
            process.close()
        ports = listening_ports_parse(out.decode("ascii", "replace"))
        if code != 0 and not out:
            said = err.decode("utf-8", "replace").strip()[:500] or f"exit code {code}"
            raise DispatchPermanentError(f"could not read the ports pod {namespace}/{name} listens on "
                                         f"({' '.join(PORTS_ARGV)} in its {CONTAINER_NAME} container): {said}")
        return ports

    def port_connect(self, *, namespace: str, name: str, port: int) -> socket.socket:
        ports = self.task_ports(namespace=namespace, name=name)
        if port not in ports:
            listed = ", ".join(str(p) for p in sorted(ports)) or "none"
            raise DispatchPermanentError(f"the task does not listen on port {port} (it listens on: {listed})")
        forward = self._open(lambda: portforward(
            self.core.connect_get_namespaced_pod_portforward, name, namespace, ports=str(port)),
            lambda late: late.close(), action=f"port-forward to pod {namespace}/{name}", resource="pods/portforward",
            namespace=namespace)
        # The client hands out a wrapper of its socket pair's end; the session code needs a socket
        # (asyncio's open_connection). A duplicate of it is one; the wrapper's own descriptor is closed,
        # so the forward ends when the duplicate does.
        end = forward.socket(port)
        sock = socket.socket(fileno=os.dup(end.fileno()))
        end.close()
        return sock
