"""``GET /api/workflows/?label=KEY=SELECTOR`` over 100,000 workflows against an unfiltered page.

The goal (docs/benchmarks.md, "Label selectors"): a page selected by labels answers in at most twice
the time of an unfiltered page of the same list, because each selector reads an index (exact values:
the GIN index of ``Workflow.labels``; wildcards: first the distinct values they match, read off the
known values' index, ``workflows.labels._glob_values``, or their pattern on the label rows), not a scan
of every workflow's labels; the count of one selector reads the label rows alone (they carry the owner).

100,000 workflows are written in bulk (one pool, one owner), each with four labels drawn to cover
the selectivities a listing meets: ``team`` (20 values, 5% each), ``project`` (``sim_*`` 40%,
``hil_*`` 10%, ``real_*`` 50%, 500 numbered values each), ``run`` (unique), and ``exp=rare`` on 1%.
Each request goes through the whole WSGI stack in this process (``django.test.Client``: middleware,
DRF, the filter, the count and the page of 20, the answer) under the production settings against
PostgreSQL; the median of ``--repeat`` requests is reported per selector, with its ratio to the
unfiltered page measured in the same run.

``--jsonb`` also measures the alternative design at the queryset level: the workflow's own ``labels``
JSONB column with a GIN index (``jsonb_path_ops``, made here and dropped after), exact values by
containment (``@>``) and wildcards by a regular expression on ``labels->>key``.

    source scripts/services.sh; services_start
    PYTHONPATH=$PWD .venv/bin/python -m bench.labels --json
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import time
from typing import Any

from bench.inprocess import django_production_setup

SELECTORS = [
    ("exact, 5%", ["team=team-07"]),
    ("exact, 1 row", ["run=r77777"]),
    ("exact, 1%", ["exp=rare"]),
    ("prefix wildcard, 40%", ["project=sim_*"]),
    ("prefix wildcard, 0.2%", ["project=hil_12*"]),
    ("alternatives", ["project=(sim_1|hil_2)"]),
    ("alternatives of wildcards, 50%", ["project=(sim_*|hil_*)"]),
    ("two selectors", ["team=team-07", "project=hil_*"]),
    ("leading wildcard, 0.2%", ["project=*_7"]),
]


def labels_of(index: int) -> dict[str, str]:
    family = "sim" if index % 10 < 4 else "hil" if index % 10 == 4 else "real"
    labels = {"team": f"team-{index % 20:02d}", "project": f"{family}_{(index // 10) % 500}", "run": f"r{index}"}
    if index % 100 == 42:
        labels["exp"] = "rare"
    return labels


def populate(count: int) -> Any:
    """The pool, the owner, and ``count`` labelled workflows with their label rows (idempotent)."""
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from scheduler.models import Pool
    from workflows.models import LabelValue, Workflow, WorkflowLabel, workflow_global_id

    call_command("migrate", "--no-input", verbosity=0)
    user, _ = get_user_model().objects.get_or_create(username="bench-labels")
    pool, _ = Pool.objects.get_or_create(name="bench-labels")
    have = Workflow.objects.filter(submitted_by=user).count()
    batch = 10_000
    for start in range(have, count, batch):
        rows = []
        for index in range(start, min(start + batch, count)):
            workflow_id = f"labelled-{index + 1}"
            labels = labels_of(index)
            rows.append(Workflow(workflow_id=workflow_id, global_id=workflow_global_id(workflow_id, user.pk),
                                 name="labelled", seq=index + 1, pool=pool, submitted_by=user, status="COMPLETED",
                                 labels=labels, pod_labels=labels))
        created = Workflow.objects.bulk_create(rows)
        WorkflowLabel.objects.bulk_create([WorkflowLabel(workflow=w, submitted_by=user, key=key, value=value)
                                           for w in created for key, value in w.labels.items()], batch_size=20_000)
        LabelValue.objects.bulk_create([LabelValue(key=key, value=value) for key, value in
                                        {item for w in created for item in w.labels.items()}],
                                       batch_size=20_000, ignore_conflicts=True)
    from django.db import connection

    with connection.cursor() as cursor:  # as autovacuum leaves a table that is read more than written
        cursor.execute("VACUUM ANALYZE workflows_workflow")
        cursor.execute("VACUUM ANALYZE workflows_workflowlabel")
        cursor.execute("VACUUM ANALYZE workflows_labelvalue")
    return user


def timed(call: Any, repeat: int) -> float:
    """The median of ``repeat`` calls, in milliseconds (after one untimed call)."""
    call()
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def http_run(user: Any, repeat: int) -> list[dict[str, Any]]:
    from django.test import Client

    client = Client(HTTP_HOST="127.0.0.1")
    client.force_login(user)

    def get(params: dict[str, Any]) -> Any:
        def call() -> None:
            response = client.get("/api/workflows/", {"limit": 20, **params})
            assert response.status_code == 200, response.content
        return call

    baseline = timed(get({}), repeat)
    rows = [{"case": "unfiltered page", "selectors": [], "ms": round(baseline, 2), "ratio": 1.0}]
    for case, selectors in SELECTORS:
        count = client.get("/api/workflows/", {"limit": 1, "label": selectors}).json()["count"]
        ms = timed(get({"label": selectors}), repeat)
        rows.append({"case": case, "selectors": selectors, "matches": count, "ms": round(ms, 2),
                     "ratio": round(ms / baseline, 2)})
    return rows


def jsonb_run(user: Any, repeat: int) -> list[dict[str, Any]]:
    """The same selections on the JSONB column with a GIN index (count and first page, as the list does)."""
    from django.db import connection
    from django.db.models import Q

    from workflows.models import Workflow
    from workflows.spec.labels import selector_parse

    def condition(text: str) -> Q:
        selector = selector_parse(text)
        found = Q(pk__in=[])
        for pattern in selector.patterns:
            if "*" in pattern:
                regex = "^" + ".*".join(re.escape(part) for part in pattern.split("*")) + "$"
                found |= Q(**{f"labels__{selector.key}__regex": regex})
            else:
                found |= Q(labels__contains={selector.key: pattern})
        return found

    with connection.cursor() as cursor:
        cursor.execute("CREATE INDEX IF NOT EXISTS bench_labels_gin ON workflows_workflow USING gin "
                       "(labels jsonb_path_ops)")
        cursor.execute("ANALYZE workflows_workflow")
    try:
        base = Workflow.objects.filter(submitted_by=user).order_by("-submitted_at", "-pk")

        def page(queryset: Any) -> Any:
            return lambda: (queryset.count(), list(queryset.values_list("pk", flat=True)[:20]))

        baseline = timed(page(base), repeat)
        rows = [{"case": "unfiltered page", "ms": round(baseline, 2), "ratio": 1.0}]
        for case, selectors in SELECTORS:
            queryset = base
            for text in selectors:
                queryset = queryset.filter(condition(text))
            ms = timed(page(queryset), repeat)
            rows.append({"case": case, "selectors": selectors, "ms": round(ms, 2), "ratio": round(ms / baseline, 2)})
        return rows
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP INDEX IF EXISTS bench_labels_gin")


def explain(user: Any, selectors: list[str]) -> None:
    """Print each query of one list request with PostgreSQL's plan and timing (EXPLAIN ANALYZE)."""
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    client = Client(HTTP_HOST="127.0.0.1")
    client.force_login(user)
    with CaptureQueriesContext(connection) as queries:
        client.get("/api/workflows/", {"limit": 20, "label": selectors})
    with connection.cursor() as cursor:
        for query in queries.captured_queries:
            sql = query["sql"]
            if not sql.lstrip().upper().startswith("SELECT"):
                continue
            cursor.execute(f"EXPLAIN ANALYZE {sql}")
            print(sql[:300])
            print("\n".join(f"    {row[0]}" for row in cursor.fetchall()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workflows", type=int, default=100_000, help="workflows listed (default 100,000)")
    parser.add_argument("--repeat", type=int, default=15, help="requests per case; the median is reported")
    parser.add_argument("--jsonb", action="store_true", help="also measure a GIN-indexed JSONB column")
    parser.add_argument("--json", action="store_true", help="print the result as one JSON line")
    parser.add_argument("--explain", nargs="*", metavar="SELECTOR", help="print the plans of one request instead")
    args = parser.parse_args()
    from cryptography.fernet import Fernet

    django_production_setup("labels", OSMO_THROTTLE_USER="1000000/min",
                            OSMO_CREDENTIALS_KEYS=Fernet.generate_key().decode())
    user = populate(args.workflows)
    if args.explain is not None:
        explain(user, args.explain)
        return
    result: dict[str, Any] = {"workflows": args.workflows, "label_table": http_run(user, args.repeat)}
    if args.jsonb:
        result["jsonb_gin"] = jsonb_run(user, args.repeat)
    result["worst_ratio"] = max(row["ratio"] for row in result["label_table"])
    if args.json:
        print(json.dumps(result))
        return
    for name in ("label_table", "jsonb_gin"):
        for row in result.get(name, []):
            print(f"{name:12} {row['case']:32} {row.get('matches', ''):>7} {row['ms']:8.2f} ms  x{row['ratio']}")


if __name__ == "__main__":
    main()
