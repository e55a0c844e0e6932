"""In-process cost of dispatching placed gangs: worker CPU ms and SQL queries per gang.

The dispatch share of ``bench.pipeline``'s worker CPU without the broker or the other processes:
workflows are submitted (the service, not HTTP) to a generated pool, a placement cycle places
``--gangs-per-cycle`` of them, and the dispatch messages that cycle sent on commit are then run in
this process through Celery's eager ``apply`` (the task, its signal handlers and the tracer around
it; not the broker round trip, ack or prefetch). Under the production settings against PostgreSQL
and Redis; CPU from ``time.process_time`` (PostgreSQL's own CPU is not in it: ``queries`` is the count
to compare for that). Whatever the code sends is run, so the same script measures one task per gang
and one task per cycle alike.

    source scripts/services.sh; services_start
    PYTHONPATH=$PWD .venv/bin/python -m bench.dispatch_profile --json
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import uuid

from bench.inprocess import gangs_submit_and_place, worker_in_process


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gangs-per-cycle", type=int, default=5, help="gangs each cycle places (default 5, about "
                        "what bench.pipeline's cycles placed)")
    parser.add_argument("--cycles", type=int, default=20, help="measured cycles per round (default 20)")
    parser.add_argument("--rounds", type=int, default=3, help="measured rounds; the minimum is reported")
    parser.add_argument("--json", action="store_true", help="print the result as one JSON line")
    args = parser.parse_args()
    user, dispatch_names, sent = worker_in_process("dispatch-profile")
    from django.core.management import call_command
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from osmo.celery import app
    from scheduler.models import Pool

    def one_round() -> tuple[float, float, int, int, int]:
        gangs = args.gangs_per_cycle * args.cycles
        pool_name = f"d{uuid.uuid4().hex[:6]}"
        racks = max(1, math.ceil(gangs * 4 / 18 / 4) + 1)
        call_command("generate_pool", pool_name, "--zones", "2", "--spines", "2", "--racks", str(racks), verbosity=0)
        pool = Pool.objects.get(name=pool_name)
        cpu = queries = messages = placed = 0.0
        cycle_cpu = 0.0
        for cycle in range(args.cycles):
            sent.clear()
            seconds, result = gangs_submit_and_place(user, pool, f"{pool_name}c{cycle}", args.gangs_per_cycle)
            cycle_cpu += seconds
            placed += len(result.placed)
            work = [(name, kwargs) for name, kwargs in sent if name in dispatch_names]
            started = time.process_time()
            with CaptureQueriesContext(connection) as captured:
                for name, kwargs in work:
                    app.tasks[name].apply(kwargs=kwargs)
            cpu += time.process_time() - started
            queries += len(captured.captured_queries)
            messages += len(work)
        return cpu * 1000 / placed, cycle_cpu * 1000 / args.cycles, int(queries), int(messages), int(placed)

    one_round()  # warm-up
    rounds = [one_round() for _ in range(args.rounds)]
    best = min(rounds)
    _cpu, _cycle, queries, messages, placed = best
    result = {"benchmark": "dispatch_profile", "gangs_per_cycle": args.gangs_per_cycle, "cycles": args.cycles,
              "placed": placed, "dispatch_cpu_ms_per_gang": round(best[0], 3),
              "dispatch_cpu_ms_rounds": [round(r[0], 3) for r in rounds],
              "cycle_cpu_ms": round(min(r[1] for r in rounds), 2),
              "queries_per_gang": round(queries / placed, 2), "messages_per_cycle": round(messages / args.cycles, 2)}
    print(json.dumps(result) if args.json else json.dumps(result, indent=2), file=sys.stdout)


if __name__ == "__main__":
    main()
