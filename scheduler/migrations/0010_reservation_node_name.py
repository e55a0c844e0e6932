# A reservation keeps its node's name, so that deleting the machine leaves its history readable.

from django.db import migrations, models
from django.db.models import OuterRef, Subquery


def backfill(apps, schema_editor):
    Reservation = apps.get_model("scheduler", "Reservation")
    Node = apps.get_model("scheduler", "Node")
    names = Node.objects.filter(pk=OuterRef("node_id")).values("name")[:1]
    Reservation.objects.filter(node__isnull=False).update(node_name=Subquery(names))


class Migration(migrations.Migration):

    dependencies = [
        ("scheduler", "0009_reservation_facts"),
    ]

    operations = [
        migrations.AddField(
            model_name="reservation",
            name="node_name",
            field=models.CharField(blank=True, default="", help_text="The node's name, kept when the node is deleted.",
                                   max_length=253),
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop, elidable=True),
    ]
