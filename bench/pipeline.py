"""Pipeline benchmark: submissions per second through the REST API, and the latency from submission to
dispatched pods, on the production setup (gunicorn, PostgreSQL, Redis, two Celery worker processes and
beat), everything on this machine.

Run it with `make bench-pipeline` (starts throwaway PostgreSQL and Redis), or with DATABASE_URL and
REDIS_URL pointing at servers you own:

    python -m bench.pipeline --json

One run, on one server, in four phases after a warm-up (``--warmup-workflows`` run through the service,
then ``ANALYZE``: the table statistics a service in operation has, see ``main``):

1. **trivial**: ``--requests`` x ``GET /api/me/`` (token check, one row) by ``--clients`` clients as fast
   as they go: what the web tier serves when a request does almost nothing.
2. **saturated**: ``--workflows`` submissions by the same clients as fast as they go. ``submit_vs_trivial``
   is the ratio of the two rates: what a submission (validation, tree building, five inserts, the
   placement request) costs relative to the trivial request.
3. the saturated workflows' submit -> dispatched latency (queueing included), then a wait until they
   all completed (when ``--task-seconds`` is at most 60), so the next phase starts on an idle pool.
4. **paced**: ``--paced-workflows`` submissions at ``--rate`` per second in total; their submit ->
   dispatched latency is the service's latency at that load.

Latency is per workflow, from ``submitted_at`` to the last of its pods' ``dispatched_at``, read from the
database. Simulated pods run ``--task-seconds`` so capacity comes back during the run.

CPU per request (``cpu_ms``): what each part spent per request of a phase, from the kernel's counters
(``/proc/<pid>/stat``: user + system time, reaped children included): ``web`` (gunicorn, all its
processes), ``workers`` (the Celery workers), ``beat``, ``postgres`` (the server and its backends) and
``client`` (this process: the HTTP client threads). On a shared machine these move far less than the
rates do: they say what a request costs, the rates what the machine had to spare. The saturated
phase's worker time runs until its workflows were dispatched (phase 3), the paced phase's until its
workflows were dispatched.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import resource
import secrets
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SPEC = """workflow:
  name: {name}
  groups:
  - name: g
    tasks:
{tasks}
resources:
  default:
    gpu: 4
    cpu: 16
    memory: 64Gi
    topology:
    - key: gpu-clique
