from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('scheduler', '0015_pool_min_runtime'),
    ]

    operations = [
        migrations.AlterField(
            model_name='pool',
            name='max_retries',
            field=models.PositiveIntegerField(default=3, help_text="How many times a gang may be rescheduled (its tasks' RESCHEDULE exit action, a pod lost to the infrastructure) before the task fails (preemption does not count)."),
        ),
    ]
