"""PostgreSQL prepares the queries a connection repeats (``DATABASE_PREPARED_STATEMENTS``)."""

from __future__ import annotations

import pytest
from django.db import connection

from workflows.models import Workflow

pytestmark = pytest.mark.django_db


def test_a_query_repeated_on_a_connection_is_prepared_there():
    # given: the service's settings (DATABASE_PREPARED_STATEMENTS on by default)
    from django.conf import settings

    assert settings.DATABASES["default"]["OPTIONS"]["server_side_binding"] is True
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_prepared_statements")
        before = cursor.fetchone()[0]
    # when: one query (a submission's read of a name's last number) runs more often than the threshold
    for index in range(settings.DATABASES["default"]["OPTIONS"]["prepare_threshold"] + 1):
        Workflow.objects.filter(name=f"prepared-{index}").order_by("-seq").values_list("seq", flat=True).first()
    # then: PostgreSQL holds it as a prepared statement of this connection
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        statements = [row[0] for row in cursor.fetchall()]
    assert len(statements) > before
    assert any('"workflows_workflow"."seq"' in statement for statement in statements)
