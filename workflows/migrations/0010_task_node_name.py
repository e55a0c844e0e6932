# A task keeps the name of the node it was placed on, so that deleting the machine leaves its history readable.

from django.db import migrations, models
from django.db.models import OuterRef, Subquery


def backfill(apps, schema_editor):
    Task = apps.get_model("workflows", "Task")
    Node = apps.get_model("scheduler", "Node")
    names = Node.objects.filter(pk=OuterRef("node_id")).values("name")[:1]
    Task.objects.filter(node__isnull=False).update(node_name=Subquery(names))


class Migration(migrations.Migration):

    dependencies = [
        ("workflows", "0009_reservation_facts"),
        ("scheduler", "0010_reservation_node_name"),
    ]

    operations = [
        migrations.AddField(
            model_name="task",
            name="node_name",
            field=models.CharField(blank=True, default="", help_text="The placed node's name, kept when the node is "
                                   "deleted.", max_length=253),
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop, elidable=True),
    ]
