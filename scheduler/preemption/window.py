"""Which LOW gangs a preemptor may evict, by how long they have run (docs/design.md §9, the
eviction window). Pure: stdlib and the preemption types only.

With a pool's minimum runtime M, no LOW gang that has run less than M is evicted (the candidates are
read that way). NORMAL work evicts only LOW gangs that have run at most 2 M besides: evicting a gang
throws away its work so far, and with durations that say nothing about what remains (exponential, or
unknown) what has run long is no nearer its end, so its eviction only costs more. HIGH work evicts
any LOW gang past M. Without a minimum runtime nothing changes.
"""

from __future__ import annotations

from collections.abc import Sequence

from scheduler.preemption.types import Candidate

#: NORMAL work evicts LOW gangs that have run at most this many minimum runtimes.
NORMAL_WINDOW_RUNTIMES = 2


def eviction_window(normal: bool, min_runtime: float) -> float | None:
    """How long a LOW gang may have run at most to be evicted by a NORMAL (``normal``) or HIGH
    preemptor, in the unit of ``min_runtime``; None: no bound (HIGH work, or no minimum runtime)."""
    if not normal or min_runtime <= 0:
        return None
    return NORMAL_WINDOW_RUNTIMES * min_runtime


def within_window(candidates: Sequence[Candidate], now: float, window: float | None) -> list[Candidate]:
    """The candidates that have run at most ``window`` at ``now`` (their ``started`` clock); all of
    them when ``window`` is None."""
    if window is None:
        return list(candidates)
    return [candidate for candidate in candidates if now - candidate.started <= window]
