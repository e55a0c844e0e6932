from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('workflows', '0013_statuses'),
    ]

    operations = [
        migrations.AlterField(
            model_name='taskgroup',
            name='retries',
            field=models.PositiveIntegerField(default=0, help_text="How many times this gang was rescheduled by an exit action or because the infrastructure lost one of its pods (its retry id; the pool's max_retries bounds it)."),
        ),
        migrations.AddField(
            model_name='taskgroup',
            name='requeues',
            field=models.PositiveIntegerField(default=0, help_text="How many times the cluster refused to schedule this gang's pods and it was queued again (OSMO_K8S_UNSCHEDULABLE_REQUEUES bounds it)."),
        ),
    ]
