"""Pure placement solver (docs/design.md §5): ``solve(snapshot, gang, policy)``, the pool's aggregated
:class:`DomainIndex` (built once per cycle, updated in place) and the input/output types.

Modules, one job each (an import-linter contract keeps them in this order, each on the ones below):
``solver`` (:func:`solve`: strict attempt, verdict, preferred constraints relaxed), ``explain`` (why a
gang is unschedulable), ``search`` (:class:`~scheduler.placement.search.GangSearch`: the domain phase),
``packing`` (tasks onto machines), ``exact`` (the CP-SAT adapter), ``machines`` (the machine state a
packing changes, the best-fit order), ``plan`` (a constraint tree as domain steps), ``index`` (the
aggregated domain index), ``records`` (the named values they pass), ``budget`` (the work budget and
verdicts), ``types`` (inputs, outputs, :data:`Vec`).

Pure: the standard library, the resource table (:mod:`scheduler.resources`), the tree types
(:mod:`topology`) and OR-Tools' CP-SAT, which ``exact`` imports on first use. Never import Django,
DRF, Celery or ``scheduler.models`` here (an import-linter contract checks it).
"""

from scheduler.placement.index import DomainIndex
from scheduler.placement.solver import solve
from scheduler.placement.types import (
    RESOURCE_NAMES,
    ClusterSnapshot,
    ConstraintReport,
    GangRequest,
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
    "GangRequest",
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