"""


def spec_text(name: str, tasks: int, seconds: float) -> str:
    rows = [
        f"    - {{name: t{t}, {'lead: true, ' if t == 0 else ''}image: busybox, command: [sleep, '1'], "
        f"environment: {{OSMO_SIM_SECONDS: '{seconds:g}'}}}}"
        for t in range(tasks)
    ]
    return SPEC.format(name=name, tasks="\n".join(rows))


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def manage(env: dict[str, str], *args: str) -> str:
    result = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"manage.py {' '.join(args)} failed:\n{result.stderr}")
    return result.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=2000, help="trivial GETs in phase 1 (default 2000)")
    parser.add_argument("--workflows", type=int, default=500, help="workflows submitted unpaced (default 500)")
    parser.add_argument("--paced-workflows", type=int, default=300, help="workflows submitted paced (default 300)")
    parser.add_argument("--rate", type=float, default=20.0, help="paced submissions per second (default 20)")
    parser.add_argument("--tasks", type=int, default=4, help="tasks per workflow, one gpu-clique (default 4)")
    parser.add_argument("--task-seconds", type=float, default=3.0, help="simulated run time of a task (default 3)")
    parser.add_argument("--warmup-workflows", type=int, default=100, help="workflows submitted, completed and "
                        "followed by ANALYZE before phase 1 (default 100; 0: measure a fresh database)")
    parser.add_argument("--clients", type=int, default=8, help="concurrent HTTP clients (default 8)")
    parser.add_argument("--workers", type=int, default=2, help="Celery worker processes (default 2)")
    parser.add_argument("--web-workers", type=int, default=2, help="gunicorn worker processes (default 2)")
    parser.add_argument("--web-threads", type=int, default=4, help="threads per gunicorn worker (default 4)")
    parser.add_argument("--server", choices=["wsgi", "asgi"], default="wsgi",
                        help="wsgi: gunicorn on osmo.wsgi (the default); asgi: uvicorn on osmo.asgi with --web-workers "
                             "processes (make run, compose, the sessions' Deployment)")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--json", action="store_true", help="print the result as one JSON line")
    args = parser.parse_args()
    if not (os.environ.get("DATABASE_URL", "").startswith("postgres") and os.environ.get("REDIS_URL")):
        raise SystemExit("Set DATABASE_URL (PostgreSQL) and REDIS_URL, or run `make bench-pipeline`.")
    import httpx

    data_dir = Path(tempfile.mkdtemp(prefix="osmo-bench-"))
    metrics_token = secrets.token_urlsafe(24)  # /metrics needs it (or a staff user): docs/operations.md
    env = dict(
        os.environ,
        DJANGO_SETTINGS_MODULE="osmo.settings.production",
        DJANGO_SECRET_KEY=secrets.token_urlsafe(32),
        OSMO_DATA_DIR=str(data_dir),
        LOG_LEVEL="WARNING",
        WEB_CONCURRENCY=str(args.web_workers),
        GUNICORN_THREADS=str(args.web_threads),
        GUNICORN_ACCESS_LOG="",
        # One user sends everything here; the default per-user rate (200/s) would throttle the run.
        OSMO_THROTTLE_USER="1000000/min",
        OSMO_METRICS_TOKEN=metrics_token,
        # Production settings refuse to start without the credential store's key (docs/operations.md).
        OSMO_CREDENTIALS_KEYS=base64.urlsafe_b64encode(secrets.token_bytes(32)).decode(),
    )
    log = sys.stderr
    print("==> migrating and generating a 1,296-node NVL72 pool", file=log)
    manage(env, "migrate", "--no-input", "-v0")
    manage(env, "generate_pool", "bench", "--zones", "2", "--spines", "2", "--racks", "18", "--replace", "-v0")
    token = manage(
        env, "shell", "-v0", "-c",
        "from django.contrib.auth.models import User; from credentials.tokens import api_key_create; "
        "u, _ = User.objects.get_or_create(username='bench'); print(api_key_create(user=u, replace=True))",
    ).strip()

    processes: list[subprocess.Popen] = []

    def spawn(cmd: list[str]) -> Path:
        path = data_dir / f"process-{len(processes)}.log"
        out = open(path, "w")  # noqa: SIM115 - lives as long as the process
        processes.append(
            subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        )
        return path

    celery = [sys.executable, "-m", "celery", "-A", "osmo"]
    try:
        for index in range(args.workers):
            spawn([*celery, "worker", "-c", "1", "--without-mingle", "--without-gossip", "-n", f"bench{index}@%h",
                   "-l", "WARNING"])
        spawn([*celery, "beat", "-l", "WARNING", "-s", str(data_dir / "beat")])
        if args.server == "asgi":
            web_log = spawn([sys.executable, "-m", "uvicorn", "osmo.asgi:application", "--host", "127.0.0.1",
                             "--port", str(args.port), "--workers", str(args.web_workers), "--log-level", "warning",
                             "--no-access-log"])
        else:
            web_log = spawn([sys.executable, "-m", "gunicorn", "-c", "python:osmo.gunicorn_conf", "--bind",
                             f"127.0.0.1:{args.port}", "osmo.wsgi"])
        base = f"http://127.0.0.1:{args.port}"
        headers = {"Authorization": f"Token {token}"}
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{base}/api/me/", headers=headers, timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit(f"web server did not come up; see {web_log}:\n{web_log.read_text()[-3000:]}")
            time.sleep(0.3)

        cpu = _CpuMeter(web=processes[-1].pid, workers=[p.pid for p in processes[:args.workers]],
                        beat=processes[args.workers].pid)
        submitted: dict[str, float] = {}
        lock = threading.Lock()

        def submitter(prefix: str) -> Callable:
            def submit(client, index: int):
                response = client.post(
                    f"{base}/api/workflows/",
                    json={"pool": "bench", "spec": spec_text(f"{prefix}{index}", args.tasks, args.task_seconds)},
                    headers={**headers, "Idempotency-Key": uuid.uuid4().hex},
                )
                if response.status_code == 201:
                    with lock:
                        submitted[response.json()["id"]] = time.time()
                return response
            return submit

        if args.warmup_workflows:
            # A service in operation has table statistics: autovacuum analyzes a table within a
            # minute of enough rows changing. A database created a moment ago has none, and with
            # none the planner takes every filter for 0.5 % of the rows (the queue-position count
            # then joins each queued gang against every workflow of the pool). The phases below
            # measure the service in operation: some workflows run through it first, then ANALYZE.
            print(f"==> 0. warm-up: {args.warmup_workflows} workflows run through, then ANALYZE", file=log)
            _run(args.warmup_workflows, args.clients, 0.0, submitter("warm"))
            _dispatch_latencies("warm", args.warmup_workflows)
            if args.task_seconds <= 60:
                _wait_completed("warm")
            _query("ANALYZE", ())
        print(f"==> 1. trivial: {args.requests} x GET /api/me/ with {args.clients} clients", file=log)
        before = cpu.read()
        trivial_rate, _ = _run(args.requests, args.clients, 0.0,
                               lambda client, i: client.get(f"{base}/api/me/", headers=headers))
        trivial_cpu = cpu.per_request(before, cpu.read(), args.requests)

        print(f"==> 2. saturated: {args.workflows} workflows of {args.tasks} tasks, unpaced", file=log)
        before = cpu.read()
        submit_rate, submit_failed = _run(args.workflows, args.clients, 0.0, submitter("sat"))
        submitted_cpu = cpu.read()
        print("==> 3. waiting for their pods to be dispatched, then for them to complete", file=log)
        saturated = _dispatch_latencies("sat", args.workflows - submit_failed)
        saturated_cpu = cpu.per_request(before, submitted_cpu, args.workflows)
        saturated_cpu["workers"] = cpu.per_request(before, cpu.read(), args.workflows)["workers"]
        if args.task_seconds <= 60:  # longer tasks: the pool must hold both phases (1,296 nodes: 324 gangs)
            _wait_completed("sat")

        print(f"==> 4. paced: {args.paced_workflows} workflows at {args.rate:g}/s", file=log)
        before = cpu.read()
        paced_rate, paced_failed = _run(args.paced_workflows, args.clients, args.rate, submitter("paced"))
        paced = _dispatch_latencies("paced", args.paced_workflows - paced_failed)
        paced_cpu = cpu.per_request(before, cpu.read(), args.paced_workflows)

        scheduler = _scheduler_metrics(httpx.get(f"{base}/metrics", timeout=30,
                                                  headers={"Authorization": f"Bearer {metrics_token}"}).text)

        def ms(values: list[float], q: float) -> float:
            return round(percentile(values, q) * 1000, 1)

        result = {
            "benchmark": "pipeline",
            "server": (f"uvicorn {args.web_workers} workers (osmo.asgi)" if args.server == "asgi" else
                       f"gunicorn {args.web_workers} x {args.web_threads} gthread"),
            "workers": args.workers,
            "clients": args.clients,
            "tasks_per_workflow": args.tasks,
            "warmup_workflows": args.warmup_workflows,
            "trivial_requests_per_s": round(trivial_rate, 1),
            "trivial_cpu_ms": trivial_cpu,
            "saturated": {
                "workflows": args.workflows,
                "failed": submit_failed,
                "submissions_per_s": round(submit_rate, 1),
                "submit_vs_trivial": round(submit_rate / trivial_rate, 3) if trivial_rate else None,
                "dispatched": len(saturated),
                "submit_to_dispatched_p50_ms": ms(saturated, 50),
                "submit_to_dispatched_p99_ms": ms(saturated, 99),
                "cpu_ms": saturated_cpu,
            },
            "paced": {
                "workflows": args.paced_workflows,
                "failed": paced_failed,
                "rate_per_s": args.rate,
                "submissions_per_s": round(paced_rate, 1),
                "paced_vs_trivial": round(paced_rate / trivial_rate, 3) if trivial_rate else None,
                "dispatched": len(paced),
                "submit_to_dispatched_p50_ms": ms(paced, 50),
                "submit_to_dispatched_p99_ms": ms(paced, 99),
                "submit_to_dispatched_mean_ms": round(statistics.fmean(paced) * 1000, 1) if paced else None,
                "cpu_ms": paced_cpu,
            },
            "scheduler": scheduler,
        }
        print(json.dumps(result) if args.json else json.dumps(result, indent=2))
    finally:
        for process in processes:
            try:
                os.killpg(process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for process in processes:
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)


def _run(count: int, clients: int, rate: float, call: Callable) -> tuple[float, int]:
    """``count`` calls spread over ``clients`` threads (paced at ``rate`` per second in total when
    given). Returns (successful calls per second, failed calls)."""
    import httpx

    interval = clients / rate if rate else 0.0

    def run(indices: list[int]) -> int:
        ok = 0
        with httpx.Client(timeout=60) as client:
            next_at = time.perf_counter()
            for index in indices:
                if interval:
                    time.sleep(max(0.0, next_at - time.perf_counter()))
                    next_at += interval
                if call(client, index).status_code < 300:
                    ok += 1
        return ok

    chunks = [list(range(count))[i::clients] for i in range(clients)]
    started = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        ok = sum(pool.map(run, chunks))
    elapsed = time.perf_counter() - started
    if ok != count:
        print(f"warning: {count - ok} of {count} requests failed", file=sys.stderr)
    return ok / elapsed, count - ok


class _CpuMeter:
    """CPU seconds spent so far by the benchmark's process groups (each spawned process leads its own
    session), by the PostgreSQL server of DATABASE_URL (when its data directory can be read) and by
    this process. Linux only (``/proc``); a part that cannot be read is left out."""

    def __init__(self, *, web: int, workers: list[int], beat: int) -> None:
        self.groups = {"web": [web], "workers": workers, "beat": [beat]}
        self.tick = os.sysconf("SC_CLK_TCK")
        self.postmaster = _postmaster_pid()

    def _stats(self) -> list[list[str]]:
        rows = []
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    text = Path(f"/proc/{entry}/stat").read_text()
                except OSError:
                    continue
                rows.append([entry, *text[text.rindex(")") + 2:].split()])
        return rows

    def read(self) -> dict[str, float]:
        # After the pid: state ppid pgrp session ... utime(14) stime(15) cutime(16) cstime(17), 1-based.
        rows = self._stats()
        totals: dict[str, float] = {}
        for name, leaders in self.groups.items():
            ticks = 0
            for row in rows:
                pid, pgrp = int(row[0]), int(row[3])
                if pgrp in leaders:
                    ticks += int(row[12]) + int(row[13])
                    if pid in leaders:
                        ticks += int(row[14]) + int(row[15])
            totals[name] = ticks / self.tick
        if self.postmaster:
            ticks = 0
            for row in rows:
                pid, ppid = int(row[0]), int(row[2])
                if pid == self.postmaster:
                    ticks += sum(int(v) for v in row[12:16])
                elif ppid == self.postmaster:
                    ticks += int(row[12]) + int(row[13])
            totals["postgres"] = ticks / self.tick
        usage = resource.getrusage(resource.RUSAGE_SELF)
        totals["client"] = usage.ru_utime + usage.ru_stime
        return totals

    @staticmethod
    def per_request(before: dict[str, float], after: dict[str, float], requests: int) -> dict[str, float]:
        return {name: round((after[name] - before[name]) / max(requests, 1) * 1000, 2) for name in after}


def _postmaster_pid() -> int | None:
    """The PostgreSQL server's pid, from the postmaster.pid file of its data directory."""
    try:
        import psycopg

        with psycopg.connect(os.environ["DATABASE_URL"]) as connection:
            row = connection.execute("SHOW data_directory").fetchone()
        return int((Path(row[0]) / "postmaster.pid").read_text().split()[0]) if row else None
    except Exception:  # noqa: BLE001 - no superuser, another host: postgres is left out
        return None


