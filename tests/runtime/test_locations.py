"""OSMO's storage URLs as fsspec reads them, and a data credential as the storage library's environment
(runtime/locations.py, docs/cli.md "Data"). Pure."""

from __future__ import annotations

import pytest

from runtime.locations import LocationError, parse, with_credential

VALUES = {"access_key_id": "id", "access_key": "key"}


@pytest.mark.parametrize(("url", "fsspec_url", "endpoint"), [
    ("s3://bucket/a/b/", "s3://bucket/a/b", None),
    ("gs://bucket/a", "s3://bucket/a", "https://storage.googleapis.com"),
    ("tos://tos.example.com/bucket/a", "s3://bucket/a", "https://tos.example.com"),
    ("swift://swift.example.com/AUTH_team/bucket/a", "s3://bucket/a", "https://swift.example.com"),
])
def test_s3_compatible_urls_map_to_s3_with_their_endpoint(url, fsspec_url, endpoint):
    place = with_credential(parse(url), VALUES)
    assert place.fsspec_url == fsspec_url
    assert place.env.get("AWS_ENDPOINT_URL_S3") == endpoint
    assert (place.env["AWS_ACCESS_KEY_ID"], place.env["AWS_SECRET_ACCESS_KEY"]) == ("id", "key")


def test_override_url_and_region_win_and_azure_uses_its_account():
    minio = with_credential(parse("s3://b/x"), {**VALUES, "override_url": "http://minio:9000", "region": "eu-1"})
    azure = with_credential(parse("azure://account/container/x"), VALUES)
    local = with_credential(parse("file:///tmp/x"), VALUES)

    assert minio.env["AWS_ENDPOINT_URL_S3"] == "http://minio:9000" and minio.env["AWS_DEFAULT_REGION"] == "eu-1"
    assert azure.fsspec_url == "abfs://container/x"
    assert azure.env == {"AZURE_STORAGE_ACCOUNT_NAME": "account", "AZURE_STORAGE_ACCOUNT_KEY": "key"}
    assert (local.fsspec_url, local.env) == ("file:///tmp/x", {})


@pytest.mark.parametrize(("url", "message"), [
    ("ftp://host/x", "is not a storage URL"),
    ("s3:/bucket", "is not a storage URL"),
    ("s3://", "no bucket after s3://"),
    ("s3://[::1", "is not a URL"),
    ("s3://b/../etc", "'.' and '..' are not path segments"),
    ("s3://b/x?versionId=1", "no ?query"),
    ("file://other-host/x", "names this machine"),
    ("tos://host", "tos://<endpoint>/<bucket>/<path>"),
    ("swift://host/account", "swift://<endpoint>/<account>/<bucket>/<path>"),
    ("azure://account", "azure://<account>/<container>/<path>"),
])
def test_a_url_that_is_not_a_storage_url_says_why(url, message):
    with pytest.raises(LocationError, match=message.replace("?", r"\?").replace(".", r"\.")):
        parse(url)
