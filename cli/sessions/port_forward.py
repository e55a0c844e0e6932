"""``osmo workflow port-forward``: local TCP (or UDP) ports forwarded to ports a running task listens on,
through the service. Each accepted local connection is carried over a websocket of its own (a spare's when
one is ready, :mod:`cli.sessions.spares`), pinged while idle; each local UDP peer gets a session of its own.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import threading
import time
from typing import Any

import typer
import websocket

from cli.api import Api, q, workflow_path
from cli.errors import EXIT_USAGE, CliError
from cli.main import api_client, workflow_app
from cli.sessions.opening import session_open
from cli.sessions.spares import SPARES_MAX, SPARES_PER_PORT, Spare, Spares, spare_connect

PORTS_MAX = 1000
PING_ENV = "OSMO_FORWARD_PING_SECONDS"  # a forward's websocket pings this often (the CLI's environment)
DEFAULT_PING_SECONDS = 30.0

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


def _bridge(api: Api, workflow_id: str, task: str, remote: int, client: socket.socket, connect_timeout: float,
            spare: Spares | None = None) -> None:
    """One local connection, carried over its own websocket until either side ends: the spare's when one
    is ready, else a session opened now."""
    ws = spare.take() if spare is not None else None
    if ws is not None and not spare_connect(ws):
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
            api.post(workflow_path(workflow_id, f"tasks/{q(task)}/sessions/"),
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
