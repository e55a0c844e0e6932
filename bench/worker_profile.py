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

A sync in the pipeline sees some tasks move and many not; the two syncs here see every task move, so
``sync_running`` and ``sync_completed`` are what moving one workflow's tasks costs.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from datetime import timedelta

from bench.inprocess import gangs_submit_and_place, worker_in_process

STAGES = ("cycle", "dispatch", "sync_running", "sync_completed")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gangs-per-cycle", type=int, default=5, help="gangs each cycle places (default 5)")
    parser.add_argument("--cycles", type=int, default=12, help="cycles per round (default 12: 60 workflows)")
    parser.add_argument("--rounds", type=int, default=3, help="measured rounds; the minimum of each stage is reported")
    parser.add_argument("--json", action="store_true", help="print the result as one JSON line")
    args = parser.parse_args()
    user, dispatch_names, sent = worker_in_process("worker-profile")
    from django.core.management import call_command
    from django.utils import timezone

    from osmo.celery import app
    from scheduler.models import Pool
    from workflows.scheduling.pods import pods_sync

    def one_round() -> dict[str, float]:
        pool_name = f"w{uuid.uuid4().hex[:6]}"
        call_command("generate_pool", pool_name, "--zones", "2", "--spines", "2", "--racks", "18", verbosity=0)
        pool = Pool.objects.get(name=pool_name)
        spent = dict.fromkeys(STAGES, 0.0)
        placed = 0
        for cycle in range(args.cycles):
            sent.clear()
            seconds, result = gangs_submit_and_place(user, pool, f"{pool_name}c{cycle}", args.gangs_per_cycle)
            spent["cycle"] += seconds
            placed += len(result.placed)
            work = [(name, kwargs) for name, kwargs in sent if name in dispatch_names]
            started = time.process_time()
            for name, kwargs in work:
                app.tasks[name].apply(kwargs=kwargs)
            spent["dispatch"] += time.process_time() - started
        for stage, seconds in (("sync_running", 1.0), ("sync_completed", 30.0)):
            started = time.process_time()
            counts = pods_sync(pool_id=pool.pk, now=timezone.now() + timedelta(seconds=seconds))
            spent[stage] += time.process_time() - started
            moved = counts["running"] if stage == "sync_running" else counts["completed"]
            assert moved == placed * 4, (stage, counts, placed)
        return {stage: seconds * 1000 / placed for stage, seconds in spent.items()}

    one_round()  # warm-up
    rounds = [one_round() for _ in range(args.rounds)]
    best = {stage: round(min(r[stage] for r in rounds), 3) for stage in STAGES}
    result = {"benchmark": "worker_profile", "gangs_per_cycle": args.gangs_per_cycle, "cycles": args.cycles,
              "cpu_ms_per_workflow": best, "total_cpu_ms_per_workflow": round(sum(best.values()), 3),
              "rounds": [{stage: round(value, 3) for stage, value in r.items()} for r in rounds]}
    print(json.dumps(result) if args.json else json.dumps(result, indent=2), file=sys.stdout)


if __name__ == "__main__":
    main()
