from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('workflows', '0005_workflow_idempotency_hash'),
    ]

    operations = [
        migrations.AlterField(
            model_name='workflow',
            name='spec_text',
            field=models.TextField(blank=True, help_text='The spec as rendered (templates filled in).'),
        ),
        migrations.AddField(
            model_name='workflow',
            name='template_values',
            field=models.JSONField(blank=True, default=dict, help_text="The values the spec template was rendered with: default-values, then the submission's."),
        ),
    ]
