"""Pure placement solver (docs/design.md §5): ``solve(snapshot, group, policy)``, the pool's aggregated
:class:`DomainIndex` (built once per cycle, updated in place) and the input/output types.

Stdlib only: never import Django, DRF, Celery or ``scheduler.models`` here.
"""

from scheduler.placement.index import DomainIndex
from scheduler.placement.solver import solve
from scheduler.placement.types import (
    RESOURCE_NAMES,
    ClusterSnapshot,
    ConstraintReport,
    GroupRequest,
    NodeState,
    Placement,
    Policy,
    ReasonCode,
    Resources,
    TaskRequest,
    Unplaceable,
    Vec,
)

__all__ = [
    "RESOURCE_NAMES",
    "ClusterSnapshot",
    "ConstraintReport",
    "DomainIndex",
    "GroupRequest",
    "NodeState",
    "Placement",
    "Policy",
    "ReasonCode",
    "Resources",
    "TaskRequest",
    "Unplaceable",
    "Vec",
    "solve",
]
