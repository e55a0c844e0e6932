"""The placement cycle's state gets the workflows app's own table, one row per pool that has walked
(it was the scheduler's ``Pool.cycle_state``). The rows are copied and the old column dropped by
whichever of this migration and the scheduler's 0022 runs second (``scheduler/migrations/_cycle_state_move.py``:
neither depends on the other); this one needs only what the workflows app already depended on."""

import django.db.models.deletion
from django.db import migrations, models

from scheduler.migrations._cycle_state_move import move_back, move_out


class Migration(migrations.Migration):

    dependencies = [
        ('scheduler', '0018_pool_max_retries_bounded'),
        ('workflows', '0022_labels_tags_policy'),
    ]

    operations = [
        migrations.CreateModel(
            name='PoolCycleState',
            fields=[
                ('pool', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name='cycle', serialize=False, to='scheduler.pool')),
                ('state', models.JSONField(help_text='What the last placement cycle saw and where it stopped.')),
            ],
        ),
        migrations.RunPython(move_out, move_back),
    ]
