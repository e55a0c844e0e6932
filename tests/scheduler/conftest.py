"""Fixtures for the pool/topology/node tests: small pools built through the services, and
reservations held by real workflow tasks (nothing creates them yet but the tests)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "pools"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
GIB = 1024**3
KEYS = [
    {"key": "zone", "label": "topology.kubernetes.io/zone"},
    {"key": "rack", "label": "topology.kubernetes.io/rack"},
]


def node_entry(name: str, zone: str | None, rack: str | None, *, gpu: int = 8, used_gpu: int = 0, **extra) -> dict:
    labels = {}
    if zone is not None:
        labels["topology.kubernetes.io/zone"] = zone
    if rack is not None:
        labels["topology.kubernetes.io/rack"] = rack
    entry = {"name": name, "labels": labels, "capacity": {"gpu": gpu, "cpu": 32, "memory": "256Gi", "storage": "1Ti"}}
    if used_gpu:
        entry["allocated"] = {"gpu": used_gpu}
    entry.update(extra)
    return entry


@pytest.fixture
def small_pool(db):
    """Pool ``small``: zone a (racks r1, r2), zone b (rack r1: same name, another rack), one unlabelled node.

    ```
    a/r1: a1 (8 GPU, 2 used)  a2 (8)
    a/r2: a3 (8, cordoned)
    b/r1: b1 (4)
    -   : loose (8, no labels)
    ```
    """
    from scheduler.models import Pool
    from scheduler.services import inventory_import, inventory_parse

    document = {
        "pool": {"name": "small", "description": "test pool"},
        "topology_keys": KEYS,
        "nodes": [
            node_entry("a1", "a", "r1", used_gpu=2),
            node_entry("a2", "a", "r1"),
            node_entry("a3", "a", "r2", schedulable=False),
            node_entry("b1", "b", "r1", gpu=4),
            node_entry("loose", None, None),
        ],
    }
    inventory_import(inventory_parse(document))
    return Pool.objects.get(name="small")


_counter = itertools.count(1)


@pytest.fixture
def reserve(db, django_user_model):
    """``reserve(node, gpu=..., released=False)``: a Reservation held by a fresh workflow task."""
    from django.utils import timezone

    from scheduler.models import Reservation
    from workflows.models import Task, TaskGroup, Workflow

    owner = django_user_model.objects.create_user(username=f"owner-{next(_counter)}")

    def _reserve(node, *, gpu: int = 0, cpu_millis: int = 0, memory_bytes: int = 0, released: bool = False):
        n = next(_counter)
        workflow = Workflow.objects.create(
            workflow_id=f"wf-{n}", name=f"wf{n}", seq=1, pool=node.pool, submitted_by=owner
        )
        group = TaskGroup.objects.create(workflow=workflow, name="g")
        task = Task.objects.create(workflow=workflow, group=group, name="t", gpu=gpu, node=node)
        return Reservation.objects.create(
            task_id=task.pk,
            node=node,
            pool=node.pool,
            gpu=gpu,
            cpu_millis=cpu_millis,
            memory_bytes=memory_bytes,
            released_at=timezone.now() if released else None,
        )

    return _reserve


@pytest.fixture
def generated_pool(db):
    """``generated_pool(name, racks=...)``: an NVL72-shaped pool of ``2 x 2 x racks x 18`` nodes."""
    from scheduler.models import Pool
    from scheduler.services import PoolShape, inventory_import, pool_generate_inventory

    def _make(name: str, *, racks: int = 2, occupancy: float = 0.25) -> Pool:
        shape = PoolShape(zones=2, spines_per_zone=2, racks_per_spine=racks, occupancy=occupancy, seed=3)
        inventory_import(pool_generate_inventory(name=name, shape=shape))
        return Pool.objects.get(name=name)

    return _make


def alias_bomb_inventory() -> str:
    """An inventory whose node list is a YAML alias bomb: 9 levels of 10 aliases each (90 aliases, under
    the alias limit of 100) that expand to 10**10 values. Lines 1-2 are ``pool`` and ``nodes``; level
    ``k`` is on line ``k + 3``."""
    lines = ["pool: {name: bomb}", "nodes:", "- &n0 [" + ", ".join(["x"] * 10) + "]"]
    for level in range(1, 10):
        lines.append(f"- &n{level} [" + ", ".join([f"*n{level - 1}"] * 10) + "]")
    return "\n".join(lines) + "\n"
