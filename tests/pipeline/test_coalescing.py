"""Placement-cycle requests of one pool are coalesced through a Redis mark (workflows.jobs): a burst
of submissions sends one cycle, started OSMO_PLACEMENT_COALESCE_SECONDS later; once that cycle has
started (it clears the mark), the next request sends a new one."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.test import override_settings

from tests.pipeline.helpers import gang_spec
from workflows import jobs
from workflows.services import workflow_submit

pytestmark = pytest.mark.django_db


@pytest.fixture
def sent(monkeypatch):
    calls: list[tuple[str, float | None, dict]] = []
    monkeypatch.setattr(jobs, "_send", lambda name, countdown=None, **kw: calls.append((name, countdown, kw)))
    return calls


def cycles(calls: list) -> list[tuple[float | None, dict]]:
    return [(countdown, kw) for name, countdown, kw in calls if name == jobs.PLACEMENT_CYCLE]


@pytest.mark.skipif(not settings.REDIS_URL, reason="the coalescing mark lives in Redis")
@override_settings(OSMO_PLACEMENT_COALESCE_SECONDS=0.25)
def test_a_burst_of_submissions_sends_one_delayed_cycle_until_it_starts(user, racks, sent,
                                                                        django_capture_on_commit_callbacks):
    jobs.placement_pending_mark(racks.pk, clear=True)
    # when five workflows are submitted
    for index in range(5):
        with django_capture_on_commit_callbacks(execute=True):
            workflow_submit(user=user, pool_name=racks.name, spec=gang_spec(f"burst{index}", 1, 1, key=None))
    # then one cycle was sent, to start after the window
    assert cycles(sent) == [(0.25, {"pool_id": racks.pk})]
    # when that cycle starts (it clears the mark) and another workflow comes
    jobs.placement_pending_mark(racks.pk, clear=True)
    with django_capture_on_commit_callbacks(execute=True):
        workflow_submit(user=user, pool_name=racks.name, spec=gang_spec("after", 1, 1, key=None))
    # then a new cycle is sent for it
    assert cycles(sent) == [(0.25, {"pool_id": racks.pk})] * 2
    jobs.placement_pending_mark(racks.pk, clear=True)


@pytest.mark.skipif(not settings.REDIS_URL, reason="the coalescing mark lives in Redis")
@override_settings(OSMO_PLACEMENT_COALESCE_SECONDS=0)
def test_a_zero_window_sends_the_cycle_at_once(user, racks, sent, django_capture_on_commit_callbacks):
    jobs.placement_pending_mark(racks.pk, clear=True)
    for index in range(2):
        with django_capture_on_commit_callbacks(execute=True):
            workflow_submit(user=user, pool_name=racks.name, spec=gang_spec(f"now{index}", 1, 1, key=None))
    assert cycles(sent) == [(None, {"pool_id": racks.pk})]
    jobs.placement_pending_mark(racks.pk, clear=True)
