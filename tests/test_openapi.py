import pytest
from django.core.management import call_command


@pytest.mark.django_db
def test_migrations_are_complete():
    # makemigrations --check exits non-zero (SystemExit) when a model change has no migration
    call_command("makemigrations", "--check", "--dry-run", verbosity=0)


def test_schema_validates_without_warnings(tmp_path):
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "schema.yaml"))
    assert "openapi: 3" in (tmp_path / "schema.yaml").read_text()


@pytest.mark.django_db
def test_schema_and_docs_are_public(client):
    assert client.get("/api/schema/").status_code == 200
    docs = client.get("/api/docs/")
    assert docs.status_code == 200
    assert b"swagger-ui" in docs.content
