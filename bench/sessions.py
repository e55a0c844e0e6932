"""Benchmark of sessions into a running task (docs/benchmarks.md, "Sessions"). Not a test.

A task runs for real on a local pool (its own sandbox and network); the service is uvicorn on ``osmo.asgi``
(production settings, PostgreSQL and Redis from the environment); the forward is the installed CLI's
``osmo workflow port-forward``. Each figure is against a baseline measured in the same run:

1. **throughput**: one stream of ``--mib`` MiB from the task's port read through the forward, against the
   same stream through a minimal asyncio TCP relay in one process (it connects into the task's network
   as the service does, then copies bytes both ways). Ratio = forward / relay (goal ≥ 0.5).
2. **concurrent**: ``--concurrent`` HTTP requests at once through one forward to the task's HTTP server;
   errors counted (goal 0).
3. **first byte**: a new connection, one byte sent, its echo back, ``--samples`` times, ``--gap`` seconds
   apart (a new connection to a forward that is up, its spare session ready), relay and forward in turns:
   p50 through the forward against the relay's (goal ≤ 2×). Also ``--samples`` / 4 back to back (each
   connection right after the previous one, before the spare it took is replaced), for the record.
4. **exec echo**: a byte sent to a shell on a terminal in the task (an exec session's websocket, as the
   CLI opens it) and its echo back, ``--samples`` times: p50 (goal ≤ 5 ms).

    source scripts/services.sh; services_start   # throwaway PostgreSQL and Redis
    .venv/bin/python -m bench.sessions --json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.inprocess import django_production_setup

ROOT = Path(__file__).resolve().parents[1]
SOURCE_PORT, HTTP_PORT, ECHO_PORT = 9301, 9302, 9303
# The task: a source of --mib MiB per connection, an HTTP server, an echo server (stdlib only).
TASK_SCRIPT = """
import socket, sys, threading, http.server, os
mib = int(sys.argv[1])
def serve(port, handle):
    server = socket.create_server(("127.0.0.1", port), backlog=256)
    def loop():
        while True:
            conn, _ = server.accept()
            threading.Thread(target=handle, args=(conn,), daemon=True).start()
    threading.Thread(target=loop, daemon=True).start()
def source(conn):
    block = b"x" * (1 << 20)
    with conn:
        for _ in range(mib):
            conn.sendall(block)
def echo(conn):
    with conn:
        while data := conn.recv(65536):
            conn.sendall(data)
serve(SOURCE_PORT, source)
serve(ECHO_PORT, echo)
os.chdir("/tmp")
open("index.html", "w").write("x" * 2048)
http.server.ThreadingHTTPServer.request_queue_size = 256
http.server.ThreadingHTTPServer(("127.0.0.1", HTTP_PORT), http.server.SimpleHTTPRequestHandler).serve_forever()
""".replace("SOURCE_PORT", str(SOURCE_PORT)).replace("ECHO_PORT", str(ECHO_PORT)).replace("HTTP_PORT", str(HTTP_PORT))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_port(port: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


# ------------------------------------------------------------------------------------------------
# The baseline: a minimal asyncio relay, one process
# ------------------------------------------------------------------------------------------------
def _relay_main(port: int, namespace: str, pod_name: str, ready: Any) -> None:
    from scheduler.dispatch import backend_for

    backend: Any = backend_for("local")

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except OSError:
            pass
        finally:
            writer.close()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        listening = int(writer.get_extra_info("sockname")[1])  # the relay's port this connection came to
        target = {relay_ports[0]: SOURCE_PORT, relay_ports[1]: ECHO_PORT}[listening]
        sock = await asyncio.to_thread(backend.port_connect, namespace=namespace, pod_name=pod_name, port=target)
        sock.setblocking(False)
        up_reader, up_writer = await asyncio.open_connection(sock=sock)
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    relay_ports = [port, port + 1]

    async def main() -> None:
        servers = [await asyncio.start_server(handle, "127.0.0.1", each) for each in relay_ports]
        ready.set()
        await asyncio.gather(*(server.serve_forever() for server in servers))

    asyncio.run(main())


# ------------------------------------------------------------------------------------------------
# Measurements
# ------------------------------------------------------------------------------------------------
def throughput(port: int, mib: int) -> float:
    """MiB/s of one stream of ``mib`` MiB read from local ``port``."""
    buffer = bytearray(1 << 20)
    total = 0
    started = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port)) as sock:
        while count := sock.recv_into(buffer):
            total += count
    seconds = time.perf_counter() - started
    if total != mib << 20:
        raise RuntimeError(f"received {total} bytes of {mib << 20}")
    return mib / seconds


def first_byte(port: int, samples: int, gap: float = 0.0) -> list[float]:
    """Seconds from a new connection to the echo of its first byte, ``samples`` times, ``gap`` s apart."""
    times = []
    for _ in range(samples):
        time.sleep(gap)
        started = time.perf_counter()
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.sendall(b"x")
            if sock.recv(1) != b"x":
                raise RuntimeError("no echo")
            times.append(time.perf_counter() - started)
    return times


def concurrent_http(port: int, count: int) -> tuple[int, float]:
    """(errors, seconds) of ``count`` GETs at once through local ``port``."""
    def get(_: int) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/index.html", timeout=60) as answer:
                return len(answer.read()) == 2048
        except OSError:
            return False

    started = time.perf_counter()
    with ThreadPoolExecutor(count) as pool:
        results = list(pool.map(get, range(count)))
    return results.count(False), time.perf_counter() - started


def exec_echo(api: Any, workflow_id: str, samples: int) -> list[float]:
    """Seconds from a byte sent to a terminal's shell in the task to its echo, ``samples`` times."""
    import websocket

    from cli.sessions.exec_stream import STDIN, STDOUT
    from cli.sessions.opening import session_open

    ws = session_open(api, workflow_id, "main", {"kind": "exec", "command": ["/bin/sh"], "tty": True},
                      connect_timeout=30)
    ws.settimeout(10)

    def read_until(marker: bytes) -> None:
        seen = b""
        while marker not in seen:
            opcode, frame = ws.recv_data_frame(True)
            if opcode == websocket.ABNF.OPCODE_BINARY and frame.data and frame.data[0] == STDOUT:
                seen += frame.data[1:]

    read_until(b"$ ")  # the shell's prompt: its terminal echoes what is typed
    times = []
    for index in range(samples):
        char = bytes([ord("a") + index % 26])
        started = time.perf_counter()
        ws.send_binary(bytes([STDIN]) + char)
        read_until(char)
        times.append(time.perf_counter() - started)
    ws.close()
    return times