def _scheduler_metrics(text: str) -> dict:
    """What the workers reported through /metrics over the whole run: placement cycles (count, mean
    duration), gang outcomes, and per Celery task name its runs and CPU time."""
    from prometheus_client.parser import text_string_to_metric_families

    samples = [(s.name, s.labels, s.value) for f in text_string_to_metric_families(text) for s in f.samples]
    pool = {"pool": "bench"}
    count = sum(v for n, labels, v in samples if n == "osmo_placement_cycle_duration_seconds_count"
                and labels == pool)
    total = sum(v for n, labels, v in samples if n == "osmo_placement_cycle_duration_seconds_sum" and labels == pool)
    outcomes = {labels["outcome"]: int(v) for n, labels, v in samples
                if n == "osmo_placement_gangs_total" and labels.get("pool") == "bench"}
    runs = {labels["task"]: v for n, labels, v in samples if n == "osmo_worker_tasks_total"}
    cpu = {labels["task"]: v for n, labels, v in samples if n == "osmo_worker_task_cpu_seconds_total"}
    tasks = {name.removeprefix("scheduler."): {"runs": int(runs[name]), "cpu_s": round(cpu.get(name, 0.0), 2),
                                               "cpu_ms_per_run": round(cpu.get(name, 0.0) / runs[name] * 1000, 1)}
             for name in sorted(runs) if runs[name]}
    return {"cycles": int(count), "cycle_mean_ms": round(total / count * 1000, 1) if count else None,
            "gang_outcomes": outcomes, "worker_tasks": tasks}


