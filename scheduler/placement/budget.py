"""The work budget of one solve and the search's verdicts (docs/design.md §5).

Every search of a solve (the domain phase, the packing, the CP-SAT adapter) spends from one
:class:`Budget`; running out raises :class:`OutOfBudget`, which the search turns into ``UNDECIDED``,
never ``INFEASIBLE``. A bounded packing check that runs past its own step limit raises
:class:`GiveUp` instead (no verdict: the caller asks CP-SAT). Pure: stdlib only.
"""

from __future__ import annotations

import time

INFEASIBLE = "infeasible"  # proven: no placement exists
UNDECIDED = "undecided"  # the budget (or the wall-clock ceiling) ran out first

CLOCK_EVERY = 512  # steps between two reads of the clock
HOST_CHECK_STEPS = 2_000  # depth-first steps of one nogood check (:meth:`GangSearch.can_host`)
PACK_DFS_STEPS = 5_000  # depth-first steps on one component before the exact packer decides it


class OutOfBudget(Exception):
    """Raised inside the search when the step budget (or the wall-clock ceiling) is exhausted."""


class GiveUp(Exception):
    """Raised by a bounded packing check that ran past its own step limit (no verdict)."""


class Budget:
    """A work counter shared by the searches of one solve.

    Work is counted evenly: a candidate domain tried, a domain scanned for candidates or for room, a
    machine class tried and, per machine placement, one step per task shape (the counts it updates),
    so a step costs about the same time whatever the gang's size or number of shapes. ``deadline``
    (``time.monotonic()`` value) is a wall-clock ceiling checked every :data:`CLOCK_EVERY` steps; it only
    ever turns a result into "undecided", never into "unschedulable"."""

    __slots__ = ("deadline", "left", "timed_out", "used", "_tick")

    def __init__(self, steps: int, deadline: float | None = None) -> None:
        self.left = steps
        self.used = 0
        self.deadline = deadline
        self.timed_out = False
        self._tick = 0

    def spend(self, n: int = 1) -> None:
        self.left -= n
        self.used += n
        if self.left < 0:
            raise OutOfBudget
        if self.deadline is not None:
            self._tick += n
            if self._tick >= CLOCK_EVERY:
                self._tick = 0
                if time.monotonic() > self.deadline:
                    self.timed_out = True
                    raise OutOfBudget
