"""Reservations carry the facts of their holder that the cluster side needs (its task's id, team and
preemptibility) instead of a foreign key into the workflows app. The column ``task_id`` stays as it
is (its unique index too); only the foreign key constraint goes. The workflows app's migration
``0009_reservation_facts`` fills team and preemptibility of existing rows."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('auth', '0012_alter_user_first_name_max_length'),
        ('scheduler', '0008_grants_protect_their_team_and_user'),
    ]

    operations = [
        # Drop the database's foreign key constraint (the column and its unique index stay)...
        migrations.AlterField(
            model_name='reservation',
            name='task',
            field=models.OneToOneField(db_constraint=False, on_delete=django.db.models.deletion.CASCADE,
                                       related_name='reservation', to='workflows.task'),
        ),
        # ... then, in the models' state only, the relation becomes the plain integer column it is.
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveField(model_name='reservation', name='task'),
                migrations.AddField(
                    model_name='reservation',
                    name='task_id',
                    field=models.BigIntegerField(help_text="The holding task (workflows' Task id).", unique=True),
                    preserve_default=False,
                ),
            ],
            database_operations=[],
        ),
        migrations.AddField(
            model_name='reservation',
            name='team',
            field=models.ForeignKey(blank=True, help_text='The team whose quota this holds against, unless preemptible.',
                                    null=True, on_delete=django.db.models.deletion.SET_NULL,
                                    related_name='reservations', to='auth.group'),
        ),
        migrations.AddField(
            model_name='reservation',
            name='preemptible',
            field=models.BooleanField(default=False, help_text='LOW work: may be preempted, and counts against no '
                                                               'quota (docs/design.md §9).'),
        ),
    ]
