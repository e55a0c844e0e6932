"""Fair share over time (docs/design.md §9), pure: within a priority, the team that used less of the
pool recently goes first. A team's usage is its GPU-seconds with an exponential decay of half-life
``h``: a GPU held over ``[start, end]`` counts ``integral of 2 ** (-(now - t) / h) dt`` over that span,
so an hour of use ``h`` ago weighs half an hour of use now. No framework here; the cycle and
``bench.simulate --teams`` feed it intervals."""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import TypeVar

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)
Team = Hashable


def decayed_gpu_seconds(gpus: float, start: float, end: float | None, now: float, half_life: float) -> float:
    """The decayed GPU-seconds of ``gpus`` held over ``[start, end]`` (``end`` None: still held), as
    seen at ``now`` (times in seconds; the part after ``now`` does not count)."""
    if half_life <= 0:
        raise ValueError("half_life must be positive")
    end = now if end is None else min(end, now)
    if end <= start:
        return 0.0
    rate = math.log(2) / half_life
    return gpus * (math.exp(-rate * (now - end)) - math.exp(-rate * (now - start))) / rate


def usage_by_team(intervals: Iterable[tuple[Team, float, float, float | None]], now: float,
                  half_life: float) -> dict[Team, float]:
    """Each team's decayed usage from ``(team, gpus, start, end)`` intervals (a reservation each)."""
    usage: dict[Team, float] = {}
    for team, gpus, start, end in intervals:
        usage[team] = usage.get(team, 0.0) + decayed_gpu_seconds(gpus, start, end, now, half_life)
    return usage


def fair_order(queue: Sequence[T], rank: Callable[[T], int], team: Callable[[T], K],
               usage: Mapping[K, float]) -> list[T]:
    """``queue`` (already in priority-then-submission order) reordered so that within each priority
    the gangs of teams with less usage come first; ties, and gangs of the same team, keep their order
    (a stable sort). A team without usage counts 0."""
    position = {id(item): i for i, item in enumerate(queue)}
    return sorted(queue, key=lambda item: (rank(item), usage.get(team(item), 0.0), position[id(item)]))
