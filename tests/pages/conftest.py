"""Fixtures of the status page tests: a realistic scene on an NVL72-like pool, logins, and a real
Chromium driven by Playwright's sync API (Debian's /usr/bin/chromium; `playwright install` is never run)."""

from __future__ import annotations

import pytest


def big_clique_spec(tasks: int = 20) -> str:
    """A gang that needs ``tasks`` whole 4-GPU nodes in one gpu-clique: more than a rack holds (18)."""
    lines = ["workflow:", "  name: big-clique-job", "  groups:", "  - name: trainer", "    tasks:"]
    for index in range(1, tasks + 1):
        lines += [f"    - name: shard{index}", "      image: nvcr.io/nvidia/pytorch:24.03-py3",
                  '      command: ["torchrun"]']
        if index == 1:
            lines.append("      lead: true")
    lines += ["resources:", "  default:", "    gpu: 4", "    cpu: 16", "    memory: 64Gi", "    topology:",
              "    - key: gpu-clique", "      group: all-shards"]
    return "\n".join(lines) + "\n"


@pytest.fixture
def scene(django_user_model):
    """The NVL72-like pool (2 zones x 2 spines x 2 racks x 18 nodes of 4 GPUs) with:

    - some external usage on z2 nodes and one cordoned node;
    - bob's ``single-nvl72-rack-1``, placed (other usage);
    - alice's ``multiple-nvl72-same-zone-1`` (seed 003 example 3), placed by a placement cycle;
    - alice's ``big-clique-job-1``, waiting: no gpu-clique has 20 free nodes (a pool that grows:
      ``OSMO_REFUSE_NEVER_FITS`` off, so a gang larger than today's inventory is queued).
    """
    from django.test import override_settings

    from scheduler.models import Node
    from tests.factories import example_spec, make_nvl72_pool
    from workflows.scheduling.cycle import placement_cycle_run
    from workflows.services import workflow_submit

    alice = django_user_model.objects.create_user(username="alice", password="alice-password")
    bob = django_user_model.objects.create_user(username="bob", password="bob-password")
    staff = django_user_model.objects.create_user(username="root", password="root-password", is_staff=True)
    pool = make_nvl72_pool("nvl72", zones=2, spines=2, racks=2, nodes=18, description="GB200 NVL72 racks")
    Node.objects.filter(pool=pool, name__startswith="z2-s2-r2-n0").update(used_gpu=4)
    Node.objects.filter(pool=pool, name="z2-s1-r1-n18").update(schedulable=False)

    other, _ = workflow_submit(user=bob, pool_name="nvl72", spec=example_spec("single-nvl72-rack"))
    placement_cycle_run(pool_id=pool.pk)
    placed, _ = workflow_submit(user=alice, pool_name="nvl72", spec=example_spec("multiple-nvl72-same-zone"),
                                priority="HIGH")
    placement_cycle_run(pool_id=pool.pk)
    with override_settings(OSMO_REFUSE_NEVER_FITS=False):
        waiting, _ = workflow_submit(user=alice, pool_name="nvl72", spec=big_clique_spec())
    placement_cycle_run(pool_id=pool.pk)
    for workflow in (other, placed, waiting):
        workflow.refresh_from_db()
    return {"pool": pool, "alice": alice, "bob": bob, "staff": staff, "placed": placed, "waiting": waiting,
            "other": other}


@pytest.fixture
def alice_client(client, scene):
    client.force_login(scene["alice"])
    return client


class Console:
    """Console errors, uncaught page errors and failed responses of one page."""

    def __init__(self, page) -> None:
        self.errors: list[str] = []
        page.on("console", self._on_console)
        page.on("pageerror", lambda error: self.errors.append(f"pageerror: {error}"))
        page.on("response", lambda r: self.errors.append(f"HTTP {r.status} {r.url}") if r.status >= 400 else None)

    def _on_console(self, message) -> None:
        if message.type == "error":
            self.errors.append(f"console: {message.text} at {message.location.get('url')}")


@pytest.fixture
def page_factory(browser, live_server, settings):
    """``page_factory(username, password)``: a logged-in page (through the login form) and its console."""
    settings.OSMO_PAGE_REFRESH_MS = 400
    contexts = []

    def make(username: str, password: str, *, width: int = 1360, height: int = 900):
        context = browser.new_context(viewport={"width": width, "height": height})
        contexts.append(context)
        page = context.new_page()
        console = Console(page)
        page.goto(f"{live_server.url}/")
        assert "/accounts/login/" in page.url  # login required
        page.fill("#id_username", username)
        page.fill("#id_password", password)
        page.click("#login-form button[type=submit]")
        page.wait_for_selector("#status-counts")
        return page, console

    yield make
    for context in contexts:
        context.close()
    _wait_for_requests_in_flight()


def _wait_for_requests_in_flight(timeout: float = 10.0) -> None:
    """A live-refresh request the closed page sent may still run in the live server's thread; the
    database flush after the test (TRUNCATE) would deadlock with its transaction. Wait until no other
    session of the test database is inside a statement or transaction."""
    import time

    from django.db import connection

    if connection.vendor != "postgresql":
        return
    deadline = time.monotonic() + timeout
    with connection.cursor() as cursor:
        while time.monotonic() < deadline:
            cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                           "AND pid <> pg_backend_pid() AND state IN ('active', 'idle in transaction')")
            if cursor.fetchone()[0] == 0:
                return
            time.sleep(0.05)
