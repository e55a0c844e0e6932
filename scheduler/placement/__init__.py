"""Pure placement solver (design §5): ``solve(snapshot, group, policy)`` and its input/output types.

Stdlib only: never import Django, DRF, Celery or ``scheduler.models`` here.
"""

from scheduler.placement.solver import solve
from scheduler.placement.types import (
    RESOURCE_NAMES,
    ClusterSnapshot,
    ConstraintReport,
    GroupRequest,
    NodeState,
    Placement,
    Policy,
    Resources,
    TaskRequest,
    Unplaceable,
)

__all__ = [
    "RESOURCE_NAMES",
    "ClusterSnapshot",
    "ConstraintReport",
    "GroupRequest",
    "NodeState",
    "Placement",
    "Policy",
    "Resources",
    "TaskRequest",
    "Unplaceable",
    "solve",
]
