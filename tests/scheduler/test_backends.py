"""Backends as objects (docs/pools.md, "Backends"): made by ``manage.py backend_set`` and the admin, their
kubeconfig sealed and never shown, read-only in the API; pools name them; bad input refused whole; the
migration from the schema before backends."""

from __future__ import annotations

import logging

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from osmo.errors import ValidationFailedError
from scheduler.models import Backend, Pool
from scheduler.services import inventory_import_text
from scheduler.services.backends import backend_client, backend_set, kubeconfig_open
from tests.dispatch.fake_cluster import kubeconfig_for

pytestmark = pytest.mark.django_db

TOKEN = "s3cr3t-token-of-cluster-a"


def _kubeconfig(tmp_path, name: str = "a", token: str = TOKEN, url: str = "https://10.0.0.1:6443"):
    path = tmp_path / f"{name}.yaml"
    path.write_text(kubeconfig_for(url, name=name, token=token))
    return path


def _run(*args: str) -> str:
    from io import StringIO

    out = StringIO()
    call_command("backend_set", *args, stdout=out)
    return out.getvalue()


def test_backend_set_seals_the_kubeconfig_and_a_new_one_makes_a_new_client(tmp_path, caplog):
    # given a kubeconfig file
    first = _kubeconfig(tmp_path)
    # when it is stored, then replaced by another
    with caplog.at_level(logging.DEBUG):
        said = _run("cluster-a", "--kind", "kubernetes", "--kubeconfig", str(first), "--namespace", "jobs")
    backend = Backend.objects.get(name="cluster-a")
    client = backend_client(backend)
    second = _kubeconfig(tmp_path, name="b", token="another-token")
    _run("cluster-a", "--kubeconfig", str(second), "--context", "b")
    rotated = Backend.objects.get(name="cluster-a")
    # then the stored text is a ciphertext that opens to the file, and logs never held the token
    assert said.strip() == "backend cluster-a (kubernetes) saved, connection version 1"
    assert TOKEN not in backend.kubeconfig_sealed and backend.kubeconfig_sealed
    assert kubeconfig_open(backend) == first.read_text()
    assert (backend.namespace, backend.kind, backend.status) == ("jobs", "kubernetes", "ONLINE")
    assert TOKEN not in caplog.text
    # and the rotation moved the version on: the next call builds a new client, without a restart
    assert (rotated.kubeconfig_version, rotated.context) == (2, "b")
    assert kubeconfig_open(rotated) == second.read_text()
    assert backend_client(rotated) is not client
    assert backend_client(rotated) is backend_client(Backend.objects.get(name="cluster-a"))


@pytest.mark.parametrize(("args", "message"), [
    (["--kubeconfig", "/nonexistent/kubeconfig"], "--kubeconfig: cannot read /nonexistent/kubeconfig"),
    (["--kubeconfig", "{garbage}"], "backend 'cluster-a' not saved: kubeconfig: the kubeconfig has no contexts"),
    (["--kubeconfig", "{valid}", "--context", "nope"],
     "backend 'cluster-a' not saved: context: the kubeconfig has no context 'nope' (it has: a)"),
    ([], "backend 'cluster-a' not saved: kubeconfig: a kubernetes backend other than the built-in one needs a "
         "kubeconfig or in-cluster mode"),
])
def test_backend_set_refuses_bad_input_and_stores_nothing(tmp_path, args, message):
    # given an unreadable, a non-kubeconfig and a valid file
    garbage = tmp_path / "garbage.yaml"
    garbage.write_text("just: [a, list]\n")
    valid = _kubeconfig(tmp_path)
    args = [arg.format(garbage=garbage, valid=valid) for arg in args]
    # when / then: one clear line, nothing stored
    with pytest.raises(CommandError) as refused:
        _run("cluster-a", *args)
    assert str(refused.value).startswith(message)
    assert not Backend.objects.filter(name="cluster-a").exists()


def test_the_built_in_kubernetes_backend_keeps_reading_the_environment(tmp_path):
    with pytest.raises(CommandError) as refused:
        _run("kubernetes", "--kubeconfig", str(_kubeconfig(tmp_path)))
    assert "the built-in backend 'kubernetes' reads the worker processes' environment" in str(refused.value)
    assert Backend.objects.get(name="kubernetes").kubeconfig_sealed == ""


