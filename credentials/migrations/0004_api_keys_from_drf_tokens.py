"""The users' API keys move from DRF's ``authtoken_token`` table, where they were stored in clear, to
``credentials.ApiKey`` as SHA-256 digests (docs/operations.md "Secrets"): every key keeps working,
none stays readable in the database. A database that never had the table (a new installation) has
nothing to move."""

import hashlib
from datetime import UTC

from django.db import migrations
from django.utils import timezone
from django.utils.dateparse import parse_datetime

DRF_TOKENS = "authtoken_token"


def _aware(created):
    """A raw column's time: SQLite hands back text or a naive datetime, in UTC (Django's storage)."""
    if isinstance(created, str):
        created = parse_datetime(created)
    return timezone.make_aware(created, UTC) if timezone.is_naive(created) else created


def drf_tokens_hash(apps, schema_editor):
    connection = schema_editor.connection
    if DRF_TOKENS not in connection.introspection.table_names():
        return
    table = connection.ops.quote_name(DRF_TOKENS)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {connection.ops.quote_name('key')}, user_id, created FROM {table}")
        rows = cursor.fetchall()
    api_key = apps.get_model("credentials", "ApiKey")
    api_key.objects.bulk_create([
        api_key(user_id=user_id, digest=hashlib.sha256(key.encode()).hexdigest(), created_at=_aware(created))
        for key, user_id, created in rows
    ])
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {table}")


class Migration(migrations.Migration):
    dependencies = [("credentials", "0003_api_key")]

    # Backwards the keys stay digests: their clear values are gone, which is the point.
    operations = [migrations.RunPython(drf_tokens_hash, migrations.RunPython.noop)]
