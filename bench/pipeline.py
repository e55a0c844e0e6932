"""Pipeline benchmark: sustained submissions per second through the REST API, and the latency from
submission to dispatched pods, on PostgreSQL + Redis with two real Celery worker processes and beat.

Run it with `make bench-pipeline` (starts throwaway PostgreSQL and Redis), or with DATABASE_URL and
REDIS_URL pointing at servers you own:

    python -m bench.pipeline --workflows 200 --clients 4 --json

Baseline, in the same run and on the same server: the rate of a trivial authenticated request
(`GET /api/pools/`) by the same clients. `submit_vs_trivial` is the ratio of the two rates: how much of
the web tier's capacity a submission (validation, tree building, five inserts) costs.

The web server is the production one: gunicorn with ``osmo/gunicorn_conf.py`` (``--web-workers``
processes of ``--web-threads`` threads).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SPEC = """workflow:
  name: bench{index}
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


def spec_text(index: int, tasks: int) -> str:
    rows = [
        f"    - {{name: t{t}, {'lead: true, ' if t == 0 else ''}image: busybox, command: [sleep, '1'], "
        f"environment: {{OSMO_SIM_SECONDS: '600'}}}}"
        for t in range(tasks)
    ]
    return SPEC.format(index=index, tasks="\n".join(rows))


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
    parser.add_argument("--workflows", type=int, default=200, help="workflows to submit (default 200)")
    parser.add_argument("--tasks", type=int, default=4, help="tasks per workflow, one gpu-clique (default 4)")
    parser.add_argument("--clients", type=int, default=4, help="concurrent HTTP clients (default 4)")
    parser.add_argument("--workers", type=int, default=2, help="Celery worker processes (default 2)")
    parser.add_argument("--rate", type=float, default=0.0,
                        help="submissions per second across all clients; 0 = as fast as they go (default)")
    parser.add_argument("--web-workers", type=int, default=2, help="gunicorn worker processes (default 2)")
    parser.add_argument("--web-threads", type=int, default=4, help="threads per gunicorn worker (default 4)")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--json", action="store_true", help="print one JSON object per line")
    args = parser.parse_args()
    if not (os.environ.get("DATABASE_URL", "").startswith("postgres") and os.environ.get("REDIS_URL")):
        raise SystemExit("Set DATABASE_URL (PostgreSQL) and REDIS_URL, or run `make bench-pipeline`.")
    import httpx

    env = dict(
        os.environ,
        DJANGO_SETTINGS_MODULE="osmo.settings.local",
        DEBUG="false",
        OSMO_DATA_DIR=tempfile.mkdtemp(prefix="osmo-bench-"),
        LOG_LEVEL="WARNING",
        WEB_CONCURRENCY=str(args.web_workers),
        GUNICORN_THREADS=str(args.web_threads),
        GUNICORN_ACCESS_LOG="",
    )
    log = sys.stderr
    print("==> migrating and generating a 1,296-node NVL72 pool", file=log)
    manage(env, "migrate", "--no-input", "-v0")
    manage(env, "generate_pool", "bench", "--zones", "2", "--spines", "2", "--racks", "18", "--replace", "-v0")
    token = manage(
        env,
        "shell",
        "-v0",
        "-c",
        (
            "from django.contrib.auth.models import User; from rest_framework.authtoken.models import Token; "
            "u, _ = User.objects.get_or_create(username='bench'); print(Token.objects.get_or_create(user=u)[0].key)"
        ),
    ).strip()

    processes: list[subprocess.Popen] = []

    logs = Path(env["OSMO_DATA_DIR"])

    def spawn(cmd: list[str]) -> None:
        out = open(logs / f"process-{len(processes)}.log", "w")  # noqa: SIM115 - lives as long as the process
        processes.append(
            subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        )

    try:
        for index in range(args.workers):
            spawn(
                [
                    sys.executable,
                    "-m",
                    "celery",
                    "-A",
                    "osmo",
                    "worker",
                    "-Q",
                    "scheduler,dispatch,default",
                    "-c",
                    "1",
                    "--without-mingle",
                    "--without-gossip",
                    "-n",
                    f"bench{index}@%h",
                    "-l",
                    "WARNING",
                ]
            )
        spawn(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "osmo",
                "beat",
                "-l",
                "WARNING",
                "-s",
                str(Path(env["OSMO_DATA_DIR"]) / "beat"),
            ]
        )
        spawn([sys.executable, "-m", "gunicorn", "-c", "python:osmo.gunicorn_conf", "--bind",
               f"127.0.0.1:{args.port}", "osmo.wsgi"])
        base = f"http://127.0.0.1:{args.port}"
        headers = {"Authorization": f"Token {token}"}
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{base}/api/pools/", headers=headers, timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit(
                    f"web server did not come up; see {logs}/process-{len(processes) - 1}.log:\n"
                    + (logs / f"process-{len(processes) - 1}.log").read_text()[-3000:]
                )
            time.sleep(0.3)
        print(f"==> baseline: {args.workflows} x GET /api/pools/ with {args.clients} clients", file=log)
        unpaced = argparse.Namespace(**{**vars(args), "rate": 0.0})
        trivial_rate = _rate(unpaced, lambda client, i: client.get(f"{base}/api/pools/", headers=headers), base)
        print(f"==> submitting {args.workflows} workflows of {args.tasks} tasks", file=log)
        submitted: dict[str, float] = {}
        lock = threading.Lock()

        def submit(client: httpx.Client, index: int) -> httpx.Response:
            response = client.post(
                f"{base}/api/workflows/",
                json={"pool": "bench", "spec": spec_text(index, args.tasks)},
                headers={**headers, "Idempotency-Key": uuid.uuid4().hex},
            )
            if response.status_code == 201:
                with lock:
                    submitted[response.json()["id"]] = time.time()
            return response

        submit_rate = _rate(args, submit, base)
        print("==> waiting for every workflow's pods to be dispatched", file=log)
        latencies = _dispatch_latencies(env, len(submitted))
        result = {
            "benchmark": "pipeline",
            "workflows": args.workflows,
            "tasks_per_workflow": args.tasks,
            "clients": args.clients,
            "paced_rate_per_s": args.rate or None,
            "workers": args.workers,
            "submissions_per_s": round(submit_rate, 1),
            "trivial_requests_per_s": round(trivial_rate, 1),
            "submit_vs_trivial": round(submit_rate / trivial_rate, 3) if trivial_rate else None,
            "dispatched": len(latencies),
            "submit_to_dispatched_p50_ms": round(percentile(latencies, 50) * 1000, 1),
            "submit_to_dispatched_p99_ms": round(percentile(latencies, 99) * 1000, 1),
            "submit_to_dispatched_mean_ms": round(statistics.fmean(latencies) * 1000, 1) if latencies else None,
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


def _rate(args, call, base: str) -> float:
    import httpx

    interval = args.clients / args.rate if getattr(args, "rate", 0) else 0.0

    def run(indices: list[int]) -> int:
        ok = 0
        with httpx.Client(timeout=30) as client:
            next_at = time.perf_counter()
            for index in indices:
                if interval:
                    time.sleep(max(0.0, next_at - time.perf_counter()))
                    next_at += interval
                if call(client, index).status_code < 300:
                    ok += 1
        return ok

    chunks = [list(range(args.workflows))[i :: args.clients] for i in range(args.clients)]
    started = time.perf_counter()
    with ThreadPoolExecutor(args.clients) as pool:
        ok = sum(pool.map(run, chunks))
    elapsed = time.perf_counter() - started
    if ok != args.workflows:
        print(f"warning: {args.workflows - ok} requests failed", file=sys.stderr)
    return ok / elapsed


def _dispatch_latencies(env: dict[str, str], expected: int, timeout: float = 300) -> list[float]:
    """Per workflow: last pod dispatched_at minus submitted_at (seconds), read from the database."""
    script = (
        "import json; from django.db.models import Count, Max, Q; from workflows.models import Workflow; "
        "rows = Workflow.objects.filter(pool__name='bench').annotate(d=Max('tasks__dispatched_at'), "
        "n=Count('tasks', filter=Q(tasks__dispatched_at__isnull=True))).values_list('submitted_at', 'd', 'n'); "
        "print(json.dumps([[s.timestamp(), d.timestamp() if d else None, n] for s, d, n in rows]))"
    )
    deadline = time.monotonic() + timeout
    while True:
        rows = json.loads(manage(env, "shell", "-v0", "-c", script))
        done = [d - s for s, d, undispatched in rows if undispatched == 0 and d is not None]
        if len(rows) >= expected and len(done) == len(rows):
            return done
        if time.monotonic() > deadline:
            print(f"warning: {len(rows) - len(done)} workflows not dispatched after {timeout}s", file=sys.stderr)
            return done
        time.sleep(1)


if __name__ == "__main__":
    main()
