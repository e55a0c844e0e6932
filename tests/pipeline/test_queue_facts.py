"""The placement cycle's one aggregate read of its queue (docs/design.md §8): when a queued gang may be
past its queue timeout. No database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from workflows.scheduling.cycle.read import QueueFacts

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def facts(since: datetime | None, timeout_s: int | None) -> QueueFacts:
    return QueueFacts([1, 1, 1, 1], 0, since, timeout_s)


def test_no_gang_with_a_queue_timeout_is_never_due():
    assert facts(None, None).timeouts_maybe_due(NOW) is False


def test_a_gang_is_due_only_once_its_wait_exceeds_the_timeout():
    # given the earliest queued gang with a timeout waited exactly the shortest timeout, then a moment more
    exactly, beyond = facts(NOW - timedelta(seconds=60), 60), facts(NOW - timedelta(seconds=60, microseconds=1), 60)
    # then the first is not due (a gang fails once it waited longer than its timeout), the second may be
    assert (exactly.timeouts_maybe_due(NOW), beyond.timeouts_maybe_due(NOW)) == (False, True)
