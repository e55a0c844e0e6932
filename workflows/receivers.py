"""What the workflows app does when the scheduler app reports a change (connected in
:meth:`workflows.apps.WorkflowsConfig.ready`): a pool whose inventory changed gets a placement cycle,
since what waits in its queue may fit now."""

from __future__ import annotations

from typing import Any

from scheduler.services.reservations import capacity_changed
from workflows import jobs


def placement_cycle_on_capacity(sender: Any, *, pool_id: int, **kwargs: Any) -> None:
    jobs.placement_cycle_request(pool_id)


def connect() -> None:
    capacity_changed.connect(placement_cycle_on_capacity, dispatch_uid="workflows.placement_cycle_on_capacity")
