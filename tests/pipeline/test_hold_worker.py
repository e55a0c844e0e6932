"""The starvation guard's hold by expected end with real processes (docs/design.md §6): PostgreSQL,
Redis, a `celery worker` and `celery beat`."""

from __future__ import annotations

from datetime import UTC, timedelta

import pytest

from tests.conftest import wait_for
from tests.factories import make_node, make_pool
from tests.pipeline.helpers import assert_never_overcommitted, gang_spec
from workflows.models import Task, TaskGroup
from workflows.services import workflow_submit

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_worker_holds_the_rack_that_frees_first_for_a_starving_gang(user, celery_worker_factory, celery_beat,
                                                                      worker_env):
    # given two racks of two 4-GPU machines, a worker whose starvation threshold is one second, a gang
    # on a whole rack until its two-hour timeout and one on one machine of the other until 30 minutes
    pool = make_pool("hold-racks", keys=[("rack", "rack")], sim_task_seconds=600)
    for rack, prefix in (("r1", "a"), ("r2", "b")):
        for n in (1, 2):
            make_node(pool, f"{prefix}{n}", {"rack": rack}, gpu=4)
    celery_worker_factory("w1", env={**worker_env, "OSMO_STARVATION_SECONDS": "1"})

    def submit(name: str, tasks: int, key: str | None, timeout: str | None):
        extra = f"  timeout: {{exec_timeout: {timeout}}}\n" if timeout else ""
        return workflow_submit(user=user, pool_name=pool.name,
                               spec=gang_spec(name, tasks, 4, key=key, extra=extra))[0]

    long = submit("long", 2, "rack", "2h")
    wait_for(lambda: TaskGroup.objects.filter(workflow=long, started_at__isnull=False).exists(), timeout=60,
             message="the long gang running")
    short = submit("short", 1, None, "30m")
    wait_for(lambda: TaskGroup.objects.filter(workflow=short, started_at__isnull=False).exists(), timeout=60,
             message="the short gang running")
    short_rack = Task.objects.get(workflow=short).node.labels["rack"]
    long_racks = set(Task.objects.filter(workflow=long).values_list("node__labels__rack", flat=True))
    assert long_racks == {"r1", "r2"} - {short_rack}
    # when a whole-rack gang queues and starves
    big = submit("big", 2, "rack", None)
    group = TaskGroup.objects.get(workflow=big)
    reason = wait_for(lambda: (TaskGroup.objects.get(pk=group.pk).unschedulable_reason or {}).get("holding"),
                      timeout=60, message="the starving gang's hold")
    # then it holds the short gang's rack, free when that gang's timeout ends at the latest
    free_by = (TaskGroup.objects.get(workflow=short).started_at + timedelta(minutes=30)).astimezone(UTC)
    assert reason == {"where": f"rack {short_rack}, 2 machines", "free_by": free_by.isoformat(), "bounded": True}
    message = TaskGroup.objects.get(pk=group.pk).unschedulable_reason["message"]
    assert message.endswith(f"; holding rack {short_rack}, 2 machines, free by {free_by:%H:%M} UTC at the latest")
    assert TaskGroup.objects.get(pk=group.pk).status == "SCHEDULING"
    assert_never_overcommitted(pool)
