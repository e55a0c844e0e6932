"""In-process worker CPU per workflow over its whole life: placement, dispatch, and the two pod syncs that
move its tasks to RUNNING and then to COMPLETED.

The workers' share of ``bench.pipeline``'s CPU without the broker or the other processes, stage by stage:
workflows of the pipeline's shape (one gang of 4 tasks of 4 GPUs) are submitted (the service, not HTTP)
to a pool of the pipeline's size (1,296 nodes), ``--gangs-per-cycle`` per placement cycle; the dispatch
messages each cycle sent on commit are run here through Celery's eager ``apply``; then one pod sync sees
every pod running and a second one sees them all finished. Under the production settings against
PostgreSQL and Redis; CPU from ``time.process_time`` (PostgreSQL's own CPU is not in it), minimum of
``--rounds`` rounds of ``--cycles`` cycles::

    source scripts/services.sh; services_start
    PYTHONPATH=$PWD .venv/bin/python -m bench.worker_profile --json
    PYTHONPATH=$PWD .venv/bin/python -m bench.worker_profile --profile /tmp/wp   # + cProfile of each stage

A sync in the pipeline sees some tasks move and many not; the two syncs here see every task move, so
``sync_running`` and ``sync_completed`` are what moving one workflow's tasks costs. The simulated
tasks run ``--sim-seconds`` (long enough that a slow round on a busy machine still finds every pod
running at the first sync, which looks one second ahead, and finished at the second, which looks
twice as far). ``queries_per_workflow`` counts the SQL statements of each stage (PostgreSQL's share).
With ``--profile DIR``, one more round runs under cProfile (CPU time) and each stage's raw stats are
written to ``DIR/<stage>.pstats`` for pstats' callers/callees views.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import json
import os
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

from bench.inprocess import gangs_submit, worker_in_process

STAGES = ("cycle", "dispatch", "sync_running", "sync_completed")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gangs-per-cycle", type=int, default=5, help="gangs each cycle places (default 5)")
    parser.add_argument("--cycles", type=int, default=12, help="cycles per round (default 12: 60 workflows)")
    parser.add_argument("--rounds", type=int, default=3, help="measured rounds; the minimum of each stage is reported")
    parser.add_argument("--sim-seconds", type=float, default=600.0, help="how long each simulated task runs")
    parser.add_argument("--json", action="store_true", help="print the result as one JSON line")
    parser.add_argument("--profile", metavar="DIR", help="cProfile one more round, stats per stage into DIR")
    args = parser.parse_args()
    user, dispatch_names, sent = worker_in_process("worker-profile")
    from django.core.management import call_command
    from django.db import connection
    from django.utils import timezone

    from osmo.celery import app
    from scheduler.models import Pool
    from workflows.scheduling.cycle import placement_cycle_run
    from workflows.scheduling.pods import pods_sync

    def one_round(profilers: dict[str, cProfile.Profile] | None = None) -> tuple[dict[str, float], dict[str, float]]:
        pool_name = f"w{uuid.uuid4().hex[:6]}"
        call_command("generate_pool", pool_name, "--zones", "2", "--spines", "2", "--racks", "18", verbosity=0)
        pool = Pool.objects.get(name=pool_name)
        spent = dict.fromkeys(STAGES, 0.0)
        queries = dict.fromkeys(STAGES, 0)

        @contextlib.contextmanager
        def measured(stage: str) -> Iterator[None]:
            profiler = profilers[stage] if profilers else None

            def counted(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
                queries[stage] += 1  # (capturing the queries would render each one's text: CPU not measured)
                return execute(sql, params, many, context)

            with connection.execute_wrapper(counted):
                started = time.process_time()
                if profiler is not None:
                    profiler.enable()
                yield
                if profiler is not None:
                    profiler.disable()
                spent[stage] += time.process_time() - started

        placed = 0
        for cycle in range(args.cycles):
            sent.clear()
            gangs_submit(user, pool, f"{pool_name}c{cycle}", args.gangs_per_cycle, seconds=args.sim_seconds)
            with measured("cycle"):
                result = placement_cycle_run(pool_id=pool.pk)
            placed += len(result.placed)
            work = [(name, kwargs) for name, kwargs in sent if name in dispatch_names]
            with measured("dispatch"):
                for name, kwargs in work:
                    app.tasks[name].apply(kwargs=kwargs)
        for stage, seconds in (("sync_running", 1.0), ("sync_completed", 2 * args.sim_seconds)):
            with measured(stage):
                counts = pods_sync(pool_id=pool.pk, now=timezone.now() + timedelta(seconds=seconds))
            moved = counts["running"] if stage == "sync_running" else counts["completed"]
            assert moved == placed * 4, (stage, counts, placed)
        return ({stage: seconds * 1000 / placed for stage, seconds in spent.items()},
                {stage: round(count / placed, 2) for stage, count in queries.items()})

    one_round()  # warm-up
    rounds = [one_round() for _ in range(args.rounds)]
    best = {stage: round(min(spent[stage] for spent, _ in rounds), 3) for stage in STAGES}
    result = {"benchmark": "worker_profile", "gangs_per_cycle": args.gangs_per_cycle, "cycles": args.cycles,
              "cpu_ms_per_workflow": best, "total_cpu_ms_per_workflow": round(sum(best.values()), 3),
              "queries_per_workflow": rounds[-1][1],
              "rounds": [{stage: round(value, 3) for stage, value in spent.items()} for spent, _ in rounds]}
    if args.profile:
        profilers = {stage: cProfile.Profile(time.process_time) for stage in STAGES}  # CPU time, as measured
        one_round(profilers)
        os.makedirs(args.profile, exist_ok=True)
        for stage, profiler in profilers.items():
            profiler.dump_stats(os.path.join(args.profile, f"{stage}.pstats"))
    print(json.dumps(result) if args.json else json.dumps(result, indent=2), file=sys.stdout)

if __name__ == "__main__":
    main()
