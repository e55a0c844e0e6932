"""One hanging cluster against a healthy one (docs/design.md §6, "Backends"): ``python -m bench.backend_isolation
--json`` with PostgreSQL and Redis in the environment (``source scripts/services.sh; services_start``).

Two clusters over HTTP on the loopback (``tests/dispatch/fake_cluster.py``), each the backend of one pool
of ``--nodes`` 8-GPU nodes, each with its own kubeconfig. Per round, ``--gangs`` gangs of two 4-GPU tasks
are submitted to the healthy pool (not timed), then its placement cycle and the dispatch of every placed
gang run and are timed (wall seconds; the pods are created on the healthy cluster), then they finish (not
timed). Meanwhile a second thread plays the other worker slots working for the other backend: its pod
sync and its node sync, again and again. Two conditions, alternated round by round:

- ``healthy``: the other cluster answers;
- ``hanging``: the other cluster accepts connections and never answers (each of its calls ends by the
  client's timeouts).

``ratio`` is the median hanging round over the median healthy round (the goal: at most 1.1).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import threading
import time

from bench.inprocess import worker_in_process

SPEC = """workflow:
  name: {name}
  groups:
  - name: g
    tasks:
    - {{name: t0, lead: true, image: busybox, command: [sleep, '60']}}
    - {{name: t1, image: busybox, command: [sleep, '60']}}
resources:
  default: {{gpu: 4, cpu: 8, memory: 32Gi, topology: [{{key: rack}}]}}
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=64)
    parser.add_argument("--gangs", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=6, help="rounds of each condition, alternated")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    from cryptography.fernet import Fernet

    os.environ.setdefault("OSMO_CREDENTIALS_KEYS", Fernet.generate_key().decode())  # this run's kubeconfigs
    user, _dispatch, _sent = worker_in_process("backend-isolation")

    from django.db import connection

    from scheduler.models import Pool
    from scheduler.services import inventory_import_text
    from scheduler.services.backends import backend_set
    from tests.dispatch.fake_cluster import FakeCluster, kubeconfig_for
    from workflows.models import TaskGroup
    from workflows.scheduling.cycle import placement_cycle_run
    from workflows.scheduling.gang_dispatch import gang_dispatch
    from workflows.scheduling.pods import pods_sync
    from workflows.services import workflow_submit
    from workflows.tasks import kubernetes_backend_sync

    nodes = {f"n{index:03d}": {"rack": f"r{index // 8}"} for index in range(args.nodes)}
    healthy, other = FakeCluster(nodes).start(), FakeCluster(nodes).start()
    stamp = int(time.time())
    names = {"healthy": f"bench-ok-{stamp}", "other": f"bench-other-{stamp}"}
    for role, cluster in (("healthy", healthy), ("other", other)):
        backend_set(name=names[role], kind="kubernetes", kubeconfig=kubeconfig_for(cluster.url, name=role))
        inventory_import_text(f"pool: {{name: {names[role]}, backend: {names[role]}, k8s_namespace: bench}}\n"
                              "topology_keys: [{key: rack, label: rack}]\nnodes: []\n")
        kubernetes_backend_sync(backend=names[role])
    pool = Pool.objects.get(name=names["healthy"])
    other_pool = Pool.objects.get(name=names["other"])
    # a running gang on the other cluster, so that its pod sync has work
    workflow_submit(user=user, pool_name=other_pool.name, spec=SPEC.format(name="otherx0"))
    placement_cycle_run(pool_id=other_pool.pk)
    for group in TaskGroup.objects.filter(workflow__pool=other_pool):
        gang_dispatch(group_id=group.pk)

    stop = threading.Event()

    def other_slots() -> None:
        while not stop.is_set():
            for work in (lambda: pods_sync(pool_id=other_pool.pk),
                         lambda: kubernetes_backend_sync(backend=names["other"])):
                try:
                    work()
                except Exception:  # noqa: BLE001 - the hanging cluster's errors are the point
                    pass
        connection.close()

    worker = threading.Thread(target=other_slots, daemon=True)
    worker.start()
    times: dict[str, list[float]] = {"healthy": [], "hanging": []}
    try:
        for round_index in range(args.rounds * 2):
            condition = "healthy" if round_index % 2 == 0 else "hanging"
            if condition == "hanging":
                other.hang()
            else:
                other.stop()
                other.start()
            time.sleep(0.2)
            for index in range(args.gangs):
                workflow_submit(user=user, pool_name=pool.name, spec=SPEC.format(name=f"r{round_index}x{index}"))
            started = time.perf_counter()
            placement_cycle_run(pool_id=pool.pk)
            for group in TaskGroup.objects.filter(workflow__pool=pool, status="INITIALIZING"):
                gang_dispatch(group_id=group.pk)
            times[condition].append(time.perf_counter() - started)
            healthy.pods_set_phase("Succeeded")
            pods_sync(pool_id=pool.pk)
    finally:
        stop.set()
        other.stop()
        healthy.stop()
    medians = {condition: statistics.median(values) for condition, values in times.items()}
    result = {"nodes": args.nodes, "gangs_per_round": args.gangs, "rounds": args.rounds,
              "healthy_s": round(medians["healthy"], 3), "hanging_s": round(medians["hanging"], 3),
              "ratio": round(medians["hanging"] / medians["healthy"], 2),
              "pods_created": len(healthy.creates), "pods_created_twice": sum(1 for n in healthy.creates.values()
                                                                              if n > 1)}
    print(json.dumps(result) if args.json else json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
