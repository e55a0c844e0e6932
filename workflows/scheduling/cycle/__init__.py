"""The placement cycle (docs/design.md §6, §8): read the queue into a value
(:mod:`~workflows.scheduling.cycle.read`), walk it to a frozen decision
(:mod:`~workflows.scheduling.cycle.walk`, no database), apply the decision through the lifecycle
(:mod:`~workflows.scheduling.cycle.apply`); :mod:`~workflows.scheduling.cycle.run` runs the three
under the pool's lock."""

from workflows.scheduling.cycle.read import DatabaseSource, queue_read
from workflows.scheduling.cycle.run import CycleResult, placement_cycle_run
from workflows.scheduling.cycle.values import CycleInput, Decision, GangRow, QueuedGang, RunningGang
from workflows.scheduling.cycle.walk import Walk

__all__ = ["CycleInput", "CycleResult", "DatabaseSource", "Decision", "GangRow", "QueuedGang", "RunningGang",
           "Walk", "placement_cycle_run", "queue_read"]
