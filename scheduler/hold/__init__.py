"""The starvation hold (docs/design.md §6, §9), pure: when the gangs holding a pool are expected to end
and where a starving gang can start soonest (``ends``), and the holds one walk keeps, on disjoint
machines, taken off the walk's index while a gang they bind is decided (``holds``). The walk of
:mod:`workflows.scheduling.cycle.walk` calls them; what a held gang is told is in
:mod:`workflows.scheduling.cycle.reasons`."""

from scheduler.hold.ends import (
    NEVER,
    Holder,
    HoldsCapacity,
    SoonestHold,
    expected_end,
    may_backfill,
    released,
    soonest_hold,
    where,
)
from scheduler.hold.holds import Hold, Holds

__all__ = ["NEVER", "Hold", "Holder", "Holds", "HoldsCapacity", "SoonestHold", "expected_end", "may_backfill",
           "released", "soonest_hold", "where"]
