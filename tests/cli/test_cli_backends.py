"""``osmo backend list`` against a live server: OSMO's name, description and status, with kind, last
contact, pools and nodes; a pool on an OFFLINE backend says so in ``osmo pool list``."""

from __future__ import annotations

import json

import pytest
from django.utils import timezone

from scheduler.models import Backend, Pool
from scheduler.services.backends import backend_set
from tests.dispatch.fake_cluster import kubeconfig_for
from tests.factories import make_node

pytestmark = pytest.mark.django_db(transaction=True)


def test_backend_list_shows_each_backend_with_its_status_pools_and_nodes(osmo, nvl72):
    # given a Kubernetes backend gone OFFLINE with one pool of two nodes, beside the built-in ones
    backend_set(name="cluster-a", kubeconfig=kubeconfig_for("https://10.0.0.1:6443", token="hidden-token"),
                description="GPU cloud")
    since = timezone.now().replace(microsecond=0)
    Backend.objects.filter(name="cluster-a").update(status="OFFLINE", offline_since=since,
                                                    last_error="sync of pool pa: ConnectionRefusedError")
    pool = Pool.objects.create(name="pa", backend_ref=Backend.objects.get(name="cluster-a"))
    make_node(pool, "n1", {})
    make_node(pool, "n2", {})
    # when
    listed = osmo("backend", "list")
    as_json = osmo("backend", "list", "--json")
    pools = osmo("pool", "list")
    # then
    assert listed.exit_code == 0, listed.output
    lines = listed.stdout.splitlines()
    assert lines[0].split() == ["NAME", "KIND", "STATUS", "LAST", "CONTACT", "POOLS", "NODES", "DESCRIPTION"]
    rows = {line.split()[0]: line for line in lines[1:]}
    assert rows["cluster-a"].split()[:4] == ["cluster-a", "kubernetes", "OFFLINE", "since"]
    assert rows["cluster-a"].split()[-5:] == ["never", "pa", "2", "GPU", "cloud"]
    assert rows["simulated"].split()[:3] == ["simulated", "simulated", "ONLINE"]
    assert "nvl72" in rows["simulated"]
    assert lines[-1] == "cluster-a: sync of pool pa: ConnectionRefusedError"
    assert "hidden-token" not in as_json.stdout
    assert {row["name"] for row in json.loads(as_json.stdout)["results"]} >= {"cluster-a", "simulated"}
    assert "cluster-a (OFFLINE)" in pools.stdout
