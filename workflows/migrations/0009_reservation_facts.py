"""Fill the holder facts of existing reservations (scheduler ``0009_reservation_facts``) from
their tasks' workflows: the team, and whether the work is LOW (preemptible, outside quotas). Here,
in the workflows app, because it reads the workflows app's tables."""

from django.db import migrations
from django.db.models import Exists, OuterRef, Subquery


def forwards(apps, schema_editor):
    Reservation = apps.get_model('scheduler', 'Reservation')
    Task = apps.get_model('workflows', 'Task')
    tasks = Task.objects.filter(pk=OuterRef('task_id'))
    Reservation.objects.update(
        team_id=Subquery(tasks.values('workflow__team_id')[:1]),
        preemptible=Exists(tasks.filter(workflow__priority='LOW')),
    )


class Migration(migrations.Migration):

    dependencies = [
        ('scheduler', '0009_reservation_facts'),
        ('workflows', '0008_gang_requests'),
    ]

    operations = [
        migrations.RunPython(forwards, migrations.RunPython.noop),
    ]
