"""Placement cycle at queue depth: ``python -m bench.cycle --json`` (``make bench-cycle`` starts a
throwaway PostgreSQL; any DATABASE_URL works).

Pool: ``generate_pool big --preset nvl72 --zones 4 --spines 8 --racks 36 --occupancy 0.6 --seed 1``
(20,736 nodes, 60 % of GPUs used by others). Queue per depth (1,000 and 10,000 by default): 20
shapes; every tenth gang is small and fits (1-2 tasks of 1-2 GPUs in one gpu-clique), the others
need 16-18 nodes of one gpu-clique with 3-4 free GPUs each, which no clique has.

Per depth and algorithm (``incremental``: this cycle; ``baseline``: the algorithm it replaced, a
fresh aggregation per gang and every gang solved every cycle, run with the same time budget:
``bench.kit.cycle_baseline``), one
JSON line per measurement: the first cycle, an idle cycle (nothing changed), the cycle after one
running gang finishes; each with seconds, solver calls, queries, gangs placed, small gangs still
unplaced, and peak RSS; ``vs_baseline`` is the ratio of seconds. Each algorithm runs in a
transaction that is rolled back, so both see the same queue. With ``--check`` the baseline also
runs to completion (no budget) at the smallest depth and the placements are compared. With
``--profile FILE`` the incremental cycle after a release at the deepest depth runs under cProfile
(its row says ``"profiled": true``) and the statistics go to FILE (``python -m pstats FILE``).
Reads with the deep queue: the API's first page of PENDING workflows, the dashboard, the workflow
list and the pool page (p50 over 20 requests, queries); the pool page also right after a task's
reservation was released each time (``pool_page_after_release``: reservations read and added again)
and after a node was written each time (``pool_page_after_node_write``: nothing kept can be used).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import resource
import statistics
import sys
import time
from collections.abc import Callable
from datetime import timedelta

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "osmo.settings.local")
os.environ.setdefault("DEBUG", "False")  # measured as deployed: no debug bookkeeping
django.setup()

from django.conf import settings  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection, transaction  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402
from django.utils import timezone  # noqa: E402

from bench.kit.cycle_baseline import baseline_cycle_run  # noqa: E402
from bench.kit.queue import queue_mix  # noqa: E402
from scheduler.models import Node, Pool  # noqa: E402
from workflows import jobs  # noqa: E402
from workflows.lifecycle.reservations import reservations_release  # noqa: E402
from workflows.lifecycle.transitions import TaskChange, gang_settle, group_fail, tasks_status_set  # noqa: E402
from workflows.models import Task, TaskGroup, Workflow  # noqa: E402
from workflows.scheduling.cycle import CycleResult, placement_cycle_run  # noqa: E402
from workflows.services import workflow_submit  # noqa: E402

Runner = Callable[..., CycleResult]
POOL = "big"  # one pool per depth: big1000, big10000
SMALL = [(1, 1), (2, 1), (1, 2), (2, 2)]  # (tasks, gpus) that fit
LARGE = [(tasks, gpu, cpu) for tasks in (16, 17, 18) for gpu in (3, 4) for cpu in (8, 16, 24)]  # 18 that never fit


def spec(name: str, tasks: int, gpu: int, cpu: int = 4) -> str:
    rows = "\n".join(
        f"    - {{name: t{i}, {'lead: true, ' if i == 0 else ''}image: busybox, command: [sleep, '1']}}"
        for i in range(tasks)
    )
    return (f"workflow:\n  name: {name}\n  groups:\n  - name: g\n    tasks:\n{rows}\n"
            f"resources:\n  default:\n    gpu: {gpu}\n    cpu: {cpu}\n    memory: 16Gi\n"
            f"    topology:\n    - key: gpu-clique\n")


def setup(depths: list[int]) -> dict[int, set[int]]:
    """Pool, templates and one committed queue per depth (as separate workflow names). Returns the
    small gangs' group ids per depth."""
    call_command("migrate", verbosity=0)
    user, _ = get_user_model().objects.get_or_create(username="bench", defaults={"is_staff": True,
                                                                                   "is_superuser": True})
    small: dict[int, set[int]] = {}
    for depth in depths:
        pool = f"{POOL}{depth}"
        if not Pool.objects.filter(name=pool).exists():
            call_command("generate_pool", pool, preset="nvl72", zones=4, spines=8, racks=36, occupancy=0.6, seed=1,
                         stdout=open(os.devnull, "w"))
        templates = {}
        for index, (tasks, gpu) in enumerate(SMALL):
            templates[("s", index)] = workflow_submit(user=user, pool_name=pool,
                                                      spec=spec(f"d{depth}-small{index}", tasks, gpu))[0]
        for index, (tasks, gpu, cpu) in enumerate(LARGE):
            templates[("l", index)] = workflow_submit(user=user, pool_name=pool,
                                                      spec=spec(f"d{depth}-large{index}", tasks, gpu, cpu))[0]
        order = [templates[("s", (i // 10) % len(SMALL))] if i % 10 == 5 else templates[("l", i % len(LARGE))]
                 for i in range(depth)]
        queue_mix(order, first=timezone.now() - timedelta(seconds=1))
        # The templates themselves leave the queue (cancelled, through the lifecycle): only the mix is queued.
        for group in TaskGroup.objects.filter(workflow__in=list(templates.values())).select_related("workflow"):
            group_fail(group, "FAILED_CANCELED", message="a template of the bench's queue")
        if connection.vendor == "postgresql":
            # As autovacuum would shortly after such a load: without statistics the planner takes the
            # queue's 10,000 rows for 48 and picks a nested loop that scans the status index per row.
            with connection.cursor() as cursor:
                cursor.execute("ANALYZE")
        small[depth] = set(TaskGroup.objects.filter(
            workflow__name__in=[f"d{depth}-small{i}" for i in range(len(SMALL))], status="SCHEDULING"
        ).values_list("pk", flat=True))
    return small


def measure(label: str, depth: int, algorithm: str, small: set[int], pool_id: int, run: Runner) -> dict:
    row = _measure(label, depth, algorithm, small, pool_id, run)
    print(json.dumps(row), file=sys.stderr)
    return row


def _measure(label: str, depth: int, algorithm: str, small: set[int], pool_id: int, run: Runner) -> dict:
    with CaptureQueriesContext(connection) as queries:
        start = time.perf_counter()
        result = run(pool_id=pool_id)
        seconds = time.perf_counter() - start
    unplaced = TaskGroup.objects.filter(pk__in=small, status="SCHEDULING").count()
    return {"measurement": label, "depth": depth, "algorithm": algorithm, "seconds": round(seconds, 3),
            "solved": result.solved, "placed": len(result.placed), "small_unplaced": unplaced,
            "budget_exhausted": result.budget_exhausted, "queries": len(queries),
            "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}


def finish_one(pool_id: int) -> None:
    """One running gang finishes, as a pod sync would record it: tasks COMPLETED, capacity released."""
    group = TaskGroup.objects.filter(workflow__pool_id=pool_id, status="INITIALIZING").order_by("pk").first()
    tasks = list(group.tasks.order_by("pk"))
    tasks_status_set([TaskChange(task, "COMPLETED") for task in tasks])  # capacity released
    gang_settle(group)


def decisions(pool_id: int) -> dict[str, str]:
    return dict(Task.objects.filter(workflow__pool_id=pool_id, node__isnull=False, status="INITIALIZING")
                .values_list("workflow__workflow_id", "node__name"))


def reads(depth: int) -> list[dict]:
    pool = f"{POOL}{depth}"
    client = Client(HTTP_HOST="127.0.0.1")
    client.force_login(get_user_model().objects.get(username="bench"))
    rows = []
    one_node = Node.objects.filter(pool__name=pool).order_by("pk").values_list("pk", flat=True).first()
    running = iter(Task.objects.filter(workflow__pool__name=pool, status="INITIALIZING").order_by("pk")
                   .values_list("pk", flat=True)[:40])

    def touch() -> None:  # any write to a node: the pool page's kept totals are rebuilt
        Node.objects.filter(pk=one_node).update(updated_at=timezone.now())

    def release() -> None:  # a task ends: reservations are read and added again
        reservations_release(task_ids=[next(running)])

    for label, url, before in [
        ("api_pending_first_page", "/api/workflows/?status=PENDING", None), ("dashboard", "/", None),
        ("workflow_list_page", "/workflows/?status=PENDING", None), ("pool_page", f"/pools/{pool}/", None),
        ("pool_page_after_release", f"/pools/{pool}/", release),
        ("pool_page_after_node_write", f"/pools/{pool}/", touch),
    ]:
        with transaction.atomic():  # what `before` changes is undone after the measurement
            rows.append(_read(label, depth, pool, client, url, before))
            transaction.set_rollback(True)
    return rows


def _read(label: str, depth: int, pool: str, client: Client, url: str, before) -> dict:
    times = []
    for _ in range(20):
        if before is not None:
            before()
        with CaptureQueriesContext(connection) as queries:
            start = time.perf_counter()
            response = client.get(url)
            times.append(time.perf_counter() - start)
        assert response.status_code == 200, (url, response.status_code)
    return {"measurement": f"read_{label}", "depth": depth, "p50_ms": round(statistics.median(times) * 1000, 1),
            "queries": len(queries), "queued": Workflow.objects.filter(pool__name=pool, status="PENDING").count()}


ALGORITHMS: dict[str, Runner] = {"incremental": placement_cycle_run, "baseline": baseline_cycle_run}


def profiled(run: Runner, path: str) -> Runner:
    """``run`` under cProfile, its statistics written to ``path`` (``python -m pstats path`` reads them)."""
    def wrapper(**kwargs) -> CycleResult:
        profile = cProfile.Profile()
        try:
            return profile.runcall(run, **kwargs)
        finally:
            profile.dump_stats(path)
    return wrapper


def run_depth(depth: int, small: set[int], pool_id: int, check: bool, algorithms: list[str],
              profile: str = "") -> list[dict]:
    """``profile``: a file for the cProfile statistics of the incremental cycle after a release (that
    row's seconds are then measured under the profiler: ``"profiled": true``)."""
    rows: list[dict] = []
    per_algorithm: dict[str, dict[str, dict]] = {}
    for algorithm in algorithms:
        run = ALGORITHMS[algorithm]
        with transaction.atomic():
            got = {
                "first_cycle": measure("first_cycle", depth, algorithm, small, pool_id, run),
                "idle_cycle": measure("idle_cycle", depth, algorithm, small, pool_id, run),
            }
            if algorithm == "incremental":
                rows += reads(depth)
            finish_one(pool_id)
            if profile and algorithm == "incremental":
                got["after_release"] = measure("after_release", depth, algorithm, small, pool_id,
                                               profiled(run, profile))
                got["after_release"]["profiled"] = True
            else:
                got["after_release"] = measure("after_release", depth, algorithm, small, pool_id, run)
            per_algorithm[algorithm] = got
            transaction.set_rollback(True)
        print(f"depth {depth}: {algorithm} done", file=sys.stderr)
    for label in ("first_cycle", "idle_cycle", "after_release") if len(per_algorithm) == 2 else ():
        new, old = per_algorithm["incremental"][label], per_algorithm["baseline"][label]
        rows.append(old)
        rows.append({**new, "vs_baseline": round(new["seconds"] / old["seconds"], 4) if old["seconds"] else None})
    if check:
        budget = settings.OSMO_CYCLE_BUDGET_SECONDS
        with transaction.atomic():
            settings.OSMO_CYCLE_BUDGET_SECONDS = 10_000
            baseline = baseline_cycle_run(pool_id=pool_id)
            expected = decisions(pool_id)
            transaction.set_rollback(True)
        settings.OSMO_CYCLE_BUDGET_SECONDS = budget
        with transaction.atomic():
            placement_cycle_run(pool_id=pool_id)
            got = decisions(pool_id)
            transaction.set_rollback(True)
        rows.append({"measurement": "same_decisions_as_baseline", "depth": depth,
                     "baseline_finished": not baseline.budget_exhausted, "tasks_placed": len(expected),
                     "equal": got == expected})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--depths", default="1000,10000", help="Queue depths (comma-separated).")
    parser.add_argument("--check", action="store_true", help="Compare decisions with the baseline run to the end.")
    parser.add_argument("--algorithms", default="incremental,baseline", help="Which to run (comma-separated).")
    parser.add_argument("--json", action="store_true", help="One JSON object per line (the default prints the same).")
    parser.add_argument("--profile", default="", help="Write a cProfile of the incremental cycle after a release "
                        "at the deepest depth to this file (that row is then measured under the profiler).")
    args = parser.parse_args()
    jobs._send = lambda name, countdown=None, **kwargs: None  # no broker: measure the cycle alone
    # The 60 % occupancy is usage outside the service, so the large gangs do not fit even the idle
    # pool: queue them as on a pool that grows instead of refusing them (never_fits).
    settings.OSMO_REFUSE_NEVER_FITS = False
    depths = [int(d) for d in args.depths.split(",")]
    small = setup(depths)
    for depth in depths:
        pool_id = Pool.objects.get(name=f"{POOL}{depth}").pk
        for row in run_depth(depth, small[depth], pool_id, args.check and depth == min(depths),
                             args.algorithms.split(","), profile=args.profile if depth == max(depths) else ""):
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
