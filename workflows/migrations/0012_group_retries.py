from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('workflows', '0011_task_barrier_pod'),
    ]

    operations = [
        migrations.AddField(
            model_name='taskgroup',
            name='retries',
            field=models.PositiveIntegerField(default=0, help_text="How many times an exit action rescheduled this gang (its retry id; the pool's max_retries bounds it)."),
        ),
    ]