def test_a_pool_document_names_its_backend_and_an_unknown_one_is_refused(tmp_path, staff_client):
    # given a backend cluster-a
    backend_set(name="cluster-a", kubeconfig=_kubeconfig(tmp_path).read_text())
    document = "pool: {{name: p, backend: {backend}}}\ntopology_keys: [{{key: rack, label: rack}}]\nnodes: []\n"
    # when a document names it, and another names a backend that does not exist
    inventory_import_text(document.format(backend="cluster-a"))
    refused = staff_client.generic("POST", "/api/pools/import/", document.format(backend="cluster-z").replace(
        "name: p", "name: q"), content_type="application/yaml")
    # then the first pool is on cluster-a (kind kubernetes), the second is refused naming the field
    pool = Pool.objects.get(name="p")
    assert (pool.backend_name, pool.backend) == ("cluster-a", "kubernetes")
    assert refused.status_code == 400
    assert refused.json()["details"]["errors"] == [
        {"path": "pool.backend", "message": "must be one of: simulated, kubernetes, local, cluster-a"}]
    assert not Pool.objects.filter(name="q").exists()
    # and the export names the backend, so it imports back unchanged
    exported = staff_client.get("/api/pools/p/inventory/").json()
    assert exported["pool"]["backend"] == "cluster-a"


def test_the_pools_api_moves_a_pool_to_a_backend_by_name_and_refuses_an_unknown_one(tmp_path, staff_client):
    backend_set(name="cluster-a", kubeconfig=_kubeconfig(tmp_path).read_text())
    staff_client.post("/api/pools/", {"name": "p", "topology_keys": [{"key": "rack", "label": "rack"}]},
                      format="json")
    moved = staff_client.patch("/api/pools/p/", {"backend": "cluster-a"}, format="json")
    unknown = staff_client.patch("/api/pools/p/", {"backend": "nowhere"}, format="json")
    assert moved.status_code == 200, moved.json()
    assert (moved.json()["backend"], moved.json()["backend_kind"], moved.json()["backend_status"]) == (
        "cluster-a", "kubernetes", "ONLINE")
    assert unknown.status_code == 400
    assert unknown.json()["details"]["errors"][0]["path"] == "backend"
    assert Pool.objects.get(name="p").backend_name == "cluster-a"


def test_a_backend_with_pools_cannot_be_deleted(tmp_path, staff_user):
    # given a backend with a pool
    backend_set(name="cluster-a", kubeconfig=_kubeconfig(tmp_path).read_text())
    Pool.objects.create(name="p", backend_ref=Backend.objects.get(name="cluster-a"))
    admin = Client()
    admin.force_login(staff_user)
    pk = Backend.objects.get(name="cluster-a").pk
    # when the command and the admin try to delete it
    with pytest.raises(CommandError) as refused:
        _run("cluster-a", "--delete")
    page = admin.post(f"/admin/scheduler/backend/{pk}/delete/", {"post": "yes"})
    # then both refuse and it stays
    assert str(refused.value) == "backend 'cluster-a' still has pools (p); move or delete them first"
    assert page.status_code == 200 and "would require deleting the following protected" in page.content.decode()
    assert Backend.objects.filter(name="cluster-a").exists()
    # and without pools it goes
    Pool.objects.filter(name="p").delete()
    assert _run("cluster-a", "--delete").strip() == "backend cluster-a deleted"


def test_the_admin_takes_a_kubeconfig_once_and_never_shows_it_back(tmp_path, staff_user):
    admin = Client()
    admin.force_login(staff_user)
    fields = {"kind": "kubernetes", "description": "", "status": "ONLINE", "context": "", "namespace": "",
              "scheduler_name": "", "node_conditions": "[]", "tolerated_taints": "[]", "dashboard_links": "{}"}
    # when a backend is added with a pasted kubeconfig, then the same name again, then a bad context
    added = admin.post("/admin/scheduler/backend/add/", {"name": "cluster-a", **fields,
                                                          "kubeconfig_text": kubeconfig_for("https://x", name="a",
                                                                                            token=TOKEN)})
    again = admin.post("/admin/scheduler/backend/add/", {"name": "cluster-a", **fields,
                                                          "kubeconfig_text": kubeconfig_for("https://y", name="a")})
    backend = Backend.objects.get(name="cluster-a")
    bad_context = admin.post(f"/admin/scheduler/backend/{backend.pk}/change/", {**fields, "context": "nope"})
    page = admin.get(f"/admin/scheduler/backend/{backend.pk}/change/").content.decode()
    # then it is stored once, sealed; the change page says it is stored and never shows it
    assert added.status_code == 302
    assert "Backend with this Name already exists." in again.content.decode()
    assert "the kubeconfig has no context &#x27;nope&#x27;" in bad_context.content.decode()
    assert Backend.objects.filter(name="cluster-a").count() == 1
    assert Backend.objects.get(name="cluster-a").context == ""
    assert TOKEN not in page and "kubeconfig stored, encrypted (version 1)" in page
    assert kubeconfig_open(backend).startswith("apiVersion: v1")


