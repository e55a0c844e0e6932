"""The task runtime (docs/runtime.md): downloads a task's inputs, waits at its group's barrier, runs its
command, uploads its outputs, and exits with OSMO's codes. Pure: no Django; it runs inside the task's
sandbox (local backend) or pod (Kubernetes), reading one :class:`TaskPlan`."""

from runtime.plan import (
    BarrierSpec,
    CheckpointSpec,
    FileSpec,
    InputSpec,
    OutputSpec,
    PlanInvalidError,
    TaskPlan,
    duration_seconds,
    plan_from_osmo_task,
)
from runtime.run import Result, run

__all__ = ["BarrierSpec", "CheckpointSpec", "FileSpec", "InputSpec", "OutputSpec", "PlanInvalidError", "Result",
           "TaskPlan", "duration_seconds", "plan_from_osmo_task", "run"]
