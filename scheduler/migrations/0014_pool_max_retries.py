from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('scheduler', '0013_pool_k8s_sync'),
    ]

    operations = [
        migrations.AddField(
            model_name='pool',
            name='max_retries',
            field=models.PositiveIntegerField(default=3, help_text="How many times a gang may be rescheduled by its tasks' RESCHEDULE exit action before the task fails (preemption does not count)."),
        ),
    ]