def test_the_backends_api_lists_status_pools_and_nodes_never_the_kubeconfig(tmp_path, user_client):
    backend_set(name="cluster-a", kubeconfig=_kubeconfig(tmp_path).read_text(), description="GPU cloud")
    pool = Pool.objects.create(name="p", backend_ref=Backend.objects.get(name="cluster-a"))
    from tests.factories import make_node

    make_node(pool, "n1", {})
    answer = user_client.get("/api/backends/")
    one = user_client.get("/api/backends/cluster-a/")
    assert answer.status_code == 200
    rows = {row["name"]: row for row in answer.json()["results"]}
    assert {"simulated", "kubernetes", "local", "cluster-a"} <= set(rows)
    row = rows["cluster-a"]
    assert (row["kind"], row["status"], row["pools"], row["nodes"], row["connection"], row["description"]) == (
        "kubernetes", "ONLINE", ["p"], 1, "kubeconfig", "GPU cloud")
    assert TOKEN not in answer.content.decode() and "sealed" not in answer.content.decode()
    assert one.json()["name"] == "cluster-a"
    assert user_client.post("/api/backends/", {"name": "x"}, format="json").status_code in (403, 405)


def test_a_connection_change_builds_a_new_client_in_every_process(tmp_path):
    """The cache key carries the connection version and a digest of what is stored: a backend deleted and
    made again under its name (version 1 again) does not get the client of the one before."""
    backend_set(name="cluster-a", kubeconfig=_kubeconfig(tmp_path, url="https://one:6443").read_text())
    first = backend_client(Backend.objects.get(name="cluster-a"))
    Backend.objects.filter(name="cluster-a").delete()
    backend_set(name="cluster-a", kubeconfig=_kubeconfig(tmp_path, url="https://two:6443").read_text())
    second = backend_client(Backend.objects.get(name="cluster-a"))
    assert second is not first
    assert second.core.api_client.configuration.host == "https://two:6443"  # type: ignore[union-attr]


def test_a_bad_kubeconfig_through_the_service_names_the_field():
    with pytest.raises(ValidationFailedError) as refused:
        backend_set(name="cluster-a", kubeconfig="apiVersion: v1\ncontexts: [{name: a, context: {cluster: x}}]\n")
    assert refused.value.details["errors"][0]["path"] == "kubeconfig"
    assert not Backend.objects.filter(name="cluster-a").exists()


@pytest.mark.django_db(transaction=True)
def test_the_migration_gives_every_existing_pool_the_built_in_backend_of_its_kind():
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    # given pools of today's schema (before backends), one per kind
    after = MigrationExecutor(connection).loader.graph.leaf_nodes()
    before = [("scheduler", "0018_pool_max_retries_bounded"), *[node for node in after if node[0] != "scheduler"]]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    old = executor.loader.project_state(before).apps
    for name, kind in (("sim", "simulated"), ("k8s", "kubernetes"), ("here", "local")):
        old.get_model("scheduler", "Pool").objects.create(name=name, backend=kind)
    # when
    executor = MigrationExecutor(connection)
    executor.migrate(after)
    # then
    new = executor.loader.project_state(after).apps
    pools = dict(new.get_model("scheduler", "Pool").objects.values_list("name", "backend_ref__name"))
    kinds = dict(new.get_model("scheduler", "Backend").objects.values_list("name", "kind"))
    assert pools == {"sim": "simulated", "k8s": "kubernetes", "here": "local"}
    assert kinds == {"simulated": "simulated", "kubernetes": "kubernetes", "local": "local"}


def test_backends_rotate_seals_every_kubeconfig_with_the_first_key(tmp_path, settings):
    from cryptography.fernet import Fernet

    # given a backend sealed with the current key
    backend_set(name="cluster-a", kubeconfig=_kubeconfig(tmp_path).read_text())
    before = Backend.objects.get(name="cluster-a").kubeconfig_sealed
    old_keys = list(settings.OSMO_CREDENTIALS_KEYS)
    new_key = Fernet.generate_key().decode()
    # when a new key goes first and the backends are rotated
    settings.OSMO_CREDENTIALS_KEYS = [new_key, *old_keys]
    said = _run_command("backends_rotate")
    # then the kubeconfig opens with the new key alone
    settings.OSMO_CREDENTIALS_KEYS = [new_key]
    after = Backend.objects.get(name="cluster-a")
    assert said.strip() == "1 backend kubeconfig(s) encrypted with the first key"
    assert after.kubeconfig_sealed != before
    assert kubeconfig_open(after) == _kubeconfig(tmp_path).read_text()


def _run_command(name: str) -> str:
    from io import StringIO

    out = StringIO()
    call_command(name, stdout=out)
    return out.getvalue()
