"""Workflow numbers count per owner and name (docs/design.md §7, "Workflow ids"): ``workflow_id`` is
unique per owner only, and ``global_id`` names a workflow outside the database. Existing workflows keep
their ids, and their ``global_id`` is their id, so the pods, labels and artifact folders already made
from it still match."""

from django.db import migrations, models
from django.db.models import F


def copy_ids(apps, schema_editor):
    Workflow = apps.get_model("workflows", "Workflow")
    Workflow.objects.update(global_id=F("workflow_id"))


class Migration(migrations.Migration):

    dependencies = [
        ("workflows", "0014_group_requeues"),
    ]

    operations = [
        migrations.AddField(
            model_name="workflow",
            name="global_id",
            field=models.CharField(max_length=120, null=True),
        ),
        migrations.RunPython(copy_ids, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="workflow",
            name="global_id",
            field=models.CharField(
                help_text="Unique across users: what pod names, labels and artifact folders are built from.",
                max_length=120, unique=True,
            ),
        ),
        migrations.AlterField(
            model_name="workflow",
            name="workflow_id",
            field=models.CharField(db_index=True, max_length=100),
        ),
        migrations.RemoveConstraint(
            model_name="workflow",
            name="workflow_unique_name_seq",
        ),
        migrations.AddConstraint(
            model_name="workflow",
            constraint=models.UniqueConstraint(fields=("submitted_by", "name", "seq"),
                                               name="workflow_unique_owner_name_seq"),
        ),
        migrations.AddConstraint(
            model_name="workflow",
            constraint=models.UniqueConstraint(fields=("submitted_by", "workflow_id"), name="workflow_unique_owner_id"),
        ),
    ]
