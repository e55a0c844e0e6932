"""Preemption input and output types (docs/design.md §9). Pure: stdlib and the solver's types only."""

from __future__ import annotations

from dataclasses import dataclass

from scheduler.placement.types import Placement, Resources


@dataclass(frozen=True, slots=True)
class Candidate:
    """A running, preemptible (LOW) gang. ``holdings`` are (machine name, resources it holds there); a
    gang may hold several entries on one machine. ``borrowing``: it runs beyond its team's quota, so it
    is reclaimed first. ``started``: start time in epoch seconds (larger is more recent)."""

    key: str  # opaque id (the caller's group id)
    holdings: tuple[tuple[str, Resources], ...]
    borrowing: bool
    started: float

    @property
    def gpu(self) -> int:
        """GPUs the gang holds in total (what evicting it costs)."""
        return sum(res.gpu for _name, res in self.holdings)


@dataclass(frozen=True, slots=True)
class VictimChoice:
    """The gangs to evict (candidate keys, sorted) and where the preemptor goes once they are gone.
    ``explored`` counts the questions the choice took, for the benchmark (solver calls and capacity
    answers; with a shared budget, every search's); ``work_lost``: the victims' GPU-seconds run so
    far (0 when the search was given no time)."""

    victims: tuple[str, ...]
    placement: Placement
    gpu_evicted: int
    explored: int
    work_lost: float = 0.0
