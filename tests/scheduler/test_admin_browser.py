"""The pool hierarchy admin view in real Chromium (Playwright, sync API): log in through the admin
login form, open the pool, follow the Hierarchy link, check the content, no console errors, screenshot."""

from __future__ import annotations

import pytest

from scheduler.models import Node, Pool

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def demo_hierarchy(django_user_model, reserve) -> Pool:
    """The demo pool with some external usage, reservations and a cordoned node; a staff login.
    Set up before the browser starts, so that every ORM call runs outside Playwright's greenlet."""
    from django.core.management import call_command

    from tests.scheduler.conftest import EXAMPLES

    django_user_model.objects.create_user(username="ops", password="ops-password", is_staff=True, is_superuser=True)
    call_command("import_pool", str(EXAMPLES / "demo.yaml"), verbosity=0)
    Node.objects.filter(name__in=["demo-01", "demo-02"]).update(used_gpu=2)
    Node.objects.filter(name="demo-03").update(schedulable=False)
    for name, gpu in (("demo-01", 6), ("demo-05", 8), ("demo-06", 4)):
        reserve(Node.objects.get(name=name), gpu=gpu)
    return Pool.objects.get(name="demo")


def test_pool_hierarchy_in_chromium(live_server, demo_hierarchy, browser, screenshots):
    # given
    pool = demo_hierarchy
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    console_errors: list[str] = []

    def on_console(message) -> None:
        # The admin links the service's favicon too, so Chromium never asks for /favicon.ico.
        if message.type == "error":
            console_errors.append(f"{message.text} at {message.location.get('url')}")

    page.on("console", on_console)
    page.on("pageerror", lambda error: console_errors.append(str(error)))
    failed: list[str] = []
    page.on("response", lambda response: failed.append(response.url) if response.status >= 400 else None)

    # when: log in through the form, open the pool, follow the link
    page.goto(f"{live_server.url}/admin/login/?next=/admin/scheduler/pool/{pool.pk}/change/")
    page.fill("#id_username", "ops")
    page.fill("#id_password", "ops-password")
    page.click("input[type=submit]")
    page.wait_for_selector("text=Hierarchy")
    page.click("ul.object-tools >> text=Hierarchy")
    page.wait_for_selector("#pool-totals")
    page.click('details[data-key="rack"][data-value="rack-0001"] > summary')
    page.click('details[data-key="gpu-clique"][data-value="clique-rack-0001"] > summary')
    page.wait_for_selector("text=demo-01")

    # then
    assert page.url == f"{live_server.url}/admin/scheduler/pool/{pool.pk}/hierarchy/"
    assert page.title().startswith("Hierarchy of pool demo")
    totals = page.inner_text("#pool-totals")
    assert "32 nodes (31 schedulable)" in totals
    assert "GPU capacity 256" in totals and "used 4" in totals and "reserved 18" in totals
    assert "free 226" in totals  # 256 - 4 - 18 - 8 (cordoned demo-03)
    zone = page.inner_text('details[data-key="zone"][data-value="zone-1"] > summary')
    assert "16 nodes (15 schedulable)" in zone and "GPU 128 capacity" in zone and "18 reserved" in zone
    rack = page.inner_text('details[data-key="rack"][data-value="rack-0001"]')
    assert "demo-01" in rack and "cordoned" in rack
    assert page.locator('details[data-key="gpu-clique"]').count() == 8
    assert failed == []
    assert console_errors == []
    assert page.get_attribute('link[rel="icon"]', "href") == "/static/osmo/favicon.svg"
    shot = screenshots / "admin-pool-hierarchy.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000
