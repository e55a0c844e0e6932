"""Deep queues, fast: copies of a submitted workflow written in bulk (for ``bench.cycle`` and the scale
tests; ``workflow_submit`` would take minutes for 10,000 gangs). Copies are queued exactly as
submissions are: same groups, tasks, stored requests and signatures, one submission time each."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.db.models import Model

from workflows.models import Task, TaskGroup, Workflow, workflow_global_id


def _copied(row: Model, skip: set[str]) -> dict[str, Any]:
    """The values of ``row``'s columns, by attribute name, but those in ``skip``."""
    return {field.attname: getattr(row, field.attname) for field in row._meta.concrete_fields
            if field.attname not in skip}


def queue_copies(template: Workflow, copies: int, *, first: datetime, step: timedelta = timedelta(milliseconds=1),
                 name: str | None = None) -> list[Workflow]:
    """Write ``copies`` copies of ``template`` (named ``<name>-<n>``), submitted at ``first``,
    ``first + step``, ... Returns them."""
    name = name or template.name
    base = (Workflow.objects.filter(name=name).order_by("-seq").values_list("seq", flat=True).first() or 0) + 1
    groups = list(template.groups.order_by("position"))
    tasks = list(template.tasks.order_by("position"))
    fields = _copied(template, {"id", "workflow_id", "global_id", "seq", "name", "submitted_at", "idempotency_key"})
    workflows = Workflow.objects.bulk_create(
        [Workflow(**fields, name=name, seq=base + i, workflow_id=f"{name}-{base + i}",
                  global_id=workflow_global_id(f"{name}-{base + i}", template.submitted_by_id),
                  submitted_at=first + step * i)
         for i in range(copies)]
    )
    group_fields = [_copied(g, {"id", "workflow_id"}) for g in groups]
    new_groups = TaskGroup.objects.bulk_create(
        [TaskGroup(**values, workflow=w) for w in workflows for values in group_fields], batch_size=2000
    )
    group_of = {(g.workflow_id, g.name): g for g in new_groups}
    task_fields = [
        (_copied(t, {"id", "workflow_id", "group_id"}),
         next(g.name for g in groups if g.pk == t.group_id))
        for t in tasks
    ]
    Task.objects.bulk_create(
        [Task(**values, workflow=w, group=group_of[(w.pk, group_name)]) for w in workflows
         for values, group_name in task_fields],
        batch_size=5000,
    )
    return workflows


def queue_mix(templates: list[Workflow], *, first: datetime, step: timedelta = timedelta(milliseconds=1)) -> None:
    """Queue one copy of ``templates[i]`` per position ``i``, submitted at ``first + i * step``, in
    three bulk inserts (workflows, groups, tasks)."""
    groups_of = {t.pk: list(t.groups.order_by("position")) for t in {t.pk: t for t in templates}.values()}
    tasks_of = {t.pk: list(t.tasks.order_by("position")) for t in {t.pk: t for t in templates}.values()}
    seqs: dict[str, int] = {}
    rows = []
    skip = {"id", "workflow_id", "global_id", "seq", "submitted_at", "idempotency_key"}
    for i, template in enumerate(templates):
        seq = seqs.get(template.name)
        if seq is None:
            latest = Workflow.objects.filter(name=template.name).order_by("-seq").values_list("seq", flat=True)
            seq = latest.first() or 0
        seq += 1
        seqs[template.name] = seq
        fields = _copied(template, skip)
        rows.append(Workflow(**fields, seq=seq, workflow_id=f"{template.name}-{seq}",
                             global_id=workflow_global_id(f"{template.name}-{seq}", template.submitted_by_id),
                             submitted_at=first + step * i))
    workflows = Workflow.objects.bulk_create(rows, batch_size=2000)
    new_groups = []
    for template, workflow in zip(templates, workflows, strict=True):
        for g in groups_of[template.pk]:
            values = _copied(g, {"id", "workflow_id"})
            new_groups.append(TaskGroup(**values, workflow=workflow))
    TaskGroup.objects.bulk_create(new_groups, batch_size=2000)
    group_of = {(g.workflow_id, g.name): g for g in new_groups}
    names = {g.pk: g.name for groups in groups_of.values() for g in groups}
    new_tasks = []
    for template, workflow in zip(templates, workflows, strict=True):
        for t in tasks_of[template.pk]:
            values = _copied(t, {"id", "workflow_id", "group_id"})
            new_tasks.append(Task(**values, workflow=workflow, group=group_of[(workflow.pk, names[t.group_id])]))
    Task.objects.bulk_create(new_tasks, batch_size=5000)
