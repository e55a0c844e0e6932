"""Writing reservation rows with the facts of their holders (docs/design.md §8, §9).

The cluster side needs three facts of the work holding capacity, and keeps them on its own rows
rather than reading the workflows app's tables: the task's id (to release the row when the task
ends), the team (quotas count the GPUs a team's work holds) and whether the work is preemptible
(LOW: it may be evicted, and counts against no quota). Whoever places tasks gives them here.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from osmo.bulk import bulk_insert
from scheduler.models import Reservation


class ReservationFacts(NamedTuple):
    """One placed task's hold on its node: what it holds there, and who holds it."""

    task_id: int
    pool_id: int
    node_id: int
    node_name: str  # kept when the node is deleted
    gpu: int
    cpu_millis: int
    memory_bytes: int
    storage_bytes: int
    team_id: int | None
    preemptible: bool


def reservations_insert(facts: Iterable[ReservationFacts]) -> int:
    """Hold the tasks' requests on their nodes, one row each (one INSERT per thousand rows). A task
    holds at most one reservation (unique ``task_id``): the caller drops an earlier one first.
    Returns how many rows were written."""
    rows = [Reservation(**fact._asdict()) for fact in facts]
    if rows:
        bulk_insert(Reservation, rows)
    return len(rows)
