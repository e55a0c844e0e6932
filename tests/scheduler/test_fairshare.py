"""Fair share over time, the pure part (docs/design.md §9): decayed usage and the order within a priority."""

from __future__ import annotations

import math

import pytest

from scheduler.fairshare import decayed_gpu_seconds, fair_order, usage_by_team

HOUR = 3600.0


@pytest.mark.parametrize(
    ("gpus", "start", "end", "now", "expected"),
    [
        # held one half-life up to now: h/ln2 * (1 - 1/2) GPU-seconds per GPU
        (1, 0.0, HOUR, HOUR, HOUR / math.log(2) * 0.5),
        # the same span one half-life earlier weighs half
        (1, 0.0, HOUR, 2 * HOUR, HOUR / math.log(2) * 0.25),
        # GPUs scale it
        (8, 0.0, HOUR, HOUR, 8 * HOUR / math.log(2) * 0.5),
        # still held: counted up to now
        (2, 0.0, None, HOUR, 2 * HOUR / math.log(2) * 0.5),
        # nothing after now, nothing of an empty span
        (1, 2 * HOUR, 3 * HOUR, HOUR, 0.0),
        (1, HOUR, HOUR, 2 * HOUR, 0.0),
    ],
)
def test_decayed_gpu_seconds(gpus, start, end, now, expected):
    assert decayed_gpu_seconds(gpus, start, end, now, HOUR) == pytest.approx(expected, rel=1e-12)


def test_a_short_span_now_counts_about_its_gpu_seconds():
    assert decayed_gpu_seconds(4, HOUR - 1, HOUR, HOUR, HOUR) == pytest.approx(4.0, rel=1e-3)


def test_the_half_life_must_be_positive():
    with pytest.raises(ValueError, match="half_life must be positive"):
        decayed_gpu_seconds(1, 0, 1, 1, 0)


def test_usage_adds_up_per_team():
    usage = usage_by_team([("a", 1, 0.0, HOUR), ("a", 1, 0.0, HOUR), ("b", 1, 0.0, HOUR)], HOUR, HOUR)
    assert usage == {"a": pytest.approx(HOUR / math.log(2)), "b": pytest.approx(HOUR / math.log(2) * 0.5)}


@pytest.mark.parametrize(
    ("queue", "usage", "expected"),
    [
        # within a priority the team that used less goes first; priorities stay apart
        ([(0, "a", "h1"), (1, "a", "n1"), (1, "b", "n2")], {"a": 10.0, "b": 1.0}, ["h1", "n2", "n1"]),
        # a HIGH gang of the heaviest team still comes before every NORMAL one
        ([(0, "a", "h1"), (1, "b", "n1")], {"a": 1e9}, ["h1", "n1"]),
        # ties and the same team keep the queue's order
        ([(1, "a", "x"), (1, "b", "y"), (1, "a", "z")], {"a": 5.0, "b": 5.0}, ["x", "y", "z"]),
        ([(1, "a", "x"), (1, "a", "y"), (1, "b", "z")], {"a": 5.0}, ["z", "x", "y"]),
        # a team without usage counts 0
        ([(2, "a", "x"), (2, None, "y")], {"a": 0.5}, ["y", "x"]),
        ([], {}, []),
    ],
)
def test_fair_order(queue, usage, expected):
    ordered = fair_order(queue, rank=lambda g: g[0], team=lambda g: g[1], usage=usage)
    assert [g[2] for g in ordered] == expected
