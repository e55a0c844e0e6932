from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("scheduler", "0012_local_backend")]

    operations = [
        migrations.AddField(
            model_name="pool",
            name="k8s_synced_at",
            field=models.DateTimeField(
                blank=True, editable=False, null=True,
                help_text="When the periodic Kubernetes sync last read this pool's nodes and other pods.",
            ),
        ),
        migrations.AddField(
            model_name="pool",
            name="k8s_sync",
            field=models.JSONField(
                blank=True, editable=False, null=True,
                help_text="What the last Kubernetes sync changed (nodes created/updated/cordoned, foreign pods "
                "counted).",
            ),
        ),
    ]
