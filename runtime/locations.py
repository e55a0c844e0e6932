"""OSMO's storage URLs and the credential of one, as the storage layer (:mod:`runtime.storage`, fsspec) reads
them: which fsspec URL a storage URL is, and the environment variables that carry a data credential's values
to the library (the runtime takes credentials from its environment only). Pure.

==========================================  ============================================================
OSMO URL                                    fsspec URL and endpoint
==========================================  ============================================================
``s3://<bucket>/<path>``                    ``s3://<bucket>/<path>``; AWS, or the credential's ``override_url``
``gs://<bucket>/<path>``                    ``s3://<bucket>/<path>`` at ``https://storage.googleapis.com``
                                            (Cloud Storage's S3-compatible API, with HMAC keys)
``tos://<endpoint>/<bucket>/<path>``        ``s3://<bucket>/<path>`` at ``https://<endpoint>``
``swift://<endpoint>/<account>/<bucket>/…``  ``s3://<bucket>/<path>`` at ``https://<endpoint>`` (Swift's S3 API)
``azure://<account>/<container>/<path>``    ``abfs://<container>/<path>`` (adlfs, when installed)
``file:///<path>``                          the local file system (no credential)
==========================================  ============================================================
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

SCHEMES = ("s3", "gs", "azure", "tos", "swift", "file")
REMOTE_SCHEMES = SCHEMES[:-1]
GCS_S3_ENDPOINT = "https://storage.googleapis.com"
#: What is replaced in the environment of a transfer (so no earlier session or profile mixes in).
CLEARED = ("AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_DEFAULT_REGION",
           "AWS_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AZURE_STORAGE_ACCOUNT_NAME",
           "AZURE_STORAGE_ACCOUNT_KEY")


class LocationError(ValueError):
    """Not a storage URL this service knows; ``str()`` says what is wrong."""


@dataclass(frozen=True, slots=True)
class Location:
    url: str  # as the user wrote it (without a trailing slash)
    scheme: str
    fsspec_url: str
    endpoint: str = ""  # the host of tos:// and swift:// URLs
    env: dict[str, str] = field(default_factory=dict)


def parse(url: str) -> Location:
    """The location of ``url`` (no credential yet). Raises :class:`LocationError`."""
    text = url.strip()
    try:
        parts = urlsplit(text)
    except ValueError as exc:  # an unclosed IPv6 bracket, say
        raise LocationError(f"{text[:200]!r} is not a URL: {exc}") from exc
    if "\x00" in text:
        raise LocationError("a storage URL holds no NUL character")
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES or "://" not in text:
        raise LocationError(f"{text[:200]!r} is not a storage URL: write SCHEME://..., SCHEME one of "
                            f"{', '.join(SCHEMES)}")
    if parts.query or parts.fragment:
        raise LocationError(f"{text[:200]!r}: a storage URL has no ?query or #fragment")
    segments = [segment for segment in parts.path.split("/") if segment]
    if any(segment in (".", "..") for segment in segments):
        raise LocationError(f"{text[:200]!r}: '.' and '..' are not path segments of a storage URL")
    if scheme == "file":
        if parts.netloc not in ("", "localhost"):
            raise LocationError(f"{text[:200]!r}: a file URL names this machine: file:///absolute/path")
        return Location(text.rstrip("/") or "file:///", scheme, "file:///" + "/".join(segments))
    if not parts.netloc:
        raise LocationError(f"{text[:200]!r}: no {'bucket' if scheme in ('s3', 'gs') else 'host'} after {scheme}://")
    host = parts.netloc
    if scheme in ("s3", "gs"):
        return Location(text.rstrip("/"), scheme, "s3://" + "/".join([host, *segments]))
    if scheme == "tos":
        if not segments:
            raise LocationError(f"{text[:200]!r}: write tos://<endpoint>/<bucket>/<path>")
        return Location(text.rstrip("/"), scheme, "s3://" + "/".join(segments), endpoint=host)
    if scheme == "swift":
        if len(segments) < 2:
            raise LocationError(f"{text[:200]!r}: write swift://<endpoint>/<account>/<bucket>/<path>")
        return Location(text.rstrip("/"), scheme, "s3://" + "/".join(segments[1:]), endpoint=host)
    if not segments:  # azure
        raise LocationError(f"{text[:200]!r}: write azure://<account>/<container>/<path>")
    return Location(text.rstrip("/"), scheme, "abfs://" + "/".join(segments), endpoint=host)


def with_credential(location: Location, values: Mapping[str, str]) -> Location:
    """``location`` with the environment that gives a data credential's ``values`` (OSMO's keys:
    ``access_key_id``, ``access_key``, optional ``region`` and ``override_url``) to the storage library."""
    if location.scheme == "file":
        return location
    if location.scheme == "azure":
        env = {"AZURE_STORAGE_ACCOUNT_NAME": location.endpoint, "AZURE_STORAGE_ACCOUNT_KEY": values["access_key"]}
        return Location(location.url, location.scheme, location.fsspec_url, location.endpoint, env)
    env = {"AWS_ACCESS_KEY_ID": values["access_key_id"], "AWS_SECRET_ACCESS_KEY": values["access_key"]}
    if values.get("region"):
        env["AWS_DEFAULT_REGION"] = values["region"]
    endpoint = values.get("override_url") or {"gs": GCS_S3_ENDPOINT, "tos": f"https://{location.endpoint}",
                                              "swift": f"https://{location.endpoint}"}.get(location.scheme, "")
    if endpoint:
        env["AWS_ENDPOINT_URL_S3"] = endpoint
    return Location(location.url, location.scheme, location.fsspec_url, location.endpoint, env)


def join(url: str, relative: str) -> str:
    """``url`` with a relative path below it."""
    return f"{url.rstrip('/')}/{relative.lstrip('/')}" if relative else url


__all__ = ["CLEARED", "Location", "LocationError", "REMOTE_SCHEMES", "SCHEMES", "join", "parse", "with_credential"]
