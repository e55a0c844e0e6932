"""Deep queues, fast: copies of a submitted workflow written in bulk (for ``bench.cycle`` and the scale
tests; ``workflow_submit`` would take minutes for 10,000 gangs). Copies are queued exactly as
submissions are: same groups, tasks, stored requests and signatures, one submission time each."""

from __future__ import annotations

from datetime import datetime, timedelta

from workflows.models import Task, TaskGroup, Workflow


def queue_copies(template: Workflow, copies: int, *, first: datetime, step: timedelta = timedelta(milliseconds=1),
                 name: str | None = None) -> list[Workflow]:
    """Write ``copies`` copies of ``template`` (named ``<name>-<n>``), submitted at ``first``,
    ``first + step``, ... Returns them."""
    name = name or template.name
    base = (Workflow.objects.filter(name=name).order_by("-seq").values_list("seq", flat=True).first() or 0) + 1
    groups = list(template.groups.order_by("position"))
    tasks = list(template.tasks.order_by("position"))
    skip = {"id", "workflow_id", "seq", "name", "submitted_at", "idempotency_key", "_state"}
    fields = {k: v for k, v in template.__dict__.items() if k not in skip}
    workflows = Workflow.objects.bulk_create(
        [Workflow(**fields, name=name, seq=base + i, workflow_id=f"{name}-{base + i}", submitted_at=first + step * i)
         for i in range(copies)]
    )
    group_fields = [{k: v for k, v in g.__dict__.items() if k not in ("id", "workflow_id", "_state")} for g in groups]
    new_groups = TaskGroup.objects.bulk_create(
        [TaskGroup(**values, workflow=w) for w in workflows for values in group_fields], batch_size=2000
    )
    group_of = {(g.workflow_id, g.name): g for g in new_groups}
    task_fields = [
        ({k: v for k, v in t.__dict__.items() if k not in ("id", "workflow_id", "group_id", "_state")},
         next(g.name for g in groups if g.pk == t.group_id))
        for t in tasks
    ]
    Task.objects.bulk_create(
        [Task(**values, workflow=w, group=group_of[(w.pk, group_name)]) for w in workflows
         for values, group_name in task_fields],
        batch_size=5000,
    )
    return workflows
