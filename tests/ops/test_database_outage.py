"""A database outage answers 503 with the error envelope, never a 500 page (docs/design.md §10), and
the service recovers by itself when PostgreSQL comes back."""

from __future__ import annotations

import httpx
import pytest
from django.db import connection
from prometheus_client.parser import text_string_to_metric_families

from tests.factories import make_api_key
from tests.ops.conftest import METRICS_AUTH, METRICS_TOKEN, free_port, production_env

ENVELOPE_503 = {
    "code": "database_unavailable",
    "message": "The database is unavailable; retry shortly.",
    "details": {},
}


@pytest.mark.django_db(transaction=True)
def test_an_unreachable_database_answers_503_with_the_envelope(gunicorn_server, worker_env, tmp_path):
    """Replays the PostgreSQL restart of the fault run: every request during the outage got a 500 HTML page."""
    # given the production server whose PostgreSQL does not answer (nothing listens on its port)
    env = production_env(worker_env, tmp_path / "data")
    env["DATABASE_URL"] = f"postgres://postgres@127.0.0.1:{free_port()}/osmo"
    env["OSMO_METRICS_TOKEN"] = METRICS_TOKEN
    server = gunicorn_server(env)
    headers = {"Authorization": "Token 0123456789abcdef0123456789abcdef01234567"}
    with httpx.Client(base_url=server.base_url, timeout=30) as client:
        # when the API, the pages, the admin and the probes are asked
        api = {
            "list": client.get("/api/workflows/", headers=headers),
            "submit": client.post("/api/workflows/", json={"pool": "demo", "spec": "workflow: {}"}, headers=headers),
            "pools": client.get("/api/pools/", headers=headers),
            "anonymous": client.get("/api/pools/"),
        }
        pages = {"dashboard": client.get("/"), "admin": client.get("/admin/login/")}
        healthz = client.get("/healthz")
        readyz = client.get("/readyz", headers={"Authorization": METRICS_AUTH})
        metrics = client.get("/metrics", headers={"Authorization": METRICS_AUTH})

    # then the API answers 503 with the envelope and Retry-After
    assert {name: response.status_code for name, response in api.items()} == dict.fromkeys(api, 503)
    assert {name: response.json() for name, response in api.items()} == dict.fromkeys(api, ENVELOPE_503)
    assert {name: response.headers["retry-after"] for name, response in api.items()} == dict.fromkeys(api, "5")
    # and the pages a short 503 page
    assert {name: response.status_code for name, response in pages.items()} == dict.fromkeys(pages, 503)
    assert {name: response.headers["content-type"] for name, response in pages.items()} == dict.fromkeys(
        pages, "text/html; charset=utf-8")
    assert all("The database is unavailable" in response.text for response in pages.values())
    # and the probes tell the process is alive but not ready, and why
    assert (healthz.status_code, healthz.json()) == (200, {"status": "ok"})
    assert readyz.status_code == 503
    database = readyz.json()["details"]["checks"]["database"]
    assert (database["ok"], database["error"]) == (False, "OperationalError")
    assert readyz.json()["details"]["checks"]["scheduler"]["error"] == "OperationalError"
    samples = {s.name: s.value for f in text_string_to_metric_families(metrics.text) for s in f.samples}
    assert (metrics.status_code, samples["osmo_database_up"]) == (200, 0)


@pytest.mark.django_db(transaction=True)
def test_requests_succeed_again_after_the_database_dropped_every_connection(gunicorn_server, worker_env, tmp_path,
                                                                          user):
    """Replays a PostgreSQL restart: the web process's persistent connections (CONN_MAX_AGE) die under it."""
    # given the production server, one request served (its connection is kept open)
    token = make_api_key(user)
    server = gunicorn_server(production_env(worker_env, tmp_path / "data"))
    headers = {"Authorization": f"Token {token}"}
    with httpx.Client(base_url=server.base_url, timeout=30) as client:
        assert client.get("/api/pools/", headers=headers).status_code == 200
        # when PostgreSQL terminates every other connection to the database, as a restart does
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                           "WHERE datname = current_database() AND pid <> pg_backend_pid()")
            assert cursor.fetchone()[0] >= 1
        after = [client.get("/api/pools/", headers=headers) for _ in range(4)]
    # then the next requests reconnect and succeed
    assert [response.status_code for response in after] == [200, 200, 200, 200]


@pytest.mark.django_db(transaction=True)
def test_an_unreadable_sqlite_database_answers_503_from_inside_the_api_views(gunicorn_server, worker_env, tmp_path):
    """The embedded default has no per-request transaction, so the failure surfaces inside the view
    (token authentication's query) and goes through the API's exception handler."""
    # given the server on a SQLite file that cannot be opened (its folder does not exist)
    env = production_env(worker_env, tmp_path / "data")
    env["DATABASE_URL"] = f"sqlite:///{tmp_path / 'missing' / 'osmo.sqlite3'}"
    env.pop("REDIS_URL")
    server = gunicorn_server(env)
    headers = {"Authorization": "Token 0123456789abcdef0123456789abcdef01234567"}
    with httpx.Client(base_url=server.base_url, timeout=30) as client:
        # when
        responses = [client.get("/api/pools/", headers=headers),
                     client.post("/api/workflows/", json={"pool": "demo", "spec": "workflow: {}"}, headers=headers)]
    # then
    assert [(r.status_code, r.json(), r.headers["retry-after"]) for r in responses] == [(503, ENVELOPE_503, "5")] * 2
    assert "api.database_unavailable" in server.log()


@pytest.mark.django_db(transaction=True)
def test_a_database_out_of_disk_answers_503_and_stores_nothing(gunicorn_server, worker_env, tmp_path, user):
    """Replays the fault run with PostgreSQL's volume full: every submission answered 500 `server_error`
    ("could not extend file ...: No space left on device", SQLSTATE 53100). The server raises that error
    here from a trigger, as it does when a table cannot grow."""
    # given a database whose workflows table cannot grow
    from tests.factories import make_node, make_pool
    from tests.pipeline.helpers import gang_spec
    from workflows.models import Workflow

    pool = make_pool("full", keys=[])
    make_node(pool, "n1", {}, gpu=8)
    token = make_api_key(user)
    with connection.cursor() as cursor:
        cursor.execute("CREATE FUNCTION disk_full() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                       "RAISE EXCEPTION USING ERRCODE = 'disk_full', MESSAGE = 'could not extend file "
                       "\"base/16384/16712\": No space left on device'; END $$")
        cursor.execute("CREATE TRIGGER disk_full BEFORE INSERT ON workflows_workflow "
                       "FOR EACH ROW EXECUTE FUNCTION disk_full()")
    server = gunicorn_server(production_env(worker_env, tmp_path / "data"))
    try:
        # when a workflow is submitted
        with httpx.Client(base_url=server.base_url, timeout=30) as client:
            response = client.post("/api/workflows/", json={"pool": "full", "spec": gang_spec("w", 1, 1, key=None)},
                                   headers={"Authorization": f"Token {token}"})
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP TRIGGER disk_full ON workflows_workflow")
            cursor.execute("DROP FUNCTION disk_full()")

    # then it is told to come back later, and nothing was stored
    assert (response.status_code, response.json(), response.headers["retry-after"]) == (503, ENVELOPE_503, "5")
    assert Workflow.objects.count() == 0
    assert "api.database_unavailable" in server.log()
