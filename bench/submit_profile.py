"""In-process cost of one submission (``POST /api/workflows/``): CPU ms and SQL queries per request.

The web tier's share of ``bench.pipeline`` without gunicorn, the HTTP clients or the other processes:
a ``django.test.Client`` sends the pipeline benchmark's submission (same spec, token auth,
``Idempotency-Key``) through the whole WSGI stack (middleware, DRF, the service, the answer) under
the production settings against PostgreSQL and Redis, in this process. On a shared machine the CPU
time of this process (``time.process_time``) moves far less than wall-clock rates do. PostgreSQL's
own CPU is reported apart: ``postgres_backend_cpu_ms_per_submission`` is what the one server process
serving this connection spent (from ``/proc``, in clock ticks, so ±0.05 ms at 200 submissions).

Run it with throwaway servers (the database is migrated and the pool generated here):

    source scripts/services.sh; services_start
    PYTHONPATH=$PWD .venv/bin/python -m bench.submit_profile --json
    PYTHONPATH=$PWD .venv/bin/python -m bench.submit_profile --profile 30   # + cProfile, top 30

``--queries`` prints the SQL of one submission. Nothing consumes the Celery messages the
submissions send (the placement requests): this measures the web side only.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import sys
import time
import uuid

from bench.inprocess import django_production_setup


def backend_cpu(pid: int) -> float:
    """CPU seconds (user + system) of a PostgreSQL server process so far, from ``/proc``: the
    database's share of a submission (the benchmark runs the server on this machine)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--warmup", type=int, default=50, help="submissions before measuring (default 50)")
    parser.add_argument("--submissions", type=int, default=200, help="measured submissions (default 200)")
    parser.add_argument("--tasks", type=int, default=4, help="tasks per workflow (default 4, as bench.pipeline)")
    parser.add_argument("--rounds", type=int, default=3, help="measured rounds; the minimum is reported")
    parser.add_argument("--profile", type=int, default=0, metavar="N", help="cProfile one round, print top N")
    parser.add_argument("--queries", action="store_true", help="print the SQL of one submission")
    parser.add_argument("--json", action="store_true", help="print the result as one JSON line")
    args = parser.parse_args()
    django_production_setup("submit-profile", OSMO_THROTTLE_USER="1000000/min")
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from bench.pipeline import spec_text

    call_command("migrate", "--no-input", verbosity=0)
    from scheduler.models import Pool

    if not Pool.objects.filter(name="bench").exists():  # a second run on the same servers keeps it
        call_command("generate_pool", "bench", "--zones", "2", "--spines", "2", "--racks", "18", verbosity=0)
    from django.contrib.auth.models import User

    from credentials.tokens import api_key_create

    user, _ = User.objects.get_or_create(username="bench")
    token = api_key_create(user=user, replace=True)  # only digests are stored: a new key per run
    client = Client(HTTP_HOST="127.0.0.1", HTTP_AUTHORIZATION=f"Token {token}")
    run = uuid.uuid4().hex[:6]
    counter = iter(range(10**9))

    def submit() -> None:
        index = next(counter)
        response = client.post(
            "/api/workflows/",
            data=json.dumps({"pool": "bench", "spec": spec_text(f"p{run}x{index}", args.tasks, 3.0)}),
            content_type="application/json",
            HTTP_IDEMPOTENCY_KEY=uuid.uuid4().hex,
        )
        if response.status_code != 201:
            raise SystemExit(f"submission answered {response.status_code}: {response.content[:500]!r}")

    for _ in range(args.warmup):
        submit()
    with CaptureQueriesContext(connection) as captured:
        submit()
    queries = list(captured.captured_queries)  # read now: every request clears the connection's log
    if args.queries:
        for query in queries:
            print(query["sql"][:300], file=sys.stderr)
    per_round: list[float] = []
    backend_round: list[float] = []
    for _ in range(args.rounds):
        backend = connection.connection.info.backend_pid  # CONN_MAX_AGE keeps one server process
        backend_started = backend_cpu(backend)
        started = time.process_time()
        for _ in range(args.submissions):
            submit()
        per_round.append((time.process_time() - started) * 1000 / args.submissions)
        if connection.connection.info.backend_pid == backend:
            backend_round.append((backend_cpu(backend) - backend_started) * 1000 / args.submissions)
    if args.profile:
        profiler = cProfile.Profile(time.process_time)  # CPU time: waits on the servers left out
        profiler.enable()
        for _ in range(args.submissions):
            submit()
        profiler.disable()
        pstats.Stats(profiler, stream=sys.stderr).sort_stats("cumulative").print_stats(args.profile)
        pstats.Stats(profiler, stream=sys.stderr).sort_stats("tottime").print_stats(args.profile)
        if os.environ.get("OSMO_PROFILE_OUT"):  # the raw stats, for pstats' callers/callees views
            profiler.dump_stats(os.environ["OSMO_PROFILE_OUT"])
    result = {"benchmark": "submit_profile", "tasks": args.tasks, "submissions": args.submissions,
              "cpu_ms_per_submission": round(min(per_round), 2),
              "cpu_ms_rounds": [round(value, 2) for value in per_round],
              "queries_per_submission": len(queries),
              "postgres_backend_cpu_ms_per_submission": round(min(backend_round), 2) if backend_round else None}
    print(json.dumps(result) if args.json else json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