def _query(sql: str, params: tuple) -> list[tuple]:
    """One read of the benchmark's database, straight through psycopg: polling through
    ``manage.py shell`` started a Django process per poll (~0.6 s of CPU each, once a second), which
    took most of a core from the server while it was being measured."""
    import psycopg

    with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as connection:
        cursor = connection.execute(sql, params)
        return cursor.fetchall() if cursor.description else []


def _dispatch_latencies(prefix: str, expected: int, timeout: float = 600) -> list[float]:
    """Per workflow named ``<prefix>N``: last pod dispatched_at minus submitted_at (seconds)."""
    sql = (
        "SELECT extract(epoch FROM w.submitted_at)::float8, extract(epoch FROM max(t.dispatched_at))::float8, "
        "count(t.id) FILTER (WHERE t.dispatched_at IS NULL) "
        "FROM workflows_workflow w JOIN scheduler_pool p ON p.id = w.pool_id "
        "LEFT JOIN workflows_task t ON t.workflow_id = w.id "
        "WHERE p.name = 'bench' AND starts_with(w.name, %s) GROUP BY w.id"
    )
    deadline = time.monotonic() + timeout
    while True:
        rows = _query(sql, (prefix,))
        done = [d - s for s, d, undispatched in rows if undispatched == 0 and d is not None]
        if len(rows) >= expected and len(done) == len(rows):
            return done
        if time.monotonic() > deadline:
            print(f"warning: {len(rows) - len(done)} workflows not dispatched after {timeout}s", file=sys.stderr)
            return done
        time.sleep(1)


def _wait_completed(prefix: str, timeout: float = 600) -> None:
    sql = "SELECT count(*) FROM workflows_workflow WHERE starts_with(name, %s) AND status <> 'COMPLETED'"
    deadline = time.monotonic() + timeout
    while _query(sql, (prefix,))[0][0] and time.monotonic() < deadline:
        time.sleep(1)


if __name__ == "__main__":
    main()
