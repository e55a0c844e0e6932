"""Gangs stored before their task requests and signature were (``TaskGroup.task_requests`` empty or
``signature`` blank) get both from their task rows, as a submission stores them now: the placement
cycle reads a gang's request from its group row alone (docs/design.md §8)."""

from django.db import migrations

from scheduler.placement import GangRequest, Resources, TaskRequest
from scheduler.placement.signature import gang_signature
from workflows.spec import tree_from_json

BATCH = 500


def gang_requests_fill(apps, schema_editor):
    TaskGroup = apps.get_model("workflows", "TaskGroup")
    Task = apps.get_model("workflows", "Task")
    pending = list(TaskGroup.objects.filter(task_requests__isnull=True).values_list("pk", flat=True))
    pending += list(TaskGroup.objects.filter(signature="").exclude(pk__in=pending).values_list("pk", flat=True))
    for start in range(0, len(pending), BATCH):
        groups = list(TaskGroup.objects.filter(pk__in=pending[start:start + BATCH]).only("pk", "name",
                                                                                         "constraint_tree"))
        tasks: dict[int, list] = {}
        for task in Task.objects.filter(group_id__in=[g.pk for g in groups]).order_by("group_id", "position"):
            tasks.setdefault(task.group_id, []).append(task)
        for group in groups:
            try:
                tree = tree_from_json(group.constraint_tree)
            except (KeyError, ValueError, TypeError):  # no tree stored: nothing a cycle could place either
                continue
            request = GangRequest(
                name=group.name, tree=tree,
                tasks=tuple(TaskRequest(name=t.name, resources=Resources(gpu=t.gpu, cpu=t.cpu_millis,
                                                                         memory=t.memory_bytes,
                                                                         storage=t.storage_bytes),
                                        nodes_excluded=frozenset(t.nodes_excluded or ()))
                            for t in tasks.get(group.pk, [])),
            )
            group.task_requests = [[t.name, *t.resources.as_tuple(), sorted(t.nodes_excluded)] for t in request.tasks]
            group.signature = gang_signature(request)
        TaskGroup.objects.bulk_update(groups, ["task_requests", "signature"])


class Migration(migrations.Migration):

    dependencies = [
        ("workflows", "0007_teams_and_preemption"),
    ]

    operations = [
        migrations.RunPython(gang_requests_fill, migrations.RunPython.noop),
    ]