def session_parts(api: Any, workflow_id: str, samples: int) -> dict[str, float]:
    """p50 ms of a forward's two steps before its first byte: the REST call (every check, the ticket), then
    the websocket (handshake, the ticket's claim, the connection into the task)."""
    import websocket

    from cli.sessions.opening import SUBPROTOCOL, websocket_url

    posts, sockets = [], []
    path = f"/api/workflows/{workflow_id}/tasks/main/sessions/"
    for _ in range(samples):
        started = time.perf_counter()
        answer = api.post(path, json={"kind": "port-forward", "port": ECHO_PORT})[1]
        posted = time.perf_counter()
        ws = websocket.create_connection(websocket_url(api, str(answer["websocket"])), subprotocols=[SUBPROTOCOL],
                                         header=[f"Authorization: {api.headers['Authorization']}"])
        sockets.append(time.perf_counter() - posted)
        posts.append(posted - started)
        ws.close()
    return {"post": round(statistics.median(posts) * 1000, 2), "websocket": round(statistics.median(sockets) * 1000, 2)}


# ------------------------------------------------------------------------------------------------
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mib", type=int, default=1024, help="MiB of the throughput stream (default 1024)")
    parser.add_argument("--concurrent", type=int, default=64, help="HTTP requests at once (default 64)")
    parser.add_argument("--samples", type=int, default=200, help="first-byte and exec-echo samples (default 200)")
    parser.add_argument("--gap", type=float, default=0.3, help="seconds between first-byte connections (default 0.3)")
    parser.add_argument("--json", action="store_true", help="print the result as one JSON line")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="osmo-bench-sessions-"))
    django_production_setup("sessions", OSMO_LOCAL_DIR=str(work / "pods"), OSMO_THROTTLE_USER="1000000/min",
                            OSMO_CREDENTIALS_KEYS=os.environ.get("OSMO_CREDENTIALS_KEYS") or
                            "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=")
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.utils import timezone

    from cli.api import Api
    from credentials.tokens import api_key_create
    from scheduler.dispatch import backend_for
    from scheduler.models import Node, Pool
    from workflows.models import Task
    from workflows.scheduling.pod.request import pod_request
    from workflows.services import workflow_submit

    log = sys.stderr
    print("==> migrating; a local pool and one running task", file=log)
    call_command("migrate", "--no-input", verbosity=0)
    user, _ = User.objects.get_or_create(username="bench-sessions")
    token = api_key_create(user=user, replace=True)
    name = f"sess{int(time.time())}"
    pool = Pool.objects.create(name=name, backend="local")
    node = Node.objects.create(pool=pool, name="slot-1", labels={}, gpu=0, cpu_millis=4000, memory_bytes=8 << 30,
                               storage_bytes=1 << 40)
    spec = (f"workflow:\n  name: {name}\n  groups:\n  - name: g\n    tasks:\n    - {{name: main, lead: true, image: "
            "ubuntu, command: [sleep, '1']}\nresources:\n  default: {cpu: 1, gpu: 0}\n")
    workflow, _ = workflow_submit(user=user, pool_name=pool.name, spec=spec)
    Task.objects.filter(workflow=workflow).update(status="RUNNING", pod_name=f"{workflow.global_id}-main"[:60],
                                                  dispatched_at=timezone.now(), node=node, node_name=node.name)
    task = Task.objects.select_related("node", "group", "workflow").get(workflow=workflow)
    pod = replace(pod_request(task, pool), runtime_plan=json.dumps(
        {"command": ["python3", "-c", TASK_SCRIPT, str(args.mib)]}))
    backend: Any = backend_for("local")
    backend.create_pod(pod)
    env = dict(os.environ)
    processes: list[subprocess.Popen[bytes]] = []
    relay: Any = None
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if {SOURCE_PORT, HTTP_PORT, ECHO_PORT} <= set(backend.task_ports(namespace=pod.namespace,
                                                                                  pod_name=pod.pod_name)):
                    break
            except Exception:  # noqa: BLE001 - not running yet
                pass
            if time.monotonic() > deadline:
                raise SystemExit("the task did not listen on its ports")
            time.sleep(0.1)

        service_port = _free_port()
        server_log = open(work / "uvicorn.log", "wb")  # noqa: SIM115 - lives as long as the process
        processes.append(subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "osmo.asgi:application", "--host", "127.0.0.1", "--port",
             str(service_port), "--log-level", "warning", "--no-access-log"], env=env, cwd=ROOT,
            stdout=server_log, stderr=subprocess.STDOUT, start_new_session=True))
        _wait_port(service_port)
        url = f"http://127.0.0.1:{service_port}"
        local = [_free_port() for _ in range(3)]
        cli_env = {**env, "OSMO_URL": url, "OSMO_TOKEN": token, "OSMO_CONFIG": "/nonexistent/osmo.json"}
        forward_log = open(work / "forward.log", "wb")  # noqa: SIM115 - lives as long as the process
        processes.append(subprocess.Popen(
            [sys.executable, "-m", "cli", "workflow", "port-forward", workflow.workflow_id, "main", "--host",
             "127.0.0.1", "--port", f"{local[0]}:{SOURCE_PORT},{local[1]}:{HTTP_PORT},{local[2]}:{ECHO_PORT}"],
            env=cli_env, cwd=ROOT, stdout=forward_log, stderr=subprocess.STDOUT, start_new_session=True))
        for port in local:
            _wait_port(port)
        relay_port = _free_port()
        while True:  # two free ports in a row
            try:
                socket.create_server(("127.0.0.1", relay_port + 1)).close()
                break
            except OSError:
                relay_port = _free_port()
        ready = multiprocessing.get_context("fork").Event()
        relay = multiprocessing.get_context("fork").Process(
            target=_relay_main, args=(relay_port, pod.namespace, pod.pod_name, ready), daemon=True)
        relay.start()
        ready.wait(30)

        print(f"==> throughput of one {args.mib} MiB stream", file=log)
        relay_mib_s = throughput(relay_port, args.mib)
        forward_mib_s = throughput(local[0], args.mib)
        print(f"==> {args.concurrent} concurrent HTTP requests", file=log)
        errors, concurrent_seconds = concurrent_http(local[1], args.concurrent)
        print(f"==> first byte, {args.samples} connections each", file=log)
        relay_first, forward_first = [], []
        for _ in range(args.samples):  # taken in turns: both see the same load
            relay_first += first_byte(relay_port + 1, 1, args.gap)
            forward_first += first_byte(local[2], 1, args.gap)
        relay_burst = first_byte(relay_port + 1, max(1, args.samples // 4))
        forward_burst = first_byte(local[2], max(1, args.samples // 4))
        print(f"==> exec echo, {args.samples} keystrokes", file=log)
        echo = exec_echo(Api(url, token), workflow.workflow_id, args.samples)
        parts = session_parts(Api(url, token), workflow.workflow_id, min(args.samples, 50))

        def ms(values: list[float]) -> float:
            return round(statistics.median(values) * 1000, 2)

        result = {
            "benchmark": "sessions",
            "throughput_mib_s": {"forward": round(forward_mib_s, 1), "relay": round(relay_mib_s, 1),
                                 "ratio": round(forward_mib_s / relay_mib_s, 3)},
            "concurrent": {"requests": args.concurrent, "errors": errors, "seconds": round(concurrent_seconds, 3)},
            "first_byte_p50_ms": {"forward": ms(forward_first), "relay": ms(relay_first),
                                  "ratio": round(statistics.median(forward_first) / statistics.median(relay_first),
                                                 2)},
            "first_byte_gap_s": args.gap,
            "first_byte_back_to_back_p50_ms": {"forward": ms(forward_burst), "relay": ms(relay_burst),
                                               "ratio": round(statistics.median(forward_burst)
                                                              / statistics.median(relay_burst), 2)},
            "first_byte_parts_p50_ms": parts,
            "exec_echo_ms": {"p50": ms(echo), "p95": round(sorted(echo)[int(len(echo) * 0.95)] * 1000, 2)},
        }
        if args.json:
            print(json.dumps(result))
        else:
            print(json.dumps(result, indent=2))
    finally:
        if relay is not None:
            relay.terminate()
        for process in reversed(processes):
            process.terminate()
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
        backend.delete_pod(namespace=pod.namespace, pod_name=pod.pod_name, grace_seconds=0)
        threading.Thread(target=backend.networks_sweep, daemon=True).start()


if __name__ == "__main__":
    main()
