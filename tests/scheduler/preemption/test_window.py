"""The eviction window (docs/design.md §9): with a minimum runtime, NORMAL work evicts only LOW gangs
that have run at most twice it; HIGH work any past it."""

from __future__ import annotations

from scheduler.placement import Resources
from scheduler.preemption import Candidate, eviction_window, within_window


def _candidate(key: str, started: float) -> Candidate:
    return Candidate(key, (("m1", Resources(gpu=4)),), False, started)


def test_normal_work_evicts_within_twice_the_minimum_runtime_and_high_work_without_bound():
    # given a minimum runtime of 600 seconds
    # when the windows are asked for
    normal, high = eviction_window(True, 600.0), eviction_window(False, 600.0)
    # then NORMAL work's is 1,200 seconds and HIGH work has none
    assert (normal, high) == (1200.0, None)


def test_without_a_minimum_runtime_there_is_no_window():
    # given no minimum runtime
    # when NORMAL work's window is asked for
    window = eviction_window(True, 0.0)
    # then there is none
    assert window is None


def test_only_the_candidates_that_have_run_at_most_the_window_remain():
    # given candidates that have run 1,200 and 1,201 seconds at 10,000
    candidates = [_candidate("young", 8800.0), _candidate("old", 8799.0)]
    # when they are narrowed to a window of 1,200 seconds, and to none
    narrowed, all_of_them = within_window(candidates, 10_000.0, 1200.0), within_window(candidates, 10_000.0, None)
    # then the one that has run 1,200 remains, and without a window both do
    assert [c.key for c in narrowed] == ["young"]
    assert [c.key for c in all_of_them] == ["young", "old"]
