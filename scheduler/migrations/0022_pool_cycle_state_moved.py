"""``Pool.cycle_state`` leaves the model: the workflows app keeps the cycle's state in its own table
(``workflows.PoolCycleState``, its migration 0023). The rows are copied and the column dropped by
whichever of the two migrations runs second (``_cycle_state_move``)."""

from django.db import migrations

from scheduler.migrations._cycle_state_move import move_back, move_out


class Migration(migrations.Migration):

    dependencies = [
        ('scheduler', '0021_pool_policies_defaulted'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.RemoveField(model_name='pool', name='cycle_state')],
            database_operations=[migrations.RunPython(move_out, move_back)],
        ),
    ]
