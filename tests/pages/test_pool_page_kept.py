"""The pool page of a pool too big to draw machines keeps its domain totals between requests and
updates them from the node rows written since (scheduler/reads/domain_totals.py): after every kind of node
write the page is the page built from scratch."""

from __future__ import annotations

import re

import pytest

from scheduler.models import Node, Reservation
from workflows.models import Task

pytestmark = pytest.mark.django_db

CSRF = re.compile(r'name="csrfmiddlewaretoken" value="[^"]+"')


def _page(client) -> str:
    response = client.get("/pools/nvl72/")
    assert response.status_code == 200
    return CSRF.sub("", response.content.decode())


def _from_scratch(client) -> str:
    """The page with nothing kept in the process."""
    from pages.viewmodels import pools
    from scheduler.reads import domain_totals, domains

    for cache in (domain_totals._kept, domains._tree_cache, pools._occupancy_cache, pools._node_order_cache,
                  pools._node_order_by_names):
        cache.clear()
    return _page(client)


def _rack_head(page: str, path: str) -> str:
    return re.search(rf'data-domain="{path}" data-key="rack">\s*<div class="dom-head heat-\d" title="([^"]+)"',
                     page).group(1)


def test_the_kept_pool_page_is_the_page_built_from_scratch_after_node_writes(alice_client, scene, monkeypatch):
    from pages.viewmodels import pools

    # given: the 144-node pool drawn without machines (its totals kept), read once
    monkeypatch.setattr(pools, "NODE_CELL_LIMIT", 100)
    pool = scene["pool"]
    # (one of alice's: the page names the workflows she may see only)
    alices = Task.objects.filter(workflow__submitted_by=scene["alice"]).values("pk")
    holder = Reservation.objects.filter(pool=pool, released_at__isnull=True, task_id__in=alices).select_related(
        "node").order_by("pk")[0]
    holder_id = Task.objects.get(pk=holder.task_id).workflow.workflow_id
    moved = holder.node
    first = _page(alice_client)
    pages = []

    # when: free capacity and a cordon change, a node holding a reservation moves to another rack,
    # a node is added and one is removed; the page is read after each
    Node.objects.filter(pool=pool, name="z1-s1-r2-n01").update(used_gpu=4)
    Node.objects.filter(pool=pool, name="z1-s1-r2-n02").update(schedulable=False)
    pages.append(_page(alice_client))
    moved.labels = {"topology.kubernetes.io/zone": "z1", "topology.kubernetes.io/spine": "s1",
                    "topology.kubernetes.io/rack": "r9", "nvidia.com/gpu-clique": "z1-s1-r9"}
    moved.save()
    pages.append(_page(alice_client))
    Node.objects.create(pool=pool, name="z2-s2-r2-n99", gpu=4, cpu_millis=144_000, memory_bytes=2**30,
                        labels={"topology.kubernetes.io/zone": "z2", "topology.kubernetes.io/spine": "s2",
                                "topology.kubernetes.io/rack": "r9", "nvidia.com/gpu-clique": "z2-s2-r9"})
    Node.objects.filter(pool=pool, name="z2-s2-r1-n18").delete()
    pages.append(_page(alice_client))
    scratch = _from_scratch(alice_client)

    # then: the last page kept is the page built from scratch, and each page shows its write
    assert pages[-1] == scratch
    assert 'class="cell heat-' not in first  # no node cells: the kept-totals path
    assert _rack_head(first, "z1/s1/r2") == "18 nodes · 72 GPUs · 0 in use · 72 free"
    assert _rack_head(pages[0], "z1/s1/r2") == "18 nodes · 72 GPUs · 4 in use · 64 free"
    # the moved node's rack and its reservation's occupant
    assert _rack_head(pages[1], "z1/s1/r9") == f"1 nodes · 4 GPUs · {holder.gpu} in use · {4 - holder.gpu} free"
    assert re.search(rf'data-domain="z1/s1/r9"(?:(?!data-domain=).)*data-occupant="{holder_id}"', pages[1], re.S)
    assert _rack_head(pages[2], "z2/s2/r1").startswith("17 nodes · 68 GPUs")
    assert _rack_head(pages[2], "z2/s2/r9") == "1 nodes · 4 GPUs · 0 in use · 4 free"
